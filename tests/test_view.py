"""The HTML graph view: self-contained, escaped, and the overlay's numbers right.

Recordings are made here by running turns with a scripted brain (one contract violation
and retry in INTENT), so the expected numbers are known.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.cli.main import main
from hermes_fsm.events.recording import Recording, parse_recording, recording_text
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.testing import ScriptedBrain
from hermes_fsm.viz.overlay import overlay_from_events
from hermes_fsm.viz.view import render_graph_html, render_view
from tests.support import INTENT_TOOLS, graph_with, happy_script

HOSTILE = "How many <script>alert('pwned')</script> A1001 & </script><b>x</b>?"
BAD_INTENT = {**INTENT_TOOLS, "confidence": 1.7}


async def record(make_orchestrator: Any, graph: Graph, messages: list[str]) -> Recording:
    """Run ``messages`` as turns of one session, INTENT breaking its contract once."""
    brain = ScriptedBrain(happy_script(intent=[BAD_INTENT, INTENT_TOOLS]))
    orchestrator = make_orchestrator(graph, brain=brain)
    for text in messages:
        await orchestrator.run_turn("s1", text, user_id="alice")
    return parse_recording(recording_text(orchestrator, "s1"), "<test>")


@pytest.fixture
def graph() -> Graph:
    return graph_with()


@pytest.fixture
async def recording(make_orchestrator: Any, graph: Graph) -> Recording:
    return await record(make_orchestrator, graph, [HOSTILE])


@pytest.fixture
def page(recording: Recording, graph: Graph) -> str:
    return render_view(recording, graph)


def _count(page: str, source: str, dest: str, kind: str) -> str | None:
    match = re.search(f'data-source="{source}" data-dest="{dest}" data-kind="{kind}" '
                      r'data-count="(\d+)"', page)
    return match.group(1) if match else None


def _embedded_events(page: str) -> list[dict[str, Any]]:
    match = re.search(r'<script type="application/json" id="hermes-events">(.*?)</script>',
                      page, re.S)
    assert match is not None
    return json.loads(match.group(1))  # type: ignore[no-any-return]


# --- self-contained -----------------------------------------------------------------------


def test_the_page_refers_to_nothing_outside_itself(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""(src|href|action|xlink:href)\s*=""", page, re.I)
    assert not re.search(r"""url\(\s*['"]?(?!#)""", page)  # only url(#marker) fragments
    assert "@import" not in page and "@font-face" not in page
    assert not re.search(r"""['"(]//[^/]""", page)  # no protocol-relative URLs


def test_the_page_forbids_the_browser_to_fetch_anything(page: str) -> None:
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page


def test_the_graph_alone_page_is_self_contained_and_shows_every_state() -> None:
    graph = load_graph(default_graph_path())
    page = render_graph_html(graph)
    assert "http://" not in page and "https://" not in page
    for name in graph.states:
        assert f'data-state="{name}"' in page


# --- escaping -----------------------------------------------------------------------------


def test_user_text_is_escaped_in_the_markup(page: str) -> None:
    assert "<script>alert" not in page
    assert "<b>x</b>" not in page
    assert html.escape("<script>alert('pwned')</script>", quote=True) in page


def test_the_embedded_events_cannot_close_their_script_element(page: str) -> None:
    events = _embedded_events(page)
    assert events[0]["text"] == HOSTILE
    # exactly the three scripts of the page: the events, the evidence chains (which quote
    # the message too) and the code
    assert page.count("</script>") == 3


# --- the overlay --------------------------------------------------------------------------


def test_edges_that_ran_are_counted(page: str) -> None:
    assert _count(page, "IDLE", "INTENT", "start") == "1"
    assert _count(page, "INTENT", "INTENT", "retry") == "1"
    assert _count(page, "INTENT", "PLANNING", "done") == "1"
    assert _count(page, "PLANNING", "EXECUTION", "done") == "1"
    assert _count(page, "MEMORY_COMMIT", "IDLE", "done") == "1"


def test_edges_that_did_not_run_count_zero(page: str) -> None:
    assert _count(page, "INTENT", "RESPONSE", "fail") == "0"
    assert _count(page, "PLANNING", "PLANNING", "retry") == "0"


async def test_counts_add_up_over_turns(make_orchestrator: Any, graph: Graph) -> None:
    recording = await record(make_orchestrator, graph, ["one A1001?", "two A1001?"])
    page = render_view(recording, graph)
    assert _count(page, "IDLE", "INTENT", "start") == "2"
    assert _count(page, "INTENT", "INTENT", "retry") == "1"  # the script breaks only once
    assert page.count('class="turn status-completed"') == 2


def test_retries_and_violations_are_shown_on_their_state(page: str) -> None:
    intent = re.search(r'<g class="state" data-state="INTENT".*?</g>', page, re.S)
    assert intent is not None
    assert "1 retry · 1 violation" in intent.group(0)
    assert "3 visits" not in intent.group(0)
    assert "2 visits" in intent.group(0)


def test_time_per_state_is_the_sum_of_its_exits(recording: Recording) -> None:
    overlay = overlay_from_events(recording.events)
    exits = [e for e in recording.events if e.kind == "state_exited" and e.state == "INTENT"]
    assert len(exits) == 2  # the retry, then done
    assert overlay.time_ms["INTENT"] == pytest.approx(sum(e.duration_ms for e in exits))
    assert overlay.violations == {"INTENT": 1}
    assert overlay.retries == {"INTENT": 1}


def test_the_turn_summary_shows_status_answer_and_path(page: str) -> None:
    row = re.search(r'<tr class="turn status-completed".*?</tr>', page, re.S)
    assert row is not None
    assert "342 left" in row.group(0)
    assert "IDLE → INTENT → INTENT → PLANNING" in row.group(0)


# --- the timeline -------------------------------------------------------------------------


def test_the_timeline_has_one_row_per_event_in_order(page: str, recording: Recording) -> None:
    seqs = [int(s) for s in re.findall(r'<tr class="step [^"]*" data-index="\d+" data-seq="(\d+)"',
                                       page)]
    assert seqs == [e.seq for e in recording.events]


def test_the_embedded_payloads_are_the_recorded_events(page: str, recording: Recording) -> None:
    assert _embedded_events(page) == [e.model_dump(mode="json") for e in recording.events]


def test_a_violation_row_is_marked_and_summarised(page: str) -> None:
    row = re.search(r'<tr class="step kind-contract_violation problem".*?</tr>', page, re.S)
    assert row is not None
    assert "intent@2.0.0 ✗ confidence" in row.group(0)
    assert 'data-state="INTENT"' in row.group(0)


def test_tool_events_belong_to_the_state_they_ran_in(page: str) -> None:
    row = re.search(r'<tr class="step kind-tool_call_started[^"]*"[^>]*>', page)
    assert row is not None
    assert 'data-state="EXECUTION"' in row.group(0)


# --- a different graph --------------------------------------------------------------------


def test_a_graph_other_than_the_recorded_one_shows_a_warning(recording: Recording) -> None:
    other = load_graph(Path(__file__).parent / "graphs" / "good" / "support_turn.yaml")
    page = render_view(recording, other)
    assert 'class="warning"' in page
    assert recording.header.graph.hash in page
    assert "PLANNING" in page and "cannot be drawn" in page


def test_the_recorded_graph_shows_no_warning(page: str) -> None:
    assert 'class="warning"' not in page


# --- the CLI ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, start", [("svg", '<?xml version="1.0"'),
                                        ("html", "<!DOCTYPE html>")])
def test_graph_command_draws_svg_and_html(fmt: str, start: str, capsys: Any) -> None:
    assert main(["graph", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert out.startswith(start)
    assert 'data-state="MEMORY_COMMIT"' in out


def test_view_command_writes_the_page(recording: Recording, graph: Graph, tmp_path: Path,
                                      capsys: Any) -> None:
    source = tmp_path / "s1.jsonl"
    lines = [recording.header.model_dump_json()] + [e.model_dump_json() for e in
                                                     recording.events]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target = tmp_path / "page.html"
    assert main(["view", str(source), "--out", str(target)]) == 0
    page = target.read_text(encoding="utf-8")
    assert "<!DOCTYPE html>" in page and 'class="timeline"' in page
    assert f"wrote {target}" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ('{"hello": 1}\n', "not a hermes-fsm recording"),
    ('{"format": "hermes-fsm/recording", "format_version": 99}\n', "version 99"),
])
def test_view_command_refuses_a_bad_recording_with_one_line(
        content: str | None, message: str, tmp_path: Path, capsys: Any) -> None:
    source = tmp_path / "rec.jsonl"
    if content is not None:
        source.write_text(content, encoding="utf-8")
    assert main(["view", str(source), "--out", str(tmp_path / "p.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "p.html").exists()


def test_run_with_record_writes_a_recording_the_view_reads(tmp_path: Path, capsys: Any) -> None:
    out_dir = tmp_path / "out"
    assert main(["run", "--record", str(out_dir), "--session", "rec-1",
                 "How many A1001 are left in the east warehouse?"]) == 0
    recording_file = out_dir / "rec-1.jsonl"
    assert recording_file.exists()
    assert main(["view", str(recording_file)]) == 0
    page = (out_dir / "rec-1.html").read_text(encoding="utf-8")
    assert _count(page, "IDLE", "INTENT", "start") == "1"
    assert 'class="warning"' not in page


def test_each_turns_evidence_chain_is_embedded_for_the_click(page: str,
                                                             recording: Recording) -> None:
    match = re.search(r'<script type="application/json" id="hermes-chains">(.*?)</script>',
                      page, re.S)
    assert match is not None
    chains = json.loads(match.group(1))
    [turn_id] = {e.turn_id for e in recording.events}
    text = chains[turn_id]
    call = next(e for e in recording.events if e.kind == "tool_call_started")
    assert "[user message]" in text and f"[tool call]    seq {call.seq}  {call.call_id}" in text
    assert '<pre id="chain"' in page


# --- issue 18: a real session's view ------------------------------------------------------


async def test_an_abort_is_drawn_as_an_edge_from_the_state_it_cut(make_orchestrator: Any
                                                                  ) -> None:
    from hermes_fsm.testing import HANG

    graph = graph_with({"RESPONSE": {"timeout_s": 60}}, budget_s=0.5)
    orchestrator = make_orchestrator(graph, brain=ScriptedBrain(happy_script(response=[HANG])))
    await orchestrator.run_turn("s1", "How many A1001?", user_id="alice")
    recording = parse_recording(recording_text(orchestrator, "s1"), "<test>")
    (cut,) = [e.source for e in recording.events
              if e.kind == "state_entered" and e.trigger == "abort"]  # RESPONSE, unless slow
    page = render_view(recording, graph)
    assert _count(page, cut, "IDLE", "abort") == "1"
    assert "abort (turn budget 0.5s)" in page
    # an abort that did not happen is not drawn (it stays in the note)
    assert _count(page, "INTENT" if cut != "INTENT" else "PLANNING", "IDLE", "abort") is None


def test_the_timeline_state_column_never_breaks_a_state_name(page: str) -> None:
    assert '<td class="state">PLANNING</td>' in page
    css = re.search(r"td\.kind, td\.state \{([^}]*)\}", page)
    assert css is not None and "white-space: nowrap" in css.group(1)
    assert "overflow-wrap: normal" in css.group(1)  # td's default is anywhere


def test_the_page_prints_no_absolute_path(recording: Recording, graph: Graph) -> None:
    default = load_graph(default_graph_path())  # loaded from an absolute path
    assert Path(default.path).is_absolute()
    other = load_graph(Path(__file__).parent / "graphs" / "good" / "support_turn.yaml")
    for shown in (render_view(recording, default), render_view(recording, other),
                  render_graph_html(default)):
        visible = re.sub(r'<script type="application/json".*?</script>', "", shown, flags=re.S)
        assert not re.search(r"(?<![\w.])/(?:work|tmp|home|root|usr)/", visible), \
            re.findall(r"/(?:work|tmp|home|root|usr)/\S*", visible)[:3]


def _label_rects(svg: str) -> list[tuple[float, float, float, float]]:
    from hermes_fsm.viz.layout import LABEL_LINE, LABEL_SIZE, text_width

    rects = []
    for group in re.findall(r'<text class="edge-label[^"]*" text-anchor="(\w+)"[^>]*>(.*?)</text>',
                            svg):
        anchor, spans = group
        lines = re.findall(r'<tspan x="([-\d.]+)" y="([-\d.]+)">(.*?)</tspan>', spans)
        x = float(lines[0][0])
        top = float(lines[0][1]) - LABEL_SIZE
        width = max(text_width(html.unescape(t), LABEL_SIZE) for _, _, t in lines)
        left = x - (width / 2 if anchor == "middle" else width if anchor == "end" else 0)
        rects.append((left, top, left + width, top + LABEL_LINE * len(lines)))
    return rects


@pytest.mark.parametrize("path", [default_graph_path(),
                                  Path(__file__).parent / "graphs" / "good" / "support_turn.yaml"])
def test_condition_labels_do_not_overlap(path: Path) -> None:
    from hermes_fsm.viz.svg import to_svg

    rects = _label_rects(to_svg(load_graph(path)))
    assert len(rects) > 5
    clashes = [(a, b) for i, a in enumerate(rects) for b in rects[i + 1:]
               if a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1]
    assert clashes == []
