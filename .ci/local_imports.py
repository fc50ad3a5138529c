"""List the imports inside functions (and under ``if TYPE_CHECKING:``) in hermes_fsm.

Prints ``file:line: module`` for each, then a count; ``--count`` prints only the count.
Layering is checked by import-linter; this list is for review: a function-local import of
hermes_fsm's own modules usually hides a loop.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def local_imports(root: Path) -> list[tuple[str, int, str, str]]:
    """``(file, line, module, why)`` for every import not at a module's top level."""
    found: list[tuple[str, int, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "function"
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                kind = "TYPE_CHECKING"
            else:
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [a.name for a in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    names = ["." * inner.level + (inner.module or "")]
                else:
                    continue
                for name in names:
                    found.append((str(path), inner.lineno, name, kind))
    return sorted(set(found))


def main() -> int:
    found = local_imports(Path(sys.argv[-1]) if len(sys.argv) > 1 and not
                          sys.argv[-1].startswith("-") else Path("hermes_fsm"))
    if "--count" not in sys.argv:
        for path, line, module, kind in found:
            print(f"{path}:{line}: {module} ({kind})")
    own = sum(1 for _, _, m, _ in found if m.startswith(("hermes_fsm", ".")))
    print(f"{len(found)} local imports, {own} of them of hermes_fsm's own modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
