"""The import graph of a package: its import circles and its module sizes.

An import circle is a strongly connected component of more than one module in the graph of
every import grimp finds — top-level, lazy (inside a function) and type-only (under
``TYPE_CHECKING``) alike: a type-only circle still ties the modules' designs together.

Run it by hand for the figures (``python tests/import_graph.py [package]``, from any folder: it
reads the checkout it sits in);
``tests/test_architecture.py`` keeps the count of circles down.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grimp


@dataclass(frozen=True)
class ImportGraph:
    """Each module of a package and the modules of the same package it imports."""

    package: str
    imports: Mapping[str, frozenset[str]]

    @classmethod
    def build(cls, package: str) -> ImportGraph:
        graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)
        modules = sorted(graph.modules)
        return cls(package, {m: frozenset(graph.find_modules_directly_imported_by(m)) for m in modules})

    def without_package_reexports(self) -> ImportGraph:
        """The graph less each package ``__init__``'s imports of its own submodules.

        A package that re-exports names from its submodules, and a submodule that imports a
        sibling through the package, make a loop through ``__init__`` that says nothing about
        the design; this view leaves those loops out.
        """
        return ImportGraph(
            self.package,
            {m: frozenset(t for t in targets if not t.startswith(m + ".")) for m, targets in self.imports.items()},
        )

    def layers(self) -> dict[str, list[str]]:
        """The graph between the package's top-level parts (``agent``, ``app``, ...): what each imports."""
        depth = self.package.count(".") + 2

        def part(module: str) -> str:
            return ".".join(module.split(".")[:depth]).removeprefix(self.package + ".")

        edges: dict[str, set[str]] = {}
        for module, targets in self.imports.items():
            edges.setdefault(part(module), set()).update(part(t) for t in targets if part(t) != part(module))
        return {p: sorted(t) for p, t in sorted(edges.items())}

    def circles(self) -> list[list[str]]:
        """The import circles: strongly connected components of two or more modules, sorted."""
        return sorted(
            (sorted(c) for c in _strongly_connected(self.imports) if len(c) > 1),
            key=lambda c: (-len(c), c),
        )


def _strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is too deep for recursion in a big package)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def module_lines(package: str) -> dict[str, int]:
    """Lines per module file of an importable package."""
    root = Path(__import__(package).__file__ or "").parent
    return {
        ".".join((package, *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): len(
            p.read_text(encoding="utf-8").splitlines()
        )
        for p in sorted(root.rglob("*.py"))
    }


def report(package: str) -> str:
    graph = ImportGraph.build(package)
    lines = module_lines(package)
    sizes = sorted(lines.values())
    out = [f"{package}: {len(graph.imports)} modules"]
    quartiles = statistics.quantiles(sizes, n=4)
    out.append(
        f"lines per module: median {statistics.median(sizes):.0f}, quartiles {quartiles[0]:.0f}/{quartiles[2]:.0f}, "
        f"p90 {statistics.quantiles(sizes, n=10)[8]:.0f}, max {sizes[-1]} "
        f"({max(lines, key=lambda m: lines[m])}); "
        f"over 500: {sum(s > 500 for s in sizes)}, over 800: {sum(s > 800 for s in sizes)}"
    )
    for title, view in (
        ("import circles (package __init__ re-exports left out)", graph.without_package_reexports()),
        ("import circles (every import)", graph),
    ):
        circles = view.circles()
        out.append(f"{title}: {len(circles)}")
        out.extend(f"  {len(c)}: {' '.join(m.removeprefix(package + '.') for m in c)}" for c in circles)
    out.append("what each top-level part imports:")
    out.extend(f"  {p} -> {', '.join(t) or '-'}" for p, t in graph.layers().items())
    return "\n".join(out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout, not an installed copy
    print(report(sys.argv[1] if len(sys.argv) > 1 else "homeagent_core"))
