"""Your own tools from configuration (issue 18, point 4): ``tools.local``, arguments typed
from a tool's input schema, and the generic answer for a text result."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from hermes_fsm.brain.typed_arguments import typed_arguments
from hermes_fsm.cli.main import main
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import load_config
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ConfigError

MODULE = """
    from hermes_fsm import ToolRegistry

    registry = ToolRegistry()

    @registry.tool()
    def add_numbers(a: float, b: float) -> dict[str, float]:
        \"\"\"Add two numbers.\"\"\"
        return {"sum": a + b}

    def build():
        return registry
    """


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file with a module of tools beside it (not on sys.path)."""
    name = f"h18tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    config = tmp_path / "hermes.yaml"
    config.write_text(f"mcp_servers: {{}}\ntools: {{local: ['{name}:registry']}}\n",
                      encoding="utf-8")
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.syspath_prepend(str(tmp_path / "nothing-here"))  # restores sys.path after
    return config


def test_configured_local_tools_replace_the_demo_tools(app):
    orchestrator = build_orchestrator(load_config(app, environ={}), store=None)
    assert orchestrator.services.tools.names() == ["add_numbers"]


def test_demo_true_keeps_the_demo_tools_beside_yours(app):
    app.write_text(app.read_text().replace("local:", "demo: true, local:"), encoding="utf-8")
    names = build_orchestrator(load_config(app, environ={}), store=None).services.tools.names()
    assert "add_numbers" in names and set(build_demo_registry().names()) <= set(names)


def test_a_callable_returning_a_registry_is_taken_too(app):
    app.write_text(app.read_text().replace(":registry", ":build"), encoding="utf-8")
    names = build_orchestrator(load_config(app, environ={}), store=None).services.tools.names()
    assert names == ["add_numbers"]


def test_contracts_export_covers_your_tools(app, tmp_path):
    out = io.StringIO()
    target = tmp_path / "tool-contracts"
    code = main(["--config", str(app), "contracts", "export", "--tools-dir", str(target),
                 "--dir", str(tmp_path / "state-contracts")], out=out)
    assert code == 0, out.getvalue()
    assert (target / "add_numbers.yaml").is_file()
    code = main(["--config", str(app), "contracts", "check", "--tools-dir", str(target),
                 "--dir", str(tmp_path / "state-contracts")], out=out)
    assert code == 0 and "1 tool contract(s)" in out.getvalue()


@pytest.mark.parametrize(("spec", "says"), [
    ("no_such_module_h18:registry", "cannot import"),
    ("json:registry", "has no 'registry'"),
    ("json:dumps", "calling it raised"),
    ("json:__name__", "not a ToolRegistry"),
])
def test_a_bad_tools_entry_says_what_and_what_to_do(tmp_path, spec, says):
    config = tmp_path / "hermes.yaml"
    config.write_text(f"mcp_servers: {{}}\ntools: {{local: ['{spec}']}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=says):
        build_orchestrator(load_config(config, environ={}), store=None)


def test_a_name_taken_twice_is_refused(app):
    app.write_text(app.read_text().replace("]}", ", " + app.read_text().split("'")[1] +
                                           "]}"), encoding="utf-8")
    with pytest.raises(ConfigError, match="registers 'add_numbers'"):
        build_orchestrator(load_config(app, environ={}), store=None)


# --- arguments typed from the input schema -----------------------------------------------------

SUM = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
       "required": ["a", "b"]}


def test_text_slots_become_the_numbers_a_tool_asks_for():
    assert typed_arguments({"a": "3", "b": "4.5"}, SUM) == {"a": 3, "b": 4.5}


@pytest.mark.parametrize(("value", "schema", "expected"), [
    ("12", {"type": "integer"}, 12),
    ("1,200", {"type": "integer"}, 1200),
    ("yes", {"type": "boolean"}, True),
    ("否", {"type": "boolean"}, False),
    ("7", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 7),
    ("7", {"type": ["string", "integer"]}, "7"),
    ("three", {"type": "number"}, "three"),
    ("nan", {"type": "number"}, "nan"),
])
def test_what_converts_cleanly_is_converted_and_the_rest_left(value, schema, expected):
    assert typed_arguments({"x": value}, {"properties": {"x": schema}}) == {"x": expected}


def test_arguments_without_a_declared_property_are_left_alone():
    assert typed_arguments({"x": "3"}, {"type": "object"}) == {"x": "3"}
