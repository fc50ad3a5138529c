"""Malformed input files through the CLI: a non-zero exit and one line naming the file
(and, where there is one, the line and field) — never a traceback.

Each kind of file the CLI reads: graphs, tool contracts, rules files, config files and
recordings; nested too deeply, too big, or (tool contracts) with a ``$ref`` that cannot
be followed.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm.cli.main import main

MAX_YAML_BYTES = 1024 * 1024  # hermes_fsm._internal.yaml_lines.MAX_YAML_BYTES
ROOT = Path(__file__).resolve().parent.parent
TOOL_CONTRACTS = ROOT / "contracts" / "tools"
GOLDEN = Path(__file__).parent / "recordings" / "inventory_en.jsonl"
DEEP = "[" * 1000 + "]" * 1000  # a RecursionError in PyYAML, unbounded


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out + captured.err


def assert_one_line(output: str, path: Path, where: str) -> None:
    """Exactly one line names ``path``, followed by ``where`` (a regular expression);
    no traceback."""
    assert "Traceback" not in output
    naming = [line for line in output.splitlines() if str(path) in line]
    assert len(naming) == 1, output
    assert re.search(re.escape(str(path)) + where, naming[0]), naming[0]


SIZE = r"(:1)?: the file is [\d,]+ bytes, over the [\d,]+-byte limit"


# --- graphs ---------------------------------------------------------------------------


def test_a_deeply_nested_graph_is_one_line_at_its_line(tmp_path, capsys):
    path = tmp_path / "deep.yaml"
    path.write_text(f"name: g\ninitial: IDLE\nstates:\n  IDLE:\n    notes: {DEEP}\n",
                    encoding="utf-8")
    code, output = run(["graph", "--graph", str(path)], capsys)
    assert code == 1
    assert_one_line(output, path, ":5: nested more than 64 levels deep")


def test_a_deeply_nested_block_mapping_graph_is_one_line(tmp_path, capsys):
    path = tmp_path / "deep.yaml"
    path.write_text("a:\n" + "".join(" " * i + " b:\n" for i in range(1, 400)), encoding="utf-8")
    code, output = run(["graph", "--graph", str(path)], capsys)
    assert code == 1
    assert_one_line(output, path, ":64: nested more than 64 levels deep")


def test_a_huge_graph_file_is_refused_before_it_is_parsed(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    states = "".join(f"  S{i}: {{description: {'x' * 40}}}\n" for i in range(300_000))
    path.write_text(f"name: g\ninitial: IDLE\nstates:\n{states}", encoding="utf-8")
    assert path.stat().st_size > 10 * MAX_YAML_BYTES
    started = time.perf_counter()
    code, output = run(["graph", "--graph", str(path)], capsys)
    assert code == 1 and time.perf_counter() - started < 2
    assert_one_line(output, path, SIZE)
    assert f"over the {MAX_YAML_BYTES:,}-byte limit" in output


# --- tool contracts ---------------------------------------------------------------------


def _contracts_with(tmp_path: Path, change: Any) -> Path:
    """A copy of the pinned tool contracts with ``change`` applied to inventory_lookup's."""
    directory = tmp_path / "tools"
    shutil.copytree(TOOL_CONTRACTS, directory)
    path = directory / "inventory_lookup.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    text = change(doc)
    path.write_text(text if isinstance(text, str) else yaml.safe_dump(doc, sort_keys=False),
                    encoding="utf-8")
    return path


def _input_schema(schema: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["input_schema"] = schema
    return change


@pytest.mark.parametrize(("change", "where"), [
    pytest.param(_input_schema({"$ref": "#/nowhere"}),
                 r":\d+: input_schema: \$ref '#/nowhere' at / points at nothing",
                 id="ref_nowhere"),
    pytest.param(_input_schema({"type": "object", "properties": {
        "sku": {"$ref": "#/$defs/missing"}}}),
        r":\d+: input_schema: \$ref '#/\$defs/missing' at /properties/sku points at nothing",
        id="nested_ref_nowhere"),
    pytest.param(_input_schema({"$ref": "https://example.com/schema.json"}),
                 r":\d+: input_schema: \$ref 'https://example\.com/schema\.json' at / is not "
                 "a local",
                 id="remote_ref"),
    pytest.param(lambda doc: "name: inventory_lookup\ninput_schema: " + DEEP + "\n",
                 ":2: nested more than 64 levels deep", id="deep"),
    pytest.param(lambda doc: "name: inventory_lookup\ndescription: " + "x" * (
        MAX_YAML_BYTES + 1) + "\n", SIZE, id="huge"),
])
def test_a_malformed_tool_contract_is_one_line_from_contracts_check(tmp_path, capsys, change,
                                                                    where):
    path = _contracts_with(tmp_path, change)
    code, output = run(["contracts", "check", "--tools-dir", str(path.parent)], capsys)
    assert code == 1
    assert_one_line(output, path, where)


def test_a_tool_contract_bump_problem_names_the_file(tmp_path, capsys):
    def breaking(doc: dict[str, Any]) -> None:  # the pinned schema differs from the tool's
        doc["input_schema"]["required"] = [*doc["input_schema"].get("required", []), "color"]
        doc["input_schema"]["properties"]["color"] = {"type": "string"}
    path = _contracts_with(tmp_path, breaking)
    code, output = run(["contracts", "check", "--tools-dir", str(path.parent)], capsys)
    assert code == 1
    assert_one_line(output, path, ": tool inventory_lookup: ")


# --- rules and config files ---------------------------------------------------------------


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hermes.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "where"), [
    pytest.param(f"brain:\n  kind: rules\n  extra: {DEEP}\n", ":3: nested more than 64",
                 id="deep"),
    pytest.param("history_window: 2\n# " + "x" * MAX_YAML_BYTES + "\n", SIZE,
                 id="huge"),
])
def test_a_malformed_config_file_is_one_line(tmp_path, capsys, monkeypatch, text, where):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    path = _config(tmp_path, text)
    code, output = run(["graph", "--config", str(path)], capsys)
    assert code == 1
    assert_one_line(output, path, where)


@pytest.mark.parametrize(("text", "where"), [
    pytest.param(f"intents:\n  - name: x\n    patterns: {DEEP}\n", ":3: nested more than 64",
                 id="deep"),
    pytest.param("intents: []\n# " + "x" * MAX_YAML_BYTES + "\n", SIZE, id="huge"),
])
def test_a_malformed_rules_file_is_one_line(tmp_path, capsys, monkeypatch, text, where):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    rules = tmp_path / "rules.yaml"
    rules.write_text(text, encoding="utf-8")
    path = _config(tmp_path, f"brain:\n  kind: rules\n  rules_file: {rules}\n")
    code, output = run(["run", "--config", str(path), "hello"], capsys)
    assert code == 1
    assert_one_line(output, rules, where)


# --- recordings ---------------------------------------------------------------------------


def test_a_recording_with_a_deeply_nested_payload_is_one_line(tmp_path, capsys):
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[1])
    lines[1] = json.dumps(event)[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}"
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = run(["replay", "validate", str(path)], capsys)
    assert code == 1
    assert "Traceback" not in output and f"{path}:2:" in output
