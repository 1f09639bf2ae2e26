#!/usr/bin/env python3
"""Fails when any module of bot or handlers imports itself back through other modules.

`make lint` runs it beside import-linter's `acyclic_siblings` contract (pyproject.toml), which
finds cycles between the children of each package but cannot see one through a package's own
`__init__` (`bot/backends/sim/__init__.py` imports `fleet`, so `fleet` importing
`bot.backends.sim` would be a cycle it misses). This script looks at modules alone, so it finds
that too: it lists every group of modules that import one another (a strongly connected
component of grimp's graph) with the imports that tie the group together, and exits 1.

Every import counts: at the top of a module, inside a function, and under `if TYPE_CHECKING:`
(a type-only cycle still ties the two modules together, and hiding an import there is how a
cycle usually gets in).
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "handlers")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Groups of two or more modules each reachable from the others (Tarjan's algorithm,
    iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def imported(module: str) -> list[str]:
        return sorted(m for m in graph.find_modules_directly_imported_by(module) if m != module)

    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(imported(start)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(imported(child))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def main() -> int:
    sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    found = cycles(graph)
    for group in found:
        members = set(group)
        print(f"Import cycle among {len(group)} modules:")
        for importer in group:
            for target in sorted(graph.find_modules_directly_imported_by(importer) & members):
                for detail in graph.get_import_details(importer=importer, imported=target):
                    print(
                        f"  {importer} -> {target}"
                        f" (line {detail['line_number']}: {detail['line_contents']})"
                    )
    if found:
        print(
            "Move what both sides need into one of them or a small module of its own "
            "(ARCHITECTURE.md, 'The rules')."
        )
        return 1
    print(f"No import cycles among {len(graph.modules)} modules of {', '.join(PACKAGES)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
