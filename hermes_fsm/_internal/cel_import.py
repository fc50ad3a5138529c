"""The ``cel`` package's compiled core, without the package's command-line tool.

``import cel`` runs ``cel/__init__.py``, which imports ``cel.cli`` (typer, prompt_toolkit,
pygments, rich) before re-exporting everything of the compiled extension ``cel.cel``:
0.15–0.4 s of a CLI process that checks one tool precondition (issue 19). The engine
needs only ``compile`` and ``Context``, which live in ``cel.cel``. :func:`cel_core` loads
that extension module by itself and registers it as ``cel.cel``, so a later ``import cel``
(by a user's code, or our fallback) re-exports this very module rather than initialising
the extension a second time. The opt-in ``cel.stdlib`` functions are not registered by
``import cel`` either, so expressions behave the same.

When ``cel`` is already imported, or the extension is not where the package keeps it (a
layout we do not know), it is plain ``import cel``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["cel_core"]

_core: ModuleType | None = None


def cel_core() -> ModuleType:
    """A module with ``cel``'s ``compile`` and ``Context`` (imported on first call)."""
    global _core
    if _core is None:
        _core = sys.modules.get("cel") or sys.modules.get("cel.cel") or _extension()
    return _core


def _extension() -> ModuleType:
    spec = importlib.util.find_spec("cel")  # finds the package without running it
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"cel{suffix}"
            if path.is_file():
                return _load("cel.cel", path)
    import cel

    return cel


def _load(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    if not (hasattr(module, "compile") and hasattr(module, "Context")):
        del sys.modules[name]  # not the extension we know: the package's own way
        import cel

        return cel
    return module
