#!/usr/bin/env python3
"""Check that the relative links of the README and docs/ resolve, #anchors included.

    python3 scripts/check_links.py [FILE_OR_FOLDER ...]

With no argument: README.md and every .md file under docs/. A link resolves when its file (or
folder) exists inside the repository and, where it names an #anchor in a Markdown file, that
file has a heading whose GitHub anchor is that name (or an HTML `id`/`name` of it). Links with a
scheme (https:, mailto:) are not fetched: no network. Links inside code spans and fenced code
blocks are not links. Prints one line per broken link and exits 1 if there is any.

Standard library only, so `make test` can run it before anything is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"  # the text
    r"\(\s*(<[^>]*>|[^)\s]+)"  # the target
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"  # an optional title
)
_REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_ID = re.compile(r"""<[a-zA-Z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def _outside_fences(text: str) -> list[tuple[int, str]]:
    """The lines that are not in a fenced code block, with their 1-based numbers."""
    kept: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0]:
            if len(m.group(1)) >= len(fence):
                fence = None
        elif fence is None:
            kept.append((number, line))
    return kept


def _rendered(heading: str) -> str:
    """A heading's text as GitHub renders it: code spans keep their content, links their text,
    emphasis and HTML tags go."""
    parts = _CODE_SPAN.split(heading)
    out: list[str] = []
    # split() gives text, fence, code, text, fence, code, ...
    for i in range(0, len(parts), 3):
        text = parts[i]
        text = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", text)
        text = re.sub(r"<[^>]+>", "", text)
        text = text.replace("*", "")
        text = re.sub(r"(?<!\w)_{1,2}(?=\S)(.+?)(?<=\S)_{1,2}(?!\w)", r"\1", text)
        out.append(text)
        if i + 2 < len(parts):
            out.append(parts[i + 2])
    return "".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of one heading, before duplicates are numbered: lower case, every
    character but letters, digits, `_`, `-` and spaces dropped, spaces made `-`."""
    text = _rendered(heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown page has: its headings' (a repeated one numbered -1, -2, ... as
    GitHub does) and the ids and names of its HTML elements."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    lines = _outside_fences(text)
    headings: list[str] = []
    for i, (number, line) in enumerate(lines):
        m = _ATX.match(line)
        if m:
            headings.append(m.group(2) or "")
            continue
        prev = lines[i - 1] if i else None
        if (
            _SETEXT.match(line)
            and prev is not None
            and prev[0] == number - 1
            and prev[1].strip()
            and not _ATX.match(prev[1])
            and not prev[1].lstrip().startswith(("-", "*", "+", "|", ">"))
        ):
            headings.append(prev[1].strip())
    for heading in headings:
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    for _, line in lines:
        found.update(_HTML_ID.findall(line))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """Every link target of a Markdown page, with its line, outside code."""
    found: list[tuple[int, str]] = []
    for number, line in _outside_fences(text):
        line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        targets = [m.group(1) for m in _INLINE.finditer(line)]
        ref = _REFDEF.match(line)
        if ref:
            targets.append(ref.group(1))
        found.extend((number, t[1:-1] if t.startswith("<") else t) for t in targets)
    return found


def check_file(page: Path, root: Path = ROOT) -> list[str]:
    """The broken links of one page, one sentence each."""
    problems: list[str] = []
    text = page.read_text(encoding="utf-8")
    where = page.relative_to(root) if page.is_relative_to(root) else page
    for number, target in links(text):
        if _SCHEME.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        dest = (page.parent / path_part).resolve() if path_part else page.resolve()
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where}:{number}: {target}: leaves the repository")
            continue
        if not dest.exists():
            problems.append(f"{where}:{number}: {target}: no such file")
            continue
        if not fragment:
            continue
        if dest.is_dir() or dest.suffix.lower() not in (".md", ".markdown"):
            continue  # GitHub's line anchors (#L10) and the like: not checked
        if unquote(fragment) not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{where}:{number}: {target}: no heading with anchor #{fragment}")
    return problems


def pages(args: list[str], root: Path = ROOT) -> list[Path]:
    """The Markdown files named, a folder standing for every .md file under it."""
    named = [Path(a) for a in args] or [root / "README.md", root / "docs"]
    found: list[Path] = []
    for path in named:
        path = path if path.is_absolute() else (Path.cwd() / path)
        if path.is_dir():
            found.extend(sorted(path.rglob("*.md")))
        elif path.exists():
            found.append(path)
    return [p.resolve() for p in found]


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    args = sys.argv[1:] if argv is None else argv
    checked = pages(args, root)
    if not checked:
        print("check_links: no Markdown files found", file=sys.stderr)
        return 1
    problems = [p for page in checked for p in check_file(page, root)]
    for problem in problems:
        print(problem, file=sys.stderr)
    total = sum(len(links(p.read_text(encoding="utf-8"))) for p in checked)
    if problems:
        print(
            f"check_links: {len(problems)} broken of {total} links in {len(checked)} files",
            file=sys.stderr,
        )
        return 1
    print(f"check_links: {total} links in {len(checked)} files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
