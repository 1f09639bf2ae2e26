#!/usr/bin/env python3
"""Fails on a function, method, property or class that nothing uses (vulture).

Looks at the trees `make lint` lints (bot, handlers, tests, bench, scripts), so a helper that
only tests call is used. vulture goes by name: a definition counts as used when its name is
read anywhere in those trees (a call, an attribute, a registration such as
`reg.action(ID, on_pick)`), so a new function under a name nothing else reads is reported,
and one that shares a used name is not. Unused variables, attributes and imports are left to
ruff and review: pydantic fields and Block Kit keys would need a long whitelist here.

The few names a framework calls by name or through a decorator, never our code, are listed
below with who calls them. Keep them few: a definition needs a line here only when nothing
in the code names it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("bot", "handlers", "tests", "bench", "scripts")
KINDS = frozenset({"function", "method", "property", "class"})

# Registered by a decorator and called by the framework.
FRAMEWORK_DECORATORS = (
    "@field_validator",  # pydantic: runs on validation
    "@model_validator",  # pydantic: runs on validation
    "@pytest.fixture",  # pytest: asked for by parameter name
)
# Called by name by a framework.
FRAMEWORK_NAMES = (
    "async_process",  # slack-bolt calls a middleware's (handlers/registry.py: Middleware)
    "do_GET",  # http.server's request handler, in the test and bench fakes
    "do_POST",
    "log_message",
    "pytest_*",  # pytest's hooks in conftest.py
    "_block_*",  # the emulator's Block Kit check, by block type (getattr)
)


def main() -> int:
    finder = Vulture(
        ignore_names=list(FRAMEWORK_NAMES), ignore_decorators=list(FRAMEWORK_DECORATORS)
    )
    finder.scavenge([str(ROOT / p) for p in PATHS])
    dead = [item for item in finder.get_unused_code() if item.typ in KINDS]
    for item in dead:
        where = Path(item.filename).resolve().relative_to(ROOT)
        print(f"{where}:{item.first_lineno}: unused {item.typ} {item.name!r}")
    if dead:
        print(
            f"{len(dead)} unused: remove them, or if a framework calls one by name, add the name "
            "to FRAMEWORK_NAMES in scripts/dead_code.py with who calls it."
        )
        return 1
    print(f"No unused functions, methods, properties or classes in {', '.join(PATHS)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
