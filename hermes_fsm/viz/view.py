"""The graph view: one self-contained HTML page of a graph, alone or with a recording.

:func:`render_view` lays a recording over its graph: the SVG drawing with the edges that
ran (thicker, ``×N``), the time spent in each state (shading), retries, contract
violations, failure routes and timeouts; a summary per turn (status, answer, path); and a
step-by-step timeline, one row per event. Clicking a row (or stepping with the arrow
keys) shows that event's full JSON payload, highlights its state in the graph, and shows
its turn's evidence chain (user message → intent → tool calls → results → facts → answer,
as ``hermes-fsm explain`` prints it).

The page is one file: CSS and JS inline (from ``hermes_fsm/data/view.css`` and
``view.js``), no external URL of any kind, and a Content-Security-Policy that forbids
the browser to fetch anything. Everything taken from the graph or the recording (user
messages, model outputs, tool outputs) is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import PurePath
from typing import Any

from hermes_fsm.conversation.graph import Conversation, apply_ops
from hermes_fsm.events.evidence import chain_text, evidence_chains
from hermes_fsm.events.recording import Recording
from hermes_fsm.graph.model import Graph
from hermes_fsm.viz.overlay import overlay_from_events
from hermes_fsm.viz.svg import escape, to_svg

__all__ = ["event_state", "event_summary", "render_graph_html", "render_view"]

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'")
_PROBLEMS = {"contract_violation", "retry", "timed_out", "handler_failed", "route_taken",
             "tool_call_retried"}


@cache
def _asset(name: str) -> str:
    return resources.files("hermes_fsm").joinpath("data", name).read_text(encoding="utf-8")


def _short(value: Any, limit: int = 110) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _script_json(value: Any) -> str:
    """JSON that cannot end the ``<script>`` element it sits in, whatever strings it holds."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def event_state(event: Any, current: str | None) -> str | None:
    """The state an event belongs to: its own ``state`` field, else the state the turn was in."""
    return getattr(event, "state", None) or current


def event_summary(event: Any) -> str:
    """One line saying what an event is about (the timeline's summary column)."""
    kind = event.kind
    if kind == "turn_started":
        return f"{event.user_id}: {_short(event.text)}"
    if kind == "state_entered":
        again = f" (attempt {event.attempt})" if event.attempt > 1 else ""
        return f"{event.trigger} from {event.source}{again}"
    if kind == "state_exited":
        return f"{event.trigger} → {event.dest} after {event.duration_ms:.1f} ms"
    if kind == "state_output":
        return f"{event.contract or 'output'} ✓ {_short(event.output, 90)}"
    if kind == "contract_violation":
        first = event.errors[0] if event.errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        more = f" (+{len(event.errors) - 1} more)" if len(event.errors) > 1 else ""
        return f"{event.contract} ✗ {where}: {first.get('msg', '')}{more}"
    if kind == "timed_out":
        return f"{event.scope} timed out after {event.limit_s:g}s (attempt {event.attempt})"
    if kind == "handler_failed":
        again = "retryable" if event.retryable else "not retryable"
        return f"{event.error_type}: {_short(event.message, 80)} ({again})"
    if kind == "retry":
        return f"attempt {event.attempt} after {event.delay_s:g}s ({event.reason})"
    if kind == "route_taken":
        return f"→ {event.dest} after {event.attempts} attempt(s): {_short(event.reason, 80)}"
    if kind == "brain_call":
        return f"{event.brain} answered in {event.duration_ms:.1f} ms"
    if kind == "token_chunk":
        return _short(event.text)
    if kind == "tool_call_started":
        return f"{event.tool}({_short(event.arguments, 90)})"
    if kind == "tool_call_finished":
        if event.ok:
            return f"{event.tool} ok → {_short(event.output, 80)}"
        error = event.error or {}
        message = _short(error.get("message", ""), 70)
        return f"{event.tool} failed: {error.get('error_code', '')} {message}"
    if kind == "tool_call_retried":
        return f"{event.tool} attempt {event.attempt}: {event.error_code}"
    if kind == "memory_write":
        return f"{event.update_type} {event.key}: {event.status}"
    if kind == "turn_finished":
        return f"{event.status} in {event.duration_ms:.1f} ms: {_short(event.answer, 90)}"
    if kind == "graph_updated":
        return _short(", ".join(_op_text(op) for op in event.ops), 160)
    common = {"session_id", "turn_id", "seq", "at", "kind", "state"}
    return _short({k: v for k, v in event.model_dump(mode="json").items() if k not in common})


def _page(title: str, body: Sequence[str], script: str = "") -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{_asset('view.css')}</style>",
        "</head>",
        "<body>",
        *body,
    ]
    if script:
        parts.append(script)
    parts.extend(["</body>", "</html>"])
    return "\n".join(parts) + "\n"


def _shown_path(path: str | None) -> str:
    """A graph file as the page shows it: its name only, never an absolute path (a page is
    shared; where a file lived on the recording machine is nobody's business)."""
    return PurePath(path).name if path else ""


def render_graph_html(graph: Graph) -> str:
    """The graph alone as a self-contained HTML page (``hermes-fsm graph --format html``)."""
    body = [
        '<header class="top">',
        f"<h1>{escape(graph.name)} <span class=\"muted\">{escape(graph.version)}</span></h1>",
        f'<p class="muted">{escape(graph.description)}</p>' if graph.description else "",
        f'<p class="meta">graph file <code>{escape(_shown_path(graph.path))}</code> · hash '
        f"<code>{escape(graph.content_hash)}</code> · {len(graph.states)} states</p>",
        "</header>",
        '<main class="graph-only"><section class="panel graph-panel">',
        to_svg(graph, standalone=False),
        "</section></main>",
    ]
    return _page(f"{graph.name} {graph.version} — hermes-fsm graph", body)


def _warnings(recording: Recording, graph: Graph) -> list[str]:
    out = []
    recorded = recording.header.graph
    if recorded.hash != graph.content_hash:
        out.append(
            f"This recording was made with graph {recorded.name} {recorded.version} "
            f"(hash {recorded.hash}, {_shown_path(recorded.path) or 'path unknown'}), but the "
            f"graph shown is {graph.name} {graph.version} (hash {graph.content_hash}, "
            f"{_shown_path(graph.path)}). "
            "Edges and states may not match what ran; pass --graph with the graph file the "
            "recording was made with.")
    unknown = sorted({name for name in overlay_from_events(recording.events).states()
                      if name not in graph.states})
    if unknown:
        out.append(f"The recording visits states the graph does not have: {', '.join(unknown)}; "
                   "they are listed in the timeline but cannot be drawn.")
    return out


def _turns(recording: Recording) -> list[str]:
    rows = ['<table class="turns"><thead><tr><th>#</th><th>message</th><th>status</th>'
            "<th>answer</th><th>path</th><th>time</th><th>retries</th><th>violations</th>"
            "</tr></thead><tbody>"]
    for number, events in enumerate(recording.turns(), start=1):
        started = next((e for e in events if e.kind == "turn_started"), None)
        finished = next((e for e in events if e.kind == "turn_finished"), None)
        status = finished.status if finished is not None else "unfinished"
        path = " → ".join(finished.path) if finished is not None else ""
        retries = sum(1 for e in events if e.kind == "retry")
        violations = sum(1 for e in events if e.kind == "contract_violation")
        first_seq = events[0].seq
        rows.append(
            f'<tr class="turn status-{escape(status)}" data-seq="{first_seq}">'
            f'<td title="{escape(events[0].turn_id)}">{number}</td>'
            f"<td>{escape(_short(started.text, 160) if started else '')}</td>"
            f'<td><span class="badge status-{escape(status)}">{escape(status)}</span></td>'
            f"<td>{escape(_short(finished.answer, 200) if finished else '')}</td>"
            f'<td class="path">{escape(path)}</td>'
            f"<td>{f'{finished.duration_ms:.1f} ms' if finished else ''}</td>"
            f"<td>{retries}</td><td>{violations}</td></tr>")
    rows.append("</tbody></table>")
    return rows


def _op_text(op: dict[str, Any]) -> str:
    kind = op.get("op")
    if kind == "entity":
        node = op["node"]
        return f"+{node['id']} {node['type']}={node['canonical']}"
    if kind == "intent":
        return f"+{op['node']['id']} {op['node']['type']}"
    if kind == "task":
        return f"task {op['task']['id']} {op['task']['kind']} waits"
    if kind in ("deprecate", "mention", "intent_status", "task_end"):
        return f"{kind} {op.get('id')}"
    if kind == "prune":
        return (f"prune {len(op.get('entities', ()))} entities, "
                f"{len(op.get('intents', ()))} intents")
    return f"{kind} {op.get('src', '')}→{op.get('dst', '')}"


def _conversation(recording: Recording) -> list[str]:
    """Per turn: the intent nodes it made (their slots → entity nodes), the entities it
    touched (deprecated ones struck through) and the task left waiting."""
    conv = Conversation()
    rows = ['<table class="conversation"><thead><tr><th>#</th><th>intents</th>'
            "<th>entities</th><th>waiting</th></tr></thead><tbody>"]
    for number, events in enumerate(recording.turns(), start=1):
        touched: list[str] = []
        made: list[str] = []
        for event in events:
            if event.kind != "graph_updated":
                continue
            apply_ops(conv, event.ops)
            for op in event.ops:
                if op["op"] == "intent":
                    made.append(op["node"]["id"])
                elif op["op"] in ("entity", "mention", "deprecate"):
                    node_id = op["node"]["id"] if op["op"] == "entity" else op["id"]
                    if node_id not in touched:
                        touched.append(node_id)
        intents = []
        for intent_id in made:
            node = conv.intents[intent_id]
            slots = ", ".join(f"{slot}={ref} {conv.entities[ref].canonical}"
                              for slot, ref in node.params.items() if ref in conv.entities)
            intents.append(f"{escape(intent_id)} {escape(node.type)}({escape(slots)})")
        entities = []
        for node_id in touched:
            e = conv.entities[node_id]
            text = escape(f"{e.id} {e.type} {e.value} → {e.canonical} v{e.version} "
                          f"({e.confidence:.2f})")
            entities.append(text if e.active else f"<s>{text}</s>")
        waiting = " ".join(f"{escape(t.id)} {escape(t.kind)} {escape(t.slot or t.intent_type)}"
                           for t in conv.tasks)
        rows.append(f"<tr><td>{number}</td><td>{'<br>'.join(intents)}</td>"
                    f"<td>{'<br>'.join(entities)}</td><td>{waiting}</td></tr>")
    rows.append("</tbody></table>")
    return rows


def _timeline(recording: Recording) -> list[str]:
    rows = ['<table class="timeline"><thead><tr><th>seq</th><th>+ms</th><th>kind</th>'
            "<th>state</th><th>summary</th></tr></thead><tbody>"]
    current: str | None = None
    turn_start = None
    turn_id = None
    for index, event in enumerate(recording.events):
        if event.turn_id != turn_id:
            turn_id, turn_start = event.turn_id, event.at
            rows.append(f'<tr class="turn-divider"><td colspan="5">turn {escape(turn_id)}'
                        "</td></tr>")
        state = event_state(event, current)
        if event.kind == "state_entered":
            current = event.state
        offset = (event.at - turn_start).total_seconds() * 1000 if turn_start else 0.0
        problem = " problem" if event.kind in _PROBLEMS else ""
        rows.append(
            f'<tr class="step kind-{escape(event.kind)}{problem}" data-index="{index}" '
            f'data-seq="{event.seq}" data-state="{escape(state or "")}" tabindex="0">'
            f'<td class="num">{event.seq}</td><td class="num">{offset:.0f}</td>'
            f'<td class="kind">{escape(event.kind)}</td>'
            f'<td class="state">{escape(state or "")}</td>'
            f'<td class="summary">{escape(event_summary(event))}</td></tr>')
    rows.append("</tbody></table>")
    return rows


def render_view(recording: Recording, graph: Graph) -> str:
    """The recording laid over ``graph`` as one self-contained HTML page.

    Args:
        recording: a parsed recording (:func:`hermes_fsm.events.recording.load_recording`).
        graph: the graph to draw; a warning is shown when it is not the one recorded.
    """
    header = recording.header
    overlay = overlay_from_events(recording.events)
    warnings = [f'<div class="warning" role="alert">⚠ {escape(text)}</div>'
                for text in _warnings(recording, graph)]
    title = f"session {header.session_id} — {graph.name}"
    body = [
        '<header class="top">',
        f"<h1>Session <code>{escape(header.session_id)}</code> on {escape(graph.name)} "
        f'<span class="muted">{escape(graph.version)}</span></h1>',
        f'<p class="meta">user <code>{escape(header.user_id)}</code> · recorded '
        f"{escape(header.recorded_at.isoformat())} · {len(recording.turns())} turn(s), "
        f"{len(recording.events)} events · hermes-fsm {escape(header.package_version)} · "
        f"graph hash <code>{escape(header.graph.hash)}</code></p>",
        *warnings,
        "</header>",
        '<main class="view">',
        '<section class="panel graph-panel"><h2>Graph</h2>',
        '<p class="hint">Edge labels ×N: times the edge ran. Shading: time spent in the state. '
        "Click a state to step to its next event.</p>",
        to_svg(graph, overlay, standalone=False),
        "<h2>Turns</h2>", *_turns(recording),
        "<h2>Conversation graph</h2>", *_conversation(recording),
        "</section>",
        '<section class="panel side">',
        '<h2>Timeline <span class="controls"><button type="button" id="prev">◀ prev</button>'
        '<button type="button" id="next">next ▶</button></span></h2>',
        '<div class="timeline-wrap">', *_timeline(recording), "</div>",
        '<h2 id="payload-title">Payload</h2>',
        '<pre id="payload" class="payload">Click a step of the timeline to see its event.</pre>',
        '<h2 id="chain-title">Evidence chain</h2>',
        '<pre id="chain" class="payload">Click a step to see its turn\'s evidence chain: '
        "user message → intent → tool calls → results → facts → answer.</pre>",
        "</section>",
        "</main>",
    ]
    events = [e.model_dump(mode="json") for e in recording.events]
    # per turn, the chain `hermes-fsm explain` prints (events/evidence.py): a click shows it
    chains = {c["turn_id"]: chain_text(c) for c in evidence_chains(events)}
    script = (f'<script type="application/json" id="hermes-events">{_script_json(events)}'
              f'</script>\n<script type="application/json" id="hermes-chains">'
              f"{_script_json(chains)}</script>\n<script>\n{_asset('view.js')}</script>")
    return _page(title, body, script)
