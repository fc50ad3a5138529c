"""Fail when hermes_fsm has an import cycle between its modules.

Every import statement counts, at module level or inside a function (grimp reads them all);
imports under ``if TYPE_CHECKING:`` count too unless ``--skip-type-checking`` is given.
"""

from __future__ import annotations

import sys

import grimp


def cycles(package: str, *, type_checking: bool = True) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=not type_checking)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = edges[node]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def main() -> int:
    found = cycles("hermes_fsm", type_checking="--skip-type-checking" not in sys.argv)
    for component in found:
        print("import cycle:", " <-> ".join(component))
    if found:
        print(f"{len(found)} import cycle(s); break each by moving the shared piece down a layer")
        return 1
    print("no import cycles in hermes_fsm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
