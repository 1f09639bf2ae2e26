"""The deployment files as the tests read them: the Dockerfile's stages, the systemd unit's
entries, the example environment file's names, and the command `make run` runs."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
UNIT = REPO / "deploy" / "systemd" / "meowbot.service"
ENV_EXAMPLE = REPO / "deploy" / "systemd" / "meowbot.env.example"


@dataclass
class Stage:
    """One FROM of a Dockerfile and its instructions (keyword upper-cased, arguments as
    written, continuation lines joined)."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def dockerfile_stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """The ARG defaults given before the first FROM, and the stages, with those ARGs
    substituted in each FROM."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), rest)
            image, *name = re.split(r"\s+as\s+", base, flags=re.I)
            stages.append(Stage(image, name[0] if name else None))
        elif not stages:
            if keyword == "ARG" and "=" in rest:
                key, _, value = rest.partition("=")
                args[key] = value
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(" ".join((pending + stripped).split()))
        pending = ""
    return lines


def unit_entries(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections, each its (key, value) entries in order (a key may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"an entry before any section: {line!r}"
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def unit_value(text: str, section: str, key: str) -> str:
    """The last value of `key` in `section` (systemd's rule for single-valued settings)."""
    values = [v for k, v in unit_entries(text).get(section, []) if k == key]
    assert values, f"[{section}] has no {key}="
    return values[-1]


# `#NAME=value`, no space after the `#`, is a setting commented out; `# ...` is prose.
ENV_LINE = re.compile(r"^(#?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def env_file_entries(text: str) -> list[tuple[str, str, bool]]:
    """(name, value, commented out) for each NAME=value line of an environment file, those
    commented out too (a suggestion to uncomment is held to the same names). Values are read
    as systemd reads them: one pair of surrounding quotes dropped."""
    out: list[tuple[str, str, bool]] = []
    for raw in text.splitlines():
        m = ENV_LINE.match(raw.strip())
        if m is None:
            continue
        value = m.group(3).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out.append((m.group(2), value, m.group(1) == "#"))
    return out


def make_run_argv() -> list[str]:
    """The command line of the Makefile's `run` target, the binary by its file name."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^run:", line))
    recipe = lines[start + 1] if start + 1 < len(lines) else ""
    assert recipe.startswith("\t"), "the Makefile's run target has no recipe"
    argv = shlex.split(recipe.strip())
    return [Path(argv[0]).name, *argv[1:]]
