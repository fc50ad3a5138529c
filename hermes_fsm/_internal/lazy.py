"""Package faces whose names are imported on first use (PEP 562).

A package ``__init__`` that imported every module it names would make ``import
hermes_fsm.cli.main`` (so ``hermes-fsm --help``) pay for numpy, the MCP SDK, Redis and the
rest. Instead it lists where each name lives and imports that module when the name is
first asked for; type checkers see the same names through an ``if TYPE_CHECKING:`` import
block. ``tests/test_lazy_faces.py`` checks that each face's two lists agree and resolve.

::

    __getattr__, __dir__ = lazy_face(__name__, {"Orchestrator": "hermes_fsm.engine.orchestrator"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_face"]


def lazy_face(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a module ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        names: each exported name → the dotted module that defines it.

    Returns:
        ``(__getattr__, __dir__)``: the first imports the name's module on first use and
        keeps the value in the package's namespace (later lookups do not come back); an
        unknown name raises ``AttributeError`` as a plain module would.
    """

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
