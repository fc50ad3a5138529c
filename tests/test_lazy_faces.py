"""Package faces imported on first use (``hermes_fsm._internal.lazy``): every name a face
exports resolves to the object of the module it names, and the names type checkers see
(its ``if TYPE_CHECKING:`` imports) are the names it exports."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

FACES = ["hermes_fsm", "hermes_fsm.brain", "hermes_fsm.config", "hermes_fsm.contracts",
         "hermes_fsm.engine", "hermes_fsm.events", "hermes_fsm.graph", "hermes_fsm.memory",
         "hermes_fsm.replay", "hermes_fsm.server", "hermes_fsm.store", "hermes_fsm.tools",
         "hermes_fsm.tools.bus", "hermes_fsm.tools.mcp"]


def typed_names(module: object) -> set[str]:
    """The names the module imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    names |= {a.asname or a.name for a in inner.names}
    return names


@pytest.mark.parametrize("name", FACES)
def test_every_exported_name_resolves_and_is_what_type_checkers_see(name: str) -> None:
    face = importlib.import_module(name)
    exported = set(face.__all__) - {"__version__"}
    assert typed_names(face) == exported
    for attr in exported:
        value = getattr(face, attr)
        assert value is not None and attr in dir(face)
        home = getattr(value, "__module__", None)
        if home is not None and not isinstance(value, type(face)):
            assert getattr(importlib.import_module(home), attr, value) is value


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    memory = importlib.import_module("hermes_fsm.memory")
    with pytest.raises(AttributeError, match=r"'hermes_fsm\.memory' has no attribute 'Nope'"):
        memory.Nope  # noqa: B018
