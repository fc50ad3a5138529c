"""The evidence chain of a turn, from its events (seed 002 §2.2).

Each tool call of a turn is linked, by ids the events already carry::

    [user message] → [intent node] → [tool call] → [tool result] → [facts] → [answer]

``turn_started`` (the message, its ``seq``) → the ``intent`` state output (the intent and
its slots; the conversation graph's nodes from ``graph_updated``) → each planned call
(the ``plan`` output's ``tool_calls`` with their ``reasoning_trace``, matched in order to
the ``tool_call_started`` events that follow it, which carry the ``call_id``) →
``tool_call_finished`` of that ``call_id`` → the ``result_report`` facts whose ``source``
is that ``call_id`` → the ``response`` output's ``evidence`` (which facts the answer
cites) and ``turn_finished``.

:func:`evidence_chains` works on plain event mappings (a recording's ``raw`` events or a
session store's), so a chain can be printed from any stored session;
:func:`chain_text` prints one (``hermes-fsm explain``).

>>> events = [
...     {"kind": "turn_started", "turn_id": "t1", "seq": 1, "user_id": "u", "text": "hi"},
...     {"kind": "turn_finished", "turn_id": "t1", "seq": 2, "status": "completed",
...      "answer": "hello"}]
>>> [c["answer"]["text"] for c in evidence_chains(events)]
['hello']
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["chain_text", "evidence_chains"]


def _contract(event: Mapping[str, Any]) -> str:
    return str(event.get("contract") or "").split("@", 1)[0]


def _nodes(ops: Iterable[Any]) -> list[str]:
    found = []
    for op in ops:
        if isinstance(op, Mapping):
            for key in ("node_id", "id", "node"):
                value = op.get(key)
                if isinstance(value, str) and value not in found:
                    found.append(value)
    return found


def evidence_chains(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One chain per turn, in order (see the module docs for the shape's fields).

    Each chain: ``turn_id``, ``turn`` (1-based), ``session_id``, ``status``,
    ``user_message`` {seq, user_id, text}, ``intent`` {seq, intent_type, parameters,
    confidence, nodes} or ``None``, ``calls`` [{call_id, tool, arguments, reasoning,
    seq, result {seq, ok, output | error, attempts, duration_ms} or ``None``, facts
    [ids], cited, and ``version`` {runs, version, candidate} for a canaried tool}],
    ``facts`` [{id, source, seq}], ``answer`` {seq, text, evidence}.
    """
    chains: list[dict[str, Any]] = []
    by_turn: dict[str, dict[str, Any]] = {}
    pending: dict[str, list[dict[str, Any]]] = {}  # planned calls not yet started, per turn
    for event in events:
        turn_id = str(event.get("turn_id", ""))
        chain = by_turn.get(turn_id)
        if chain is None:
            chain = {"turn_id": turn_id, "turn": len(chains) + 1,
                     "session_id": event.get("session_id"), "status": None,
                     "user_message": None, "intent": None, "nodes": [], "calls": [],
                     "facts": [], "answer": None}
            by_turn[turn_id] = chain
            chains.append(chain)
            pending[turn_id] = []
        _take(chain, pending[turn_id], event)
    for chain in chains:
        _close(chain)
    return chains


def _take(chain: dict[str, Any], pending: list[dict[str, Any]], event: Mapping[str, Any]) -> None:
    kind, seq = event.get("kind"), event.get("seq")
    if kind == "turn_started":
        chain["user_message"] = {"seq": seq, "user_id": event.get("user_id"),
                                 "text": event.get("text")}
    elif kind == "graph_updated":
        chain["nodes"] += [n for n in _nodes(event.get("ops") or ()) if n not in chain["nodes"]]
    elif kind == "state_output":
        output = event.get("output")
        output = output if isinstance(output, Mapping) else {}
        contract = _contract(event)
        if contract == "intent":
            chain["intent"] = {"seq": seq, "intent_type": output.get("intent_type"),
                               "parameters": output.get("parameters") or {},
                               "confidence": output.get("confidence")}
        elif contract == "plan":
            pending[:] = [{"tool": c.get("tool_name"), "reasoning": c.get("reasoning_trace"),
                           "plan_seq": seq}
                          for c in output.get("tool_calls") or () if isinstance(c, Mapping)]
        elif contract == "result_report":
            known = {f["id"] for f in chain["facts"]}
            for fact in output.get("facts") or ():
                if isinstance(fact, Mapping) and fact.get("id") not in known:
                    chain["facts"].append({"id": fact.get("id"), "source": fact.get("source"),
                                           "seq": seq})
        elif contract == "response":
            chain["answer"] = {"seq": seq, "text": output.get("text"),
                               "evidence": list(output.get("evidence") or ())}
    elif kind == "tool_call_started":
        planned = next((p for p in pending if p["tool"] == event.get("tool")), None)
        if planned is not None:
            pending.remove(planned)
        chain["calls"].append({"call_id": event.get("call_id"), "tool": event.get("tool"),
                               "arguments": event.get("arguments") or {},
                               "reasoning": planned["reasoning"] if planned else None,
                               "plan_seq": planned["plan_seq"] if planned else None,
                               "seq": seq, "result": None, "facts": [], "cited": False})
    elif kind == "tool_version_chosen":  # a canaried tool: which version ran the call
        call = next((c for c in reversed(chain["calls"])
                     if c["call_id"] == event.get("call_id")), None)
        if call is not None:
            call["version"] = {"runs": event.get("runs"), "version": event.get("version"),
                               "candidate": bool(event.get("candidate"))}
    elif kind == "tool_call_finished":
        call = next((c for c in reversed(chain["calls"])
                     if c["call_id"] == event.get("call_id")), None)
        if call is not None:
            result: dict[str, Any] = {"seq": seq, "ok": bool(event.get("ok")),
                                      "attempts": event.get("attempts"),
                                      "duration_ms": event.get("duration_ms")}
            if event.get("ok"):
                result["output"] = event.get("output")
            else:
                result["error"] = event.get("error")
            call["result"] = result
    elif kind == "turn_finished":
        chain["status"] = event.get("status")
        if chain["answer"] is None:
            chain["answer"] = {"seq": seq, "text": event.get("answer"), "evidence": []}


def _close(chain: dict[str, Any]) -> None:
    cited = set((chain["answer"] or {}).get("evidence") or ())
    for call in chain["calls"]:
        call["facts"] = [f["id"] for f in chain["facts"] if f["source"] == call["call_id"]]
        call["cited"] = any(f in cited for f in call["facts"])
    if chain["intent"] is not None:
        chain["intent"]["nodes"] = chain.pop("nodes")
    else:
        chain.pop("nodes")


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def chain_text(chain: Mapping[str, Any]) -> str:
    """One turn's chain as indented lines (what ``hermes-fsm explain`` prints)."""
    lines = [f"turn {chain['turn']} ({chain['turn_id']}, {chain['status'] or 'unfinished'})"]
    message = chain.get("user_message")
    if message:
        lines.append(f"  [user message] seq {message['seq']}  {message['user_id']}: "
                     f"{_short(message['text'])}")
    intent = chain.get("intent")
    if intent:
        nodes = f"  nodes: {', '.join(intent['nodes'])}" if intent.get("nodes") else ""
        lines.append(f"  [intent node]  seq {intent['seq']}  {intent['intent_type']} "
                     f"{_short(intent['parameters'])}  confidence {intent['confidence']}{nodes}")
    for call in chain.get("calls") or ():
        lines.append(f"  [tool call]    seq {call['seq']}  {call['call_id']}  {call['tool']} "
                     f"{_short(call['arguments'])}")
        if call.get("reasoning"):
            lines.append(f"                 because: {_short(call['reasoning'])}")
        if call.get("version"):
            v = call["version"]
            which = "canary" if v["candidate"] else "stable"
            lines.append(f"                 ran on: {v['runs']} v{v['version']} ({which})")
        result = call.get("result")
        if result is None:
            lines.append("  [tool result]  none (the call did not finish)")
        elif result["ok"]:
            lines.append(f"  [tool result]  seq {result['seq']}  ok  {_short(result['output'])}")
        else:
            error = result.get("error") or {}
            lines.append(f"  [tool result]  seq {result['seq']}  {error.get('error_code')}: "
                         f"{_short(error.get('message'))}")
        if call["facts"]:
            mark = "cited by the answer" if call["cited"] else "not cited"
            lines.append(f"  [facts]        {', '.join(call['facts'])}  ({mark})")
        else:
            lines.append("  [facts]        none (a failed call gives no fact)")
    answer = chain.get("answer")
    if answer:
        cites = f"  cites {', '.join(answer['evidence'])}" if answer.get("evidence") else ""
        lines.append(f"  [answer]       seq {answer['seq']}{cites}: {_short(answer['text'], 300)}")
    return "\n".join(lines) + "\n"
