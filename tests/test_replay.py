"""Recordings and the replayer: golden recordings, drift, divergence, the CLI gate."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from hermes_fsm import Contract, Orchestrator
from hermes_fsm.cli.main import main
from hermes_fsm.contracts import ContractRegistry
from hermes_fsm.contracts.states import STATE_CONTRACTS, Intent
from hermes_fsm.events.recording import (
    RecordingError,
    RecordingSink,
    load_recording,
    parse_recording,
    recording_text,
)
from hermes_fsm.events.sinks import ListSink
from hermes_fsm.replay import Replayer, ReplayFailed, offline_catalog
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import happy_script

GOLDEN = Path(__file__).parent / "recordings"
CLEAN = ["inventory_en", "chinese_preference", "retries_and_route"]


def golden(name: str) -> Any:
    return load_recording(GOLDEN / f"{name}.jsonl")


@pytest.mark.parametrize("name", CLEAN)
def test_a_clean_golden_recording_validates(name):
    result = Replayer().validate(golden(name))
    assert result.ok and result.turns >= 1


@pytest.mark.parametrize("name", CLEAN)
def test_a_clean_golden_recording_reruns_without_divergence(name):
    result = Replayer().rerun(golden(name))
    assert result.ok and result.divergences == []


def test_the_golden_recordings_cover_tools_retries_and_a_failure_route():
    kinds = {e.kind for name in CLEAN for e in golden(name).events}
    assert {"tool_call_finished", "retry", "contract_violation", "route_taken",
            "handler_failed", "memory_write"} <= kinds


def test_the_divergent_recording_is_reported_at_the_transition_out_of_intent():
    recording = golden("divergent_graph")
    result = Replayer().rerun(recording, raise_on_failure=False)
    (divergence,) = result.divergences
    recorded = next(e for e in recording.events if e.seq == divergence.seq)
    assert (recorded.kind, recorded.state, recorded.dest) == ("state_exited", "INTENT",
                                                              "PLANNING")
    assert divergence.reason.startswith("a different transition out of INTENT")
    assert '-  "dest": "PLANNING"' in divergence.diff
    assert '+  "dest": "RESPONSE"' in divergence.diff
    assert Replayer().validate(recording).ok  # its payloads still pass: only the graph moved


def test_the_drift_recording_names_the_contract_and_the_field():
    result = Replayer().validate(golden("drift_intent"), raise_on_failure=False)
    (finding,) = result.findings
    assert (finding.subject, finding.contract, finding.recorded_contract) == (
        "INTENT", "intent@2.0.0", "intent@0.9.0")
    assert finding.errors[0]["loc"] == ["urgency"]
    assert "intent@2.0.0 rejects urgency" in finding.describe()


def test_the_drift_recording_also_diverges_on_rerun():
    result = Replayer().rerun(golden("drift_intent"), raise_on_failure=False)
    assert "no longer validates against intent@2.0.0" in result.divergences[0].reason


def test_narrowing_a_contract_makes_validate_fail_on_recordings_that_passed():
    class NarrowIntent(Contract):
        contract_name = "intent"
        contract_version = "2.0.0"
        intent_type: str
        parameters: dict[str, Any]
        confidence: float = Field(ge=0.0, le=0.5)
        needs_tools: bool = True

    recording = golden("inventory_en")
    assert Replayer().validate(recording).ok
    narrowed = ContractRegistry([c for c in STATE_CONTRACTS if c is not Intent] + [NarrowIntent])
    result = Replayer(contracts=narrowed).validate(recording, raise_on_failure=False)
    assert result.findings
    assert {f.contract for f in result.findings} == {"intent@2.0.0"}
    assert all(f.errors[0]["loc"] == ["confidence"] for f in result.findings)


def test_a_failed_replay_raises_by_default_with_the_findings():
    with pytest.raises(ReplayFailed, match="urgency") as caught:
        Replayer().validate(golden("drift_intent"))
    assert not caught.value.result.ok


def test_replaying_many_recordings_yields_every_result_without_raising():
    results = list(Replayer().validate_all(sorted(GOLDEN.glob("*.jsonl"))))
    assert len(results) == 5
    assert [r.ok for r in results].count(False) == 1  # only the drift one


def test_a_tool_call_with_different_arguments_is_a_divergence(tmp_path):
    recording = golden("inventory_en")
    text = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if '"kind":"tool_call_started"' in line)
    lines[index] = lines[index].replace('"warehouse":"east"', '"warehouse":"north"')
    edited = "\n".join(lines) + "\n"
    assert edited != text
    path = tmp_path / "edited.jsonl"
    path.write_text(edited, encoding="utf-8")
    result = Replayer().rerun(load_recording(path), raise_on_failure=False)
    assert recording.events  # the original is untouched
    (divergence,) = result.divergences
    assert divergence.reason == "different arguments for inventory_lookup"
    assert divergence.seq == recording.events[index - 1].seq
    assert '-    "warehouse": "north"' in divergence.diff


async def test_a_recording_sink_writes_a_recording_that_replays(tmp_path):
    orchestrator = demo_orchestrator(brain=ScriptedBrain(happy_script()))
    sink = RecordingSink(tmp_path, orchestrator)
    orchestrator.add_sink(sink)
    await orchestrator.run_turn("sess/1", "How many A1001?", user_id="erin")
    await orchestrator.run_turn("sess/1", "again", user_id="erin")
    sink.close()
    recording = load_recording(sink.path_for("sess/1"))
    assert recording.header.session_id == "sess/1" and recording.header.user_id == "erin"
    assert len(recording.turn_ids()) == 2
    assert recording_text(orchestrator, "sess/1").splitlines()[1:] == [
        line for line in sink.path_for("sess/1").read_text().splitlines()[1:]]
    assert (await Replayer().arerun(recording)).ok


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    ('{"hello": 1}\n', "not a hermes-fsm recording"),
    ('{"format": "hermes-fsm/recording", "format_version": 99}\n',
     "format version 99 is not supported"),
    ("not json\n", "header is not JSON"),
])
def test_an_unreadable_recording_is_a_clear_error(text, message):
    with pytest.raises(RecordingError, match=message):
        parse_recording(text, "bad.jsonl")


def test_a_malformed_event_line_is_reported_with_its_line_number():
    lines = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8").splitlines()
    lines[3] = '{"kind": "state_entered"}'
    with pytest.raises(RecordingError, match=r"bad\.jsonl:4: not a valid event"):
        parse_recording("\n".join(lines), "bad.jsonl")


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_cli_replay_passes_clean_recordings_and_prints_a_summary():
    code, out = run_cli("replay", "validate", *(str(GOLDEN / f"{n}.jsonl") for n in CLEAN))
    assert code == 0
    assert "3 recording(s)" in out and "0 failed" in out


def test_cli_replay_rerun_of_a_directory_fails_on_the_divergent_one(tmp_path):
    report = tmp_path / "report.json"
    code, out = run_cli("replay", "rerun", str(GOLDEN), "--report", str(report))
    assert code == 1
    assert "divergent_graph.jsonl" in out and "diverged" in out
    data = json.loads(report.read_text())
    assert data["ok"] is False and data["recordings"] == len(list(GOLDEN.rglob("*.jsonl")))
    bad = {Path(r["source"]).name for r in data["results"] if not r["ok"]}
    assert bad == {"divergent_graph.jsonl", "drift_intent.jsonl"}


def test_cli_replay_rerun_can_build_contexts_and_finds_the_same(tmp_path):
    for flags in ((), ("--build-contexts",)):
        report = tmp_path / "report.json"
        code, _ = run_cli("replay", "rerun", str(GOLDEN), "--quiet", "--report", str(report),
                          *flags)
        data = json.loads(report.read_text())
        assert code == 1 and [Path(r["source"]).name for r in data["results"]
                              if not r["ok"]] == ["divergent_graph.jsonl", "drift_intent.jsonl"]


def test_cli_replay_validate_reports_drift_and_exits_non_zero():
    code, out = run_cli("replay", "validate", str(GOLDEN / "drift_intent.jsonl"))
    assert code == 1
    assert "intent@2.0.0 rejects urgency" in out


def test_cli_replay_of_a_missing_path_is_a_clear_error(tmp_path):
    code, _ = run_cli("replay", "validate", str(tmp_path / "nope.jsonl"))
    assert code == 1


def test_a_recording_of_a_turn_with_an_mcp_tool_replays_offline(tmp_path):
    code, out = run_cli("run", "--record", str(tmp_path),
                        "How many A1001 are left in the east warehouse?")
    assert code == 0 and "342" in out
    (path,) = tmp_path.glob("*.jsonl")
    recording = load_recording(path)
    tools = {e.tool for e in recording.events if e.kind == "tool_call_started"}
    assert "demo.calendar_query" in tools  # an MCP tool was called while recording
    assert Replayer().validate(recording).ok  # its pinned contract stands in for the server
    assert Replayer().rerun(recording).ok  # no server is started to rerun it


def test_record_export_writes_a_session_run_by_another_process_from_the_store(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HERMES_DATA_DIR": str(tmp_path / "data")}
    command = [sys.executable, "-m", "hermes_fsm.cli.main"]
    for text in ("How many A1001 are left in the east warehouse?", "我喜欢用邮件联系"):
        subprocess.run([*command, "run", "--session", "exp-1", "--user", "zoe", text],
                       env=env, check=True, capture_output=True, timeout=120)
    out = tmp_path / "exp-1.jsonl"
    done = subprocess.run([*command, "record", "export", "exp-1", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    recording = load_recording(out)
    assert recording.header.session_id == "exp-1" and recording.header.user_id == "zoe"
    assert len(recording.turn_ids()) == 2
    assert [e.seq for e in recording.events] == list(range(1, len(recording.events) + 1))
    assert Replayer().validate(recording).ok and Replayer().rerun(recording).ok


def test_record_export_of_an_unknown_session_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    code, _ = run_cli("record", "export", "no-such-session")
    assert code == 1
    assert "no session 'no-such-session'" in capsys.readouterr().err


def test_narrowing_a_tool_output_contract_makes_validate_report_the_outputs():
    registry = ToolRegistry()

    @registry.tool(description="Stock of a SKU.", output_schema={
        "type": "object", "required": ["sku", "quantity"],
        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer",
                                                               "maximum": 100}}})
    def inventory_lookup(sku: str, warehouse: str | None = None) -> dict[str, Any]:
        return {}

    recording = golden("inventory_en")
    assert Replayer().validate(recording).ok
    result = Replayer(tools=offline_catalog(registry)).validate(recording,
                                                                raise_on_failure=False)
    assert [(f.kind, f.subject, f.contract) for f in result.findings] == [
        ("tool_call_finished", "inventory_lookup", "tool inventory_lookup@1.0.0 output")] * 2
    first, second = result.findings
    assert "342 is greater than the maximum of 100 (at quantity)" in first.errors[0]["msg"]
    assert "'quantity' is a required property" in second.errors[0]["msg"]
    assert "tool inventory_lookup@1.0.0 output rejects output" in first.describe()


def edited_golden(tmp_path: Path, name: str, kind: str, change: Any, first_only: bool = True
                  ) -> tuple[Path, int]:
    """A copy of a golden recording with ``change`` applied to its events of ``kind``
    (the first one only, by default); returns it and the first changed line's number."""
    lines = (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    number = 0
    for index, line in enumerate(lines[1:], start=1):
        event = json.loads(line)
        if event["kind"] == kind and not (first_only and number):
            lines[index] = json.dumps(change(event), ensure_ascii=False)
            number = number or index + 1
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, number


def without(*keys: str) -> Any:
    return lambda event: {k: v for k, v in event.items() if k not in keys}


def test_a_recording_made_before_an_event_field_with_a_default_still_reruns(tmp_path):
    path, number = edited_golden(tmp_path, "inventory_en", "tool_call_finished",
                                 without("truncated", "output_violation", "fallback"),
                                 first_only=False)
    assert number
    recording = load_recording(path, lazy=True)
    assert Replayer().rerun(recording).ok and Replayer().validate(recording).ok


def test_rerun_names_the_line_of_a_malformed_event(tmp_path):
    path, number = edited_golden(tmp_path, "inventory_en", "state_exited", without("dest"))
    with pytest.raises(RecordingError, match=rf"edited\.jsonl:{number}: not a valid event"):
        Replayer().rerun(load_recording(path, lazy=True))
    (result,) = Replayer().rerun_all([path])
    assert not result.ok and f"edited.jsonl:{number}: not a valid event" in (result.error or "")


def test_validate_names_the_line_of_a_malformed_payload_event(tmp_path):
    path, number = edited_golden(tmp_path, "inventory_en", "state_output", without("output"))
    with pytest.raises(RecordingError, match=rf"edited\.jsonl:{number}: not a valid event"):
        Replayer().validate(load_recording(path, lazy=True))


def test_validate_reports_a_recording_cut_off_mid_line(tmp_path):
    text = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8")
    path = tmp_path / "crashed.jsonl"
    path.write_text(text[:-40], encoding="utf-8")  # a writer died in the middle of a line
    (result,) = Replayer().validate_all([path])
    assert not result.ok
    assert f"crashed.jsonl:{len(text.splitlines())}: not JSON" in (result.error or "")


def test_blank_lines_and_crlf_in_a_recording_are_tolerated(tmp_path):
    text = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    loose = "\r\n".join([*lines[:5], "", "   ", *lines[5:]]) + "\r\n\r\n"
    path = tmp_path / "loose.jsonl"
    path.write_text(loose, encoding="utf-8")
    recording = load_recording(path, lazy=True)
    assert recording.event_count == len(lines) - 1
    assert Replayer().validate(recording).ok and Replayer().rerun(recording).ok
    assert load_recording(path).raw == golden("inventory_en").raw


def test_a_rerun_builds_no_contexts_unless_asked_and_finds_the_same(monkeypatch):
    sink = ListSink()
    seen = sink.events
    original = Replayer._orchestrator

    def watched(self: Replayer) -> Orchestrator:
        orchestrator = original(self)
        orchestrator.add_sink(sink)
        return orchestrator

    monkeypatch.setattr(Replayer, "_orchestrator", watched)
    recording = golden("chinese_preference")
    assert any(e.kind == "context_built" for e in recording.events)
    assert Replayer().rerun(recording).ok
    assert seen and not any(e.kind == "context_built" for e in seen)
    seen.clear()
    assert Replayer(build_contexts=True).rerun(recording).ok
    assert sum(e.kind == "context_built" for e in seen) == sum(
        e.kind == "context_built" for e in recording.events)
    divergent = golden("divergent_graph")
    assert [d.seq for d in Replayer().rerun(divergent, raise_on_failure=False).divergences] \
        == [d.seq for d in Replayer(build_contexts=True).rerun(
            divergent, raise_on_failure=False).divergences]


@pytest.mark.parametrize("build_contexts", [False, True])
async def test_a_rerun_reports_a_message_over_todays_input_cap(build_contexts):
    from hermes_fsm.engine.context import ContextConfig

    roomy = demo_orchestrator(context=ContextConfig(max_context_tokens=128_000))
    await roomy.run_turn("s1", "please read this " * 1000)
    recording = parse_recording(recording_text(roomy, "s1"), "<roomy>")
    replayer = Replayer(build_contexts=build_contexts)
    result = await replayer.arerun(recording, raise_on_failure=False)
    assert not result.ok and "input budget" in (result.error or "")


def test_rerun_all_reruns_like_rerun_and_restores_the_garbage_collector(tmp_path):
    import gc

    paths = [GOLDEN / f"{name}.jsonl" for name in [*CLEAN, "divergent_graph"]]
    missing = tmp_path / "missing.jsonl"
    thresholds = gc.get_threshold()
    replayer = Replayer()
    results = list(replayer.rerun_all([*paths, missing]))
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    assert [r.ok for r in results] == [True, True, True, False, False]
    assert "missing.jsonl" in (results[-1].error or "")
    for path, result in zip(paths, results, strict=False):
        alone = Replayer().rerun(load_recording(path), raise_on_failure=False)
        assert (result.turns, result.events) == (alone.turns, alone.events)
        assert [d.describe() for d in result.divergences] == \
            [d.describe() for d in alone.divergences]
    gc.freeze()  # a process that froze objects of its own keeps them frozen
    try:
        assert [r.ok for r in replayer.rerun_all(paths[:1])] == [True]
        assert gc.get_freeze_count() > 0 and gc.get_threshold() == thresholds
    finally:
        gc.unfreeze()


def compact(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def grouped_without(raw: list[dict[str, Any]], kind: str) -> list[list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for event in raw:
        if event["kind"] != kind:
            groups.setdefault(event["turn_id"], []).append(event)
    return list(groups.values())


@pytest.mark.parametrize("name", CLEAN)
def test_raw_turns_skipping_a_kind_equal_the_parsed_events_without_it(name):
    path = GOLDEN / f"{name}.jsonl"
    lazy = load_recording(path, lazy=True)
    assert lazy.raw_turns(skip={"context_built"}) == grouped_without(
        load_recording(path).raw, "context_built")
    assert lazy._raw is None  # nothing parsed everything on the way


def test_only_a_lines_own_kind_lets_it_go_unparsed():
    lines = (GOLDEN / "chinese_preference.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines[1:]]
    index = next(i for i, e in enumerate(events) if e["kind"] == "state_output")
    events[index]["output"]["nested"] = {"a": 1, "kind": "context_built", "b": [1]}
    events[index + 1]["text_like"] = ',"kind":"context_built",'  # in a string: escaped
    broken = next(i for i, e in enumerate(events) if e["kind"] == "context_built")
    text = "\n".join([lines[0], *map(compact, events)]) + "\n"
    line = compact(events[broken])
    text = text.replace(line, line[:-20])  # a broken line of the skipped kind: not read
    recording = parse_recording(text, "<edited>", lazy=True)
    kept = [e for turn in recording.raw_turns(skip={"context_built"}) for e in turn]
    assert events[index] in kept and events[index + 1] in kept
    assert kept == [e for i, e in enumerate(events) if e["kind"] != "context_built"
                    and i != broken]
    with pytest.raises(RecordingError, match=rf"<edited>:{broken + 2}: not JSON"):
        recording.raw  # noqa: B018 - reading everything names the broken line


def test_a_broken_line_among_those_a_rerun_reads_is_named_by_its_own_number(tmp_path):
    lines = (GOLDEN / "chinese_preference.jsonl").read_text(encoding="utf-8").splitlines()
    kinds = [json.loads(line)["kind"] for line in lines[1:]]
    first_context = kinds.index("context_built")
    broken = next(i for i, kind in enumerate(kinds)
                  if kind == "state_entered" and i > first_context) + 1  # index in lines
    lines[broken] = lines[broken][:-15]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (result,) = Replayer().rerun_all([path])
    assert f"broken.jsonl:{broken + 1}: not JSON" in (result.error or "")


@pytest.mark.parametrize("first", ["raw", "raw_turns", "select", "event_count"])
def test_blank_lines_are_found_whichever_read_comes_first(tmp_path, first):
    text = (GOLDEN / "chinese_preference.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    loose = "\r\n".join([*lines[:5], "", "  \t", *lines[5:9], "", *lines[9:]]) + "\r\n\r\n"
    path = tmp_path / "loose.jsonl"
    path.write_text(loose, encoding="utf-8")
    clean = load_recording(GOLDEN / "chinese_preference.jsonl")
    recording = load_recording(path, lazy=True)
    if first == "raw_turns":
        assert recording.raw_turns(skip={"context_built"}) == grouped_without(
            clean.raw, "context_built")
    elif first == "select":
        assert recording.select({"state_output"}) == [
            e for e in clean.raw if e["kind"] == "state_output"]
    getattr(recording, first) if first in ("raw", "event_count") else None
    assert recording.event_count == len(lines) - 1
    assert recording.raw == clean.raw
    assert Replayer().rerun(load_recording(path, lazy=True)).ok


async def test_a_recall_counted_by_another_token_counter_reruns_clean():
    """memory_recalled's ``tokens`` depends on the recording process's counter (a tokenizer
    file, a calibrated ratio): a rerun counting differently is not a divergence."""
    from hermes_fsm.engine.context import ContextBuilder

    class BytesCounter:
        name = "bytes"

        def count(self, text: str) -> int:
            return len(text.encode())

    recorder = demo_orchestrator(context=ContextBuilder(counter=BytesCounter()))
    await recorder.run_turn("s1", "I prefer email", user_id="u1")
    await recorder.run_turn("s1", "How should you contact me? email?", user_id="u1")
    default = demo_orchestrator()
    for text in ("I prefer email", "How should you contact me? email?"):
        await default.run_turn("s1", text, user_id="u1")
    recording = parse_recording(recording_text(recorder, "s1"), "<bytes>")
    counted = [[e.tokens for e in o.sessions()["s1"].events if e.kind == "memory_recalled"]
               for o in (recorder, default)]
    assert counted[0] and counted[0] != counted[1]  # the recording's counts are not today's
    result = await Replayer().arerun(recording, raise_on_failure=False)
    assert result.ok, [d.describe() for d in result.divergences]


# --- validate is a gate: every line parsed, kinds known, seqs in order, the header typed --


def _corrupt_lines(lines: list[str], how: str) -> tuple[list[str], int]:
    """``lines`` (header first) corrupted ``how``; returns them and the bad line's number."""
    lines = list(lines)
    state_entered = next(i for i, line in enumerate(lines) if '"kind":"state_entered"' in line)
    if how == "not_json":
        lines.insert(state_entered, "this is not json")
        return lines, state_entered + 1
    if how == "null":
        lines.insert(state_entered, "null")
        return lines, state_entered + 1
    if how == "kind_lost":
        output = next(i for i, line in enumerate(lines) if '"kind":"state_output"' in line)
        event = json.loads(lines[output])
        del event["kind"]
        event["output"] = {"anything": "goes"}
        lines[output] = json.dumps(event)
        return lines, output + 1
    if how == "unknown_kind":
        event = json.loads(lines[state_entered])
        event["kind"] = "state_entred"
        lines[state_entered] = json.dumps(event)
        return lines, state_entered + 1
    if how == "duplicated":
        lines.insert(state_entered + 1, lines[state_entered])
        return lines, state_entered + 2
    if how == "shuffled":
        lines[state_entered], lines[state_entered + 1] = (lines[state_entered + 1],
                                                          lines[state_entered])
        return lines, state_entered + 1
    if how == "shuffled_kept":  # two lines a rerun parses (it leaves context_built unparsed)
        lines[state_entered - 1], lines[state_entered] = (lines[state_entered],
                                                          lines[state_entered - 1])
        return lines, state_entered
    if how == "seq_not_int":
        event = json.loads(lines[state_entered])
        event["seq"] = str(event["seq"])
        lines[state_entered] = json.dumps(event)
        return lines, state_entered + 1
    header = json.loads(lines[0])
    header[{"header_int_time": "recorded_at", "header_bool_version": "format_version"}[how]] = (
        0 if how == "header_int_time" else True)
    lines[0] = json.dumps(header)
    return lines, 1


CORRUPTIONS = ["not_json", "null", "kind_lost", "unknown_kind", "duplicated", "shuffled",
               "shuffled_kept", "seq_not_int", "header_int_time", "header_bool_version"]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_replay_validate_fails_on_a_corrupt_recording_naming_the_line(tmp_path, how):
    lines = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8").splitlines()
    corrupt, number = _corrupt_lines(lines, how)
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(corrupt) + "\n", encoding="utf-8")

    code, out = run_cli("replay", "validate", str(path))

    assert code == 1, out
    assert f"corrupt.jsonl:{number}:" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_view_refuses_a_corrupt_recording_naming_the_line(tmp_path, how, capsys):
    lines = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8").splitlines()
    corrupt, number = _corrupt_lines(lines, how)
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(corrupt) + "\n", encoding="utf-8")

    code = main(["view", str(path), "--out", str(tmp_path / "page.html")], out=io.StringIO())

    err = capsys.readouterr().err
    assert code != 0 and not (tmp_path / "page.html").exists()
    assert f"corrupt.jsonl:{number}:" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["duplicated", "shuffled_kept"])
def test_rerun_fails_on_duplicated_or_shuffled_events(tmp_path, how):
    """A rerun checks the order of the lines it parses (validate is the gate: every line)."""
    lines = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8").splitlines()
    corrupt, number = _corrupt_lines(lines, how)
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(corrupt) + "\n", encoding="utf-8")

    (result,) = Replayer().rerun_all([path])

    assert not result.ok and f"corrupt.jsonl:{number}:" in (result.error or "")


def test_a_recording_of_a_streamed_answer_reruns_without_divergence(tmp_path):
    """A streamed RESPONSE leaves token_chunk events in its recording; the rerun's brain
    answers from the recorded output at once (nothing streams), so the chunks are how the
    text arrived, not behaviour to compare (they failed every rerun of a streamed turn)."""
    lines = (GOLDEN / "inventory_en.jsonl").read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines)
                 if '"kind":"brain_call"' in line and '"state":"RESPONSE"' in line)
    call = json.loads(lines[index])
    chunks = [json.dumps({"kind": "token_chunk", "session_id": call["session_id"],
                          "turn_id": call["turn_id"], "seq": call["seq"], "at": call["at"],
                          "state": "RESPONSE", "text": piece}, separators=(",", ":"))
              for piece in ("There are ", "342 units")]
    path = tmp_path / "streamed.jsonl"
    events = [json.loads(line) for line in lines[1:index]] + [json.loads(c) for c in chunks] \
        + [json.loads(line) for line in lines[index:]]
    first = events[0]["seq"]
    for n, event in enumerate(events):  # numbered one by one again, the chunks included
        event["seq"] = first + n
    path.write_text("\n".join([lines[0], *(json.dumps(e, separators=(",", ":"))
                                           for e in events)]) + "\n", encoding="utf-8")
    recording = load_recording(path)
    assert sum(e.kind == "token_chunk" for e in recording.events) == 2
    result = Replayer().rerun(recording, raise_on_failure=False)
    assert result.ok and result.divergences == [], result.divergences
