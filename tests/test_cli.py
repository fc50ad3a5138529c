"""The ``hermes-fsm`` command line, in-process through ``main(argv, out)`` and as a real process.

Exit codes: 0 ok, 1 failure (one line on stderr saying what and where), 2 usage error (a
usage line, never a traceback).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_fsm.cli.main import main
from hermes_fsm.contracts.check import default_contract_dir
from hermes_fsm.events.model import EVENT_ADAPTER
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.viz.diagram import to_dot, to_mermaid

REPO = Path(__file__).resolve().parent.parent
BAD_GRAPHS = Path(__file__).parent / "graphs" / "bad"
STATES = ["IDLE", "INTENT", "PLANNING", "EXECUTION", "RESULT", "RESPONSE", "MEMORY_COMMIT"]
QUESTION = "How many A1001 are left in the east warehouse?"
QUESTION_ZH = "SKU A1001 在华东仓还有多少库存?"

TINY_GRAPH = """\
name: tiny
initial: IDLE
states:
  IDLE: {}
  ANSWER_ONLY:
    contract: response@1
    on_failure: IDLE
transitions:
  - {trigger: start, source: IDLE, dest: ANSWER_ONLY}
  - {source: ANSWER_ONLY, dest: IDLE}
"""


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    monkeypatch.delenv("HERMES_GRAPH", raising=False)


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``main`` in-process: ``(exit code, stdout, stderr)``; a SystemExit is an exit code."""
    out = io.StringIO()
    try:
        code = main(argv, out=out)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def command() -> list[str]:
    """The installed ``hermes-fsm`` script, else ``python -m hermes_fsm.cli.main``."""
    found = shutil.which("hermes-fsm")
    if found is None:
        beside = Path(sys.executable).with_name("hermes-fsm")
        found = str(beside) if beside.exists() else None
    return [found] if found else [sys.executable, "-m", "hermes_fsm.cli.main"]


def process(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_CONFIG", "HERMES_GRAPH")}
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run([*command(), *args], input=stdin, capture_output=True, text=True,
                          encoding="utf-8", cwd=REPO, env=env, timeout=120, check=False)


def answer_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith("answer: ")]
    assert len(lines) == 1, stdout
    return lines[0]


def assert_one_line(stderr: str) -> None:
    assert stderr.strip(), "expected a message on stderr"
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr


# --- run ----------------------------------------------------------------------------------


def test_run_prints_every_state_of_the_turn(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["run", QUESTION], capsys)
    assert code == 0
    for state in STATES:
        assert f"→ {state}  (" in out, state


def test_run_answers_with_the_stock_of_the_east_warehouse(
    capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(["run", QUESTION], capsys)
    assert code == 0
    assert "342" in answer_line(out)


def test_run_answers_a_chinese_question_with_the_same_stock(
    capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(["run", QUESTION_ZH], capsys)
    assert code == 0
    assert "342" in answer_line(out)


def test_run_json_prints_one_valid_event_per_line_then_the_result(
    capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(["run", "--json", QUESTION], capsys)
    assert code == 0
    *event_lines, result_line = out.splitlines()
    events = [EVENT_ADAPTER.validate_json(line) for line in event_lines]
    assert events[0].kind == "turn_started"
    assert events[-1].kind == "turn_finished"
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))
    result = json.loads(result_line)["result"]
    assert result["status"] == "completed"
    assert "342" in result["answer"]
    assert result["path"] == [*STATES, "IDLE"]


def test_run_honours_session_and_user(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["run", "--json", "--session", "S-42", "--user", "U-7", QUESTION], capsys)
    assert code == 0
    *event_lines, result_line = out.splitlines()
    events = [EVENT_ADAPTER.validate_json(line) for line in event_lines]
    assert {e.session_id for e in events} == {"S-42"}
    started = events[0]
    assert started.kind == "turn_started"
    assert started.user_id == "U-7"
    assert json.loads(result_line)["result"]["session_id"] == "S-42"


def test_run_shows_session_and_user_in_text_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["run", "--session", "S-42", "--user", "U-7", QUESTION], capsys)
    assert code == 0
    assert "on session S-42 (user U-7)" in out


def test_run_as_a_process_answers_342() -> None:
    done = process(["run", QUESTION])
    assert done.returncode == 0, done.stderr
    for state in STATES:
        assert f"→ {state}" in done.stdout
    assert "342" in answer_line(done.stdout)


def test_run_as_a_process_answers_the_chinese_question() -> None:
    done = process(["run", QUESTION_ZH])
    assert done.returncode == 0, done.stderr
    assert "342" in answer_line(done.stdout)


def test_run_json_as_a_process_prints_parseable_lines() -> None:
    done = process(["run", "--json", QUESTION])
    assert done.returncode == 0, done.stderr
    *event_lines, result_line = done.stdout.splitlines()
    for line in event_lines:
        EVENT_ADAPTER.validate_json(line)
    assert "342" in json.loads(result_line)["result"]["answer"]


# --- chat ---------------------------------------------------------------------------------


def test_chat_as_a_process_answers_then_quits() -> None:
    done = process(["chat"], stdin="How many A1001 in east?\n/quit\n")
    assert done.returncode == 0, done.stderr
    answers = [line for line in done.stdout.splitlines() if "agent> " in line]
    assert len(answers) == 1, done.stdout
    assert "342" in answers[0]


def test_chat_reads_stdin_until_quit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("How many A1001 in east?\n\n/quit\nnever\n"))
    code, out, _ = cli(["chat", "--quiet", "--session", "chat-1"], capsys)
    assert code == 0
    assert "session chat-1" in out
    answers = [line for line in out.splitlines() if "agent> " in line]
    assert len(answers) == 1
    assert "342" in answers[0]


# --- graph --------------------------------------------------------------------------------


def test_graph_prints_mermaid_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["graph"], capsys)
    assert code == 0
    assert out == to_mermaid(load_graph(default_graph_path()))


def test_graph_format_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["graph", "--format", "mermaid"], capsys)
    assert code == 0
    assert out.startswith("flowchart TD\n")


def test_graph_format_dot(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["graph", "--format", "dot"], capsys)
    assert code == 0
    assert out == to_dot(load_graph(default_graph_path()))


def test_graph_option_draws_another_graph(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_GRAPH, encoding="utf-8")
    code, out, _ = cli(["graph", "--graph", str(path)], capsys)
    assert code == 0
    assert "s_ANSWER_ONLY" in out
    assert "s_INTENT" not in out


def test_malformed_graph_fails_naming_file_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = BAD_GRAPHS / "dangling_dest.yaml"
    code, out, err = cli(["graph", "--graph", str(path)], capsys)
    assert code == 1
    assert out == ""
    assert_one_line(err)
    assert f"{path}:13:" in err
    assert "IDEL" in err


def test_malformed_graph_for_run_fails_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    path = BAD_GRAPHS / "unknown_state_field.yaml"
    code, out, err = cli(["run", "--graph", str(path), QUESTION], capsys)
    assert code == 1
    assert "→" not in out
    assert f"{path}:9:" in err


# --- contracts ----------------------------------------------------------------------------


def test_contracts_check_passes_on_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(["contracts", "check"], capsys)
    assert code == 0, err
    assert out.startswith("ok: ")
    assert "match their models" in out


def test_contracts_check_fails_on_a_tampered_schema_naming_the_contract(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    directory = tmp_path / "states"
    shutil.copytree(default_contract_dir(), directory)
    intent = directory / "intent.json"
    doc = json.loads(intent.read_text(encoding="utf-8"))
    doc["schema"]["properties"]["confidence"]["maximum"] = 100
    intent.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    code, out, err = cli(["contracts", "check", "--dir", str(directory)], capsys)
    assert code == 1
    assert not out.startswith("ok")
    assert "  - intent (" in err
    assert "Traceback" not in err


def test_contracts_check_of_an_untampered_copy_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    directory = tmp_path / "states"
    shutil.copytree(default_contract_dir(), directory)
    code, _, err = cli(["contracts", "check", "--dir", str(directory)], capsys)
    assert code == 0, err


# --- usage errors -------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["frobnicate"], ["run"], ["graph", "--format", "png"], []],
                         ids=["unknown-command", "missing-text", "bad-format", "no-command"])
def test_usage_errors_exit_2_with_a_usage_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = cli(argv, capsys)
    assert code == 2
    assert err.startswith("usage: hermes-fsm")
    assert "error:" in err
    assert "Traceback" not in err


def test_usage_error_as_a_process_has_no_traceback() -> None:
    done = process(["graph", "--format", "png"])
    assert done.returncode == 2
    assert done.stderr.startswith("usage: hermes-fsm graph")
    assert "invalid choice: 'png'" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# --- configuration ------------------------------------------------------------------------


def test_missing_config_file_fails_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "absent.yaml"
    code, _, err = cli(["--config", str(path), "graph"], capsys)
    assert code == 1
    assert_one_line(err)
    assert str(path) in err


def test_malformed_yaml_config_fails_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text("busy_policy: queue\nbrain:\n  rules_file: a: b\n", encoding="utf-8")
    code, _, err = cli(["--config", str(path), "graph"], capsys)
    assert code == 1
    assert_one_line(err)
    assert f"{path}:3:" in err


def test_config_with_unknown_field_fails_naming_file_line_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text("busy_policy: queue\nbrian:\n  kind: rules\n", encoding="utf-8")
    code, _, err = cli(["--config", str(path), "graph"], capsys)
    assert code == 1
    assert_one_line(err)
    assert f"{path}:2:" in err
    assert "brian" in err


def test_config_option_works_after_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text("brian: {}\n", encoding="utf-8")
    code, _, err = cli(["graph", "--config", str(path)], capsys)
    assert code == 1
    assert f"{path}:1:" in err


def test_hermes_config_variable_is_honoured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY_GRAPH, encoding="utf-8")
    config = tmp_path / "hermes.yaml"
    config.write_text(f"graph: {tmp_path / 'tiny.yaml'}\n", encoding="utf-8")
    monkeypatch.setenv("HERMES_CONFIG", str(config))
    code, out, err = cli(["graph"], capsys)
    assert code == 0, err
    assert "s_ANSWER_ONLY" in out


def test_relative_graph_path_is_read_relative_to_the_config_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "conf" / "graphs").mkdir(parents=True)
    (tmp_path / "conf" / "graphs" / "tiny.yaml").write_text(TINY_GRAPH, encoding="utf-8")
    config = tmp_path / "conf" / "hermes.yaml"
    config.write_text("graph: graphs/tiny.yaml\n", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, out, err = cli(["--config", str(config), "graph"], capsys)
    assert code == 0, err
    assert "s_ANSWER_ONLY" in out


def test_config_naming_a_malformed_graph_fails_naming_the_graph_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    graph = tmp_path / "broken.yaml"
    graph.write_text(TINY_GRAPH.replace("on_failure: IDLE", "on_failure: NOWHERE"),
                     encoding="utf-8")
    config = tmp_path / "hermes.yaml"
    config.write_text("graph: broken.yaml\n", encoding="utf-8")
    code, _, err = cli(["--config", str(config), "graph"], capsys)
    assert code == 1
    assert_one_line(err)
    assert f"{graph}:7:" in err
    assert "NOWHERE" in err
