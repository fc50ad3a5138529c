"""The CLI's edges (issue 18, point 6): argument order, data-losing commands, pipes, help,
config mistakes, condition typos, the graph a recording names, and the library snippet."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.cli.main import _parser, main
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ConfigError, GraphError
from hermes_fsm.graph.loader import default_graph_path, load_graph

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    monkeypatch.delenv("HERMES_GRAPH", raising=False)
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def hermes() -> list[str]:
    found = shutil.which("hermes-fsm") or str(Path(sys.executable).with_name("hermes-fsm"))
    return [found] if Path(found).exists() else [sys.executable, "-m", "hermes_fsm.cli.main"]


# --- options and positionals in any order ---------------------------------------------------

def test_options_before_the_positional_of_memory_search(capsys):
    assert cli(capsys, "run", "--user", "alice", "Please contact me by email")[0] == 0
    code, out, err = cli(capsys, "memory", "search", "--user", "alice", "contact email")
    assert code == 0, err
    assert "preference.contact_channel: email" in out


def test_run_takes_its_text_between_options(capsys):
    code, out, err = cli(capsys, "run", "--user", "bob", "How many A1001 are left in the east "
                         "warehouse?", "--session", "s-mixed")
    assert code == 0, err
    assert "342" in out and "s-mixed" in out


def test_a_usage_error_names_the_subcommands_help(capsys):
    code, _, err = cli(capsys, "memory", "search", "--user", "a", "q", "--bogus")
    assert code == 2
    assert "hermes-fsm memory --help" in err and "--bogus" in err


def test_every_positional_and_every_choice_has_help_text():
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            positional = not action.option_strings
            if (positional or action.choices) and not action.help:
                missing.append(f"{name} {action.dest}")
            if action.choices and action.help:
                unexplained = [c for c in action.choices if str(c) not in action.help]
                if unexplained:
                    missing.append(f"{name} {action.dest}: {unexplained} not explained")
    assert not missing, missing


# --- memory forget -----------------------------------------------------------------------

def _two_memories(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "run", "--user", "alice", "Please contact me by email")[0] == 0
    assert cli(capsys, "run", "--user", "alice", "I prefer short answers")[0] == 0
    listed = cli(capsys, "memory", "list", "--user", "alice")[1]
    assert "contact_channel: email" in listed and "short answers" in listed


def test_memory_forget_without_what_forgets_nothing(capsys):
    _two_memories(capsys)
    code, _, err = cli(capsys, "memory", "forget", "--user", "alice", "--yes")
    assert code == 1 and "--all" in err
    assert "2 item(s)" in cli(capsys, "memory", "list", "--user", "alice")[1]


def test_memory_forget_a_query_erases_only_the_items_mentioning_it(capsys):
    _two_memories(capsys)
    code, out, err = cli(capsys, "memory", "forget", "short answers", "--user", "alice",
                         "--yes")
    assert code == 0, err
    assert "forgot 1 item(s)" in out
    listed = cli(capsys, "memory", "list", "--all", "--user", "alice")[1]
    assert "contact_channel: email" in listed
    assert "short" not in listed  # its words are gone, not only hidden
    assert "1 item(s)" in cli(capsys, "memory", "list", "--user", "alice")[1]
    recalled = cli(capsys, "memory", "search", "short answers", "--user", "alice")[1]
    assert "short" not in recalled.split("item(s)")[0]


def test_memory_forget_all_asks_first_and_no_answer_means_no(capsys, monkeypatch):
    _two_memories(capsys)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = cli(capsys, "memory", "forget", "--all", "--user", "alice")
    assert code == 1 and "nothing forgotten" in err and "--yes" in err
    assert "2 item(s)" in cli(capsys, "memory", "list", "--user", "alice")[1]
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert cli(capsys, "memory", "forget", "--all", "--user", "alice")[0] == 1
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, _ = cli(capsys, "memory", "forget", "--all", "--user", "alice")
    assert code == 0 and "forgot user 'alice'" in out
    assert "0 item(s)" in cli(capsys, "memory", "list", "--all", "--user", "alice")[1]


def test_memory_forget_refuses_a_query_and_all_together(capsys):
    _two_memories(capsys)
    code, _, err = cli(capsys, "memory", "forget", "email", "--all", "--yes", "--user", "alice")
    assert code == 1 and "not both" in err
    assert "2 item(s)" in cli(capsys, "memory", "list", "--user", "alice")[1]


def test_memory_list_refuses_a_stray_argument(capsys):
    code, _, err = cli(capsys, "memory", "list", "short answers", "--user", "alice")
    assert code == 1 and "takes no query" in err


# --- pipes ---------------------------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="a shell pipe into head")
def test_run_json_into_head_exits_quietly(tmp_path):
    command = " ".join(f"'{part}'" for part in hermes())
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_CONFIG", "HERMES_GRAPH")}
    env["HERMES_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        ["bash", "-c", f"{command} run --json 'How many A1001 are left in the east "
                       "warehouse?' | head -1; exit ${PIPESTATUS[0]}"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("{")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)


# --- configuration and graph files -----------------------------------------------------------

def test_a_config_file_with_several_mistakes_reports_each_with_its_line(tmp_path, capsys):
    config = tmp_path / "hermes.yaml"
    config.write_text("busy_policy: sometimes\nhistory_window: 0\ntools:\n  max_result_chars: 5\n"
                      "colour: blue\n", encoding="utf-8")
    code, _, err = cli(capsys, "--config", str(config), "graph")
    assert code == 1
    assert "4 problems" in err
    for line, field in ((1, "busy_policy"), (2, "history_window"),
                        (4, "tools.max_result_chars"), (5, "colour")):
        assert f"{config}:{line}: {field}:" in err


def test_one_mistake_is_still_one_line(tmp_path):
    config = tmp_path / "hermes.yaml"
    config.write_text("history_window: 0\n", encoding="utf-8")
    from hermes_fsm.config.settings import load_config
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert "\n" not in str(caught.value) and f"{config}:1: history_window" in str(caught.value)


def _graph_with(tmp_path: Path, old: str, new: str, name: str = "typo.yaml") -> Path:
    text = default_graph_path().read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_a_condition_naming_no_field_of_the_contract_is_refused_at_load(tmp_path):
    path = _graph_with(tmp_path, "conditions: [output.needs_tools]",
                       "conditions: [output.needs_tool]")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if "output.needs_tool]" in text)
    with pytest.raises(GraphError) as caught:
        load_graph(path)
    message = str(caught.value)
    assert f"{path}:{line}" in message
    assert "needs_tool" in message and "did you mean output.needs_tools" in message


def test_a_negated_condition_is_checked_too(tmp_path):
    path = _graph_with(tmp_path, "conditions: [output.needs_more_tools]",
                       "conditions: [not output.needs_more_tool]")
    with pytest.raises(GraphError, match="needs_more_tool"):
        load_graph(path)


def test_the_bundled_graphs_conditions_all_name_fields():
    assert load_graph(default_graph_path()).name == "agent_turn"


# --- the graph a recording names ------------------------------------------------------------

def test_view_and_rerun_take_the_graph_the_recording_names(tmp_path, capsys):
    graph = _graph_with(tmp_path, "name: agent_turn", "name: my_turn", "my_turn.yaml")
    code, _, err = cli(capsys, "run", "--graph", str(graph), "--record", str(tmp_path / "rec"),
                       "--session", "s-own", "How many A1001 are left in the east warehouse?")
    assert code == 0, err
    recording = tmp_path / "rec" / "s-own.jsonl"
    code, out, err = cli(capsys, "view", str(recording), "--out", str(tmp_path / "p.html"))
    assert code == 0, err
    assert "graph my_turn" in out and "warning" not in out
    code, out, err = cli(capsys, "replay", "rerun", str(recording))
    assert code == 0, out + err
    assert "ok" in out and "note:" not in out


def test_a_changed_graph_is_named_plainly_with_how_to_pass_it(tmp_path, capsys):
    graph = _graph_with(tmp_path, "name: agent_turn", "name: my_turn", "my_turn.yaml")
    assert cli(capsys, "run", "--graph", str(graph), "--record", str(tmp_path / "rec"),
               "--session", "s-old", "How many A1001 are left in the east warehouse?")[0] == 0
    recording = tmp_path / "rec" / "s-old.jsonl"
    text = graph.read_text(encoding="utf-8")
    graph.write_text(text.replace("conditions: [output.needs_tools]",
                                  "conditions: [output.needs_tools], unless: [output.needs_tools]"),
                     encoding="utf-8")  # INTENT now always answers directly
    code, out, _ = cli(capsys, "replay", "rerun", str(recording))
    assert code == 1
    assert "note: the recording was made with graph my_turn" in out
    assert "pass --graph PATH" in out
    code, out, _ = cli(capsys, "view", str(recording), "--out", str(tmp_path / "p.html"))
    assert code == 0 and "warning: the recording was made with graph my_turn" in out
    assert "pass --graph PATH" in out


# --- the library snippet and the README's example question ----------------------------------

def test_the_session_of_a_turn_is_found_without_naming_its_user():
    async def go() -> None:
        orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
        result = await orchestrator.run_turn("session-1", "How many A1001 are left in the "
                                             "east?", user_id="alice")
        events = orchestrator.session("session-1").events
        assert [e.seq for e in events][-len(result.events):] == [e.seq for e in result.events]
        assert orchestrator.session("session-1", "alice").user_id == "alice"

    asyncio.run(go())


def test_someone_elses_session_is_still_refused_when_a_user_is_named():
    from hermes_fsm.errors import SessionError

    async def go() -> None:
        orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
        await orchestrator.run_turn("s1", "hello", user_id="alice")
        with pytest.raises(SessionError):
            orchestrator.session("s1", "mallory")

    asyncio.run(go())


@pytest.mark.parametrize("text", ["How many A1001 are left in the east?",
                                  "how many A1001 do we have in the east."])
def test_the_east_alone_is_the_east_warehouse(text):
    async def go() -> str:
        orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
        return (await orchestrator.run_turn(None, text, user_id="alice")).answer

    answer = asyncio.run(go())
    assert "342" in answer and "East China" in answer and "across all" not in answer


# --- the view of one turn ------------------------------------------------------------------------

def test_view_of_one_turn_shows_only_that_turns_events(tmp_path, capsys):
    rec = tmp_path / "rec"
    for text in ("How many A1001 are left in the east warehouse?", "hello"):
        assert cli(capsys, "run", "--session", "s-two", "--record", str(rec), text)[0] == 0
    recording = rec / "s-two.jsonl"
    whole = cli(capsys, "view", str(recording), "--out", str(tmp_path / "all.html"))[1]
    code, one, err = cli(capsys, "view", str(recording), "--turn", "2",
                         "--out", str(tmp_path / "two.html"))
    assert code == 0, err
    count = int(one.split("(")[1].split()[0])
    assert 0 < count < int(whole.split("(")[1].split()[0])
    page = (tmp_path / "two.html").read_text(encoding="utf-8")
    assert "1 turn(s)" in page and "inventory_lookup" not in page


def test_view_of_a_turn_that_is_not_there_lists_the_turns(tmp_path, capsys):
    rec = tmp_path / "rec"
    assert cli(capsys, "run", "--session", "s-one", "--record", str(rec), "hello")[0] == 0
    code, _, err = cli(capsys, "view", str(rec / "s-one.jsonl"), "--turn", "3")
    assert code == 1 and "1 turn(s)" in err and "from 1 to 1" in err
