"""Chat messages for a model-backed brain: one state's request as a system + user prompt.

The system message names the state, hands over the contract's JSON Schema and asks for
exactly one JSON object, then the recalled memory; the user message carries the rolling
summary and the recent history, what earlier states of the turn produced, the tools (for
a contract that plans tool calls), the turn's facts as lines (for an answer) and the
user's words. On a retry the refusal (the
request's :class:`~hermes_fsm.brain.protocol.Repair`, in words: the validation errors) is
appended, so the model can repair its output. Each part is
rendered by its own function, so the context builder (:mod:`hermes_fsm.engine.context`)
measures exactly what is sent.

>>> from hermes_fsm.brain.protocol import BrainRequest, Repair
>>> request = BrainRequest(state="INTENT", contract_name="intent",
...                        schema={"type": "object"}, text="hi", user_id="u", attempt=2,
...                        repair=Repair.timeout(10.0))
>>> [m["role"] for m in chat_messages(request)]
['system', 'user', 'user']
>>> print(repair_message(request))
Attempt 2. the previous attempt timed out after 10.0s
Reply again with one corrected JSON object only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from hermes_fsm.brain.fact_alias import FactAliases
from hermes_fsm.brain.grammar_schema import answers_with_evidence, turn_facts
from hermes_fsm.brain.protocol import BrainRequest, SummaryRequest, ToolDescription
from hermes_fsm.contracts.base import output_field

__all__ = ["answer_field", "chat_messages", "clock_block", "conversation_block",
           "facts_block", "history_block", "input_block", "memory_block", "outputs_block",
           "plans_tools", "prompt_schema", "repair_message", "request_aliases",
           "resources_block", "shown_outputs", "shows_conversation", "strip_fences",
           "summary_block", "summary_messages", "system_parts", "system_prompt",
           "tools_block"]

_NO_FIELD = object()  # output_field's default when a field is missing

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def system_prompt(request: BrainRequest) -> str:
    """The system message's instructions and the contract's JSON Schema (memory excluded).

    The same text for every request of a state: cached by (state, contract, schema).
    """
    fixed, clock = system_parts(request)
    return fixed + clock


def system_parts(request: BrainRequest) -> tuple[str, str]:
    """:func:`system_prompt` in two parts: the state's fixed text (the same object for every
    request of the state, so it is measured once) and the turn's clock block, which starts
    with a blank line (a token counter counts them apart as it counts them together)."""
    key = (request.state, request.contract_name, id(request.schema))
    cached = _SYSTEM.get(key)
    clock = clock_block(request.now, rule=not answers_with_evidence(request.schema))
    if cached is not None and cached[0] is request.schema:
        return cached[1], clock
    schema = json.dumps(prompt_schema(request.schema), ensure_ascii=False,
                        separators=(",", ":"))
    text = (
        f"You are the {request.state} step of an agent that answers a user. "
        f"Reply with exactly one JSON object that satisfies this JSON Schema "
        f"(contract '{request.contract_name}'), and nothing else:\n{schema}"
    )
    hint = CONTRACT_HINTS.get(request.contract_name)
    if hint:
        text += f"\n{hint}"
    if len(_SYSTEM) >= 256:
        _SYSTEM.clear()
    _SYSTEM[key] = (request.schema, text)  # the schema is kept: its id stays its own
    return text, clock


def prompt_schema(schema: Any) -> Any:
    """The contract schema as the prompt shows it: an answer's (see
    :func:`~hermes_fsm.brain.grammar_schema.answers_with_evidence`) without its
    ``description`` and ``title`` texts, which a small model copies into ``text`` instead of
    answering (17 of 27 refused RESPONSE outputs of SmolLM2 in ``bench/real_model.py``
    restated "The answer, with evidence references that must name facts of this turn.");
    the hint (:data:`CONTRACT_HINTS`) says what to write. Other schemas come back as they
    are. The Response contract still refuses an answer that restates them.

    >>> prompt_schema({"type": "object", "description": "The answer.", "properties": {
    ...     "text": {"type": "string", "title": "Text"},
    ...     "evidence": {"type": "array", "items": {"type": "string"}, "description": "Ids."}}})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'type': 'object', 'properties': {'text': {'type': 'string'},
     'evidence': {'type': 'array', 'items': {'type': 'string'}}}}
    """
    return _without_texts(schema) if answers_with_evidence(schema) else schema


def _without_texts(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_texts(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: ({name: _without_texts(sub) for name, sub in value.items()}
                  if key == "properties" and isinstance(value, dict) else _without_texts(value))
            for key, value in schema.items()
            if key == "properties" or not (key in ("description", "title")
                                           and isinstance(value, str))}


def clock_block(now: datetime | None, rule: bool = True) -> str:
    """The turn's time and (with ``rule``) the rule for times in tool arguments ("" without
    a time). An answer's request gets the time alone: it writes no tool argument, and the
    rule's second timestamp was what SmolLM2 copied into answers ("2026-12-05T19:38:47+00:00
    is a day…").

    >>> from datetime import datetime
    >>> from zoneinfo import ZoneInfo
    >>> text = clock_block(datetime(2026, 12, 1, 10, tzinfo=ZoneInfo("Asia/Shanghai")))
    >>> text.split(". ")[0].strip()
    'Now: 2026-12-01T10:00:00+08:00 (Tuesday, timezone Asia/Shanghai)'
    >>> clock_block(datetime(2026, 12, 1, 10, tzinfo=ZoneInfo("UTC")), rule=False).strip()
    'Now: 2026-12-01T10:00:00+00:00 (Tuesday, timezone UTC).'
    """
    if now is None:
        return ""
    iso = now.isoformat(timespec="seconds")
    zone = getattr(now.tzinfo, "key", None) or now.strftime("UTC%z")
    now_is = f"\n\nNow: {iso} ({now:%A}, timezone {zone})."
    if not rule:
        return now_is
    return (f"{now_is} Every date or time in a tool "
            f"argument must be exact: an ISO 8601 date-time with this offset (e.g. {iso}) or "
            f"an ISO date ({now.date().isoformat()}), never words like 'tomorrow'. When the "
            "user's time is unclear, ask them; never guess.")


_SYSTEM: dict[tuple[str, str, int], tuple[Any, str]] = {}

CONTRACT_HINTS: dict[str, str] = {
    "intent": "confidence is a number from 0 to 1 (e.g. 0.8), never above 1.",
    "plan": "Call only the tools listed below, with the arguments their schemas name; "
            "plan no call when none is needed.",
    "response": "Write in `text` the answer itself, as the user should read it: one or two "
                "sentences in the user's language, with the numbers and names from the "
                "results of earlier steps. Do not describe the question, the schema or "
                "yourself. Put the names of the facts you used in `evidence`.",
    "memory_commit": "Usually there is nothing to remember: reply {\"memory_updates\": []}. "
                     "confidence is a number from 0 to 1.",
}
"""What small models get wrong per bundled contract, said once in the system prompt (the
contract still checks it)."""


def resources_block(resources: str) -> str:
    """The MCP resources read for the request, before the memory ("" for none)."""
    return f"\n\nReference material:\n{resources}" if resources else ""


def memory_block(memory: str) -> str:
    """Recalled memory as the system message's tail ("" for none)."""
    return f"\n\nBackground about the user:\n{memory}" if memory else ""


def conversation_block(request: BrainRequest) -> str:
    """The conversation graph as the model should use it ("" without one): the active
    entities by node id (with their decayed confidence), the last task and the pending
    one. Intents reference these ids in ``entities``; plans cite them in
    ``reasoning_trace``. An answer grounded in the turn's facts (:func:`facts_block`) is
    not shown the graph: its entity lines ("B2002 (canonical B2002, confidence 0.90) …")
    are what SmolLM2 wrote as the answer in 6 of 40 turns of ``bench/real_model.py``,
    beside a figure of the wrong fact; the plan that found the facts read the graph."""
    conv = request.conversation
    if conv is None or not (conv.entities or conv.tasks) or not shows_conversation(request):
        return ""
    view = conv.summary()
    lines = ["Conversation graph (cite node ids; a corrected entity is replaced, not active):"]
    lines += [f"- {e['id']} {e['type']}: {e['value']} (canonical {e['canonical']}, "
              f"confidence {e['confidence']:.2f})" for e in view["entities"][-20:]]
    if view["last_intent"]:
        last = view["last_intent"]
        slots = ", ".join(f"{k}={v}" for k, v in last["params"].items())
        lines.append(f"Last task: {last['id']} {last['type']}({slots})")
    if view["pending"]:
        task = view["pending"]
        lines.append(f"Waiting for the user ({task['id']}, {task['kind']}): {task['question']}")
    return "\n".join(lines)


def shows_conversation(request: BrainRequest) -> bool:
    """Whether :func:`conversation_block` shows the graph to ``request`` (not to an answer
    with facts of this turn)."""
    return not (answers_with_evidence(request.schema) and turn_facts(request.outputs))


def summary_block(summary: str) -> str:
    """The rolling summary of the older conversation ("" for none)."""
    return f"Summary of the earlier conversation:\n{summary}" if summary else ""


def history_block(history: Sequence[Mapping[str, str]]) -> str:
    """The recent messages, one line each ("" for none)."""
    if not history:
        return ""
    return "Conversation so far:\n" + "\n".join(
        f"{m.get('role', '?')}: {m.get('content', '')}" for m in history)


def outputs_block(outputs: Mapping[str, Any]) -> str:
    """What earlier states of the turn produced ("" for nothing yet)."""
    if not outputs:
        return ""
    done = {name: output.model_dump(mode="json") for name, output in outputs.items()}
    return f"{OUTPUTS_HEADER}\n" + json.dumps(done, ensure_ascii=False, separators=(",", ":"))


OUTPUTS_HEADER = "Results of earlier steps of this turn:"


def plans_tools(request: BrainRequest) -> bool:
    """Whether the request's contract plans tool calls (only then are tools in the prompt)."""
    return bool(request.tools) and "tool_calls" in request.schema.get("properties", {})


def tools_block(tools: Sequence[ToolDescription]) -> str:
    """The tools a planning step may call, with their argument schemas ("" for none)."""
    if not tools:
        return ""
    described = [{"name": t.name, "description": t.description,
                  "input_schema": t.input_schema} for t in tools]
    return ("Tools you may call (use these names and argument schemas exactly):\n"
            + json.dumps(described, ensure_ascii=False, separators=(",", ":")))


def facts_block(request: BrainRequest) -> str:
    """For an answer (a contract with ``text`` and ``evidence``): the turn's facts, one line
    each, under their aliases (``f1`` …, :mod:`hermes_fsm.brain.fact_alias`), each value
    with the placeholder that writes it ("" for other requests, or without facts)."""
    aliases = request_aliases(request)
    if aliases is None:
        return ""
    lines = [FACTS_HEADER.format(names=", ".join(aliases.ids)), *aliases.lines]
    wanted = aliases.with_figures()
    if wanted:
        hint = f"In `text`, write {' or '.join(wanted[:4])} where the number goes"
        if aliases.listed:
            hint += f", then {' or '.join(aliases.listed[:4])} where the items go"
        lines.append(hint + ".")
    elif worded := aliases.with_words():
        lines.append(f"In `text`, write {' or '.join(worded[:4])} where its words go.")
    return "\n".join(lines)


FACTS_HEADER = "Facts of this turn ({names}; cite them in `evidence`):"


def request_aliases(request: BrainRequest) -> FactAliases | None:
    """The aliases of the turn's facts for an answer's request (``None`` for another
    contract, or without facts)."""
    if not answers_with_evidence(request.schema):
        return None
    facts = turn_facts(request.outputs)
    return FactAliases.of(facts) if facts else None


def shown_outputs(request: BrainRequest) -> Mapping[str, Any]:
    """The earlier outputs the prompt shows as JSON: all of them, except for an answer whose
    facts :func:`facts_block` lists — then not the outputs those lines come from (a
    ``facts`` report, the tool ``results``): the same facts twice cost a small model on a CPU
    seconds of prompt, and the JSON is what it copied wrongly."""
    if not facts_block(request):
        return request.outputs
    return {name: output for name, output in request.outputs.items()
            if output_field(output, "facts", _NO_FIELD) is _NO_FIELD
            and output_field(output, "results", _NO_FIELD) is _NO_FIELD}


def _flat(content: Any, prefix: str = "") -> str:
    """``{"tool": "t", "output": {"a": 1}}`` as ``tool t; output.a 1``."""
    if isinstance(content, Mapping):
        return "; ".join(_flat(v, f"{prefix}{k}.") if isinstance(v, Mapping)
                         else f"{prefix}{k} {_value(v)}" for k, v in content.items())
    return _value(content)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def input_block(text: str) -> str:
    """The user's message of this turn."""
    return f"User message:\n{text}"


def repair_message(request: BrainRequest) -> str:
    """On a retry, why the previous output was refused ("" on a first attempt)."""
    if request.repair is None:
        return ""
    why = request.repair.text()
    aliases = request_aliases(request)  # the refusal names facts as the prompt does
    if aliases is not None:
        why = aliases.speak(why)
    return (f"Attempt {request.attempt}. {why}\n"
            "Reply again with one corrected JSON object only.")


def chat_messages(request: BrainRequest, history_limit: int | None = None, *,
                  system_role: bool = True) -> list[dict[str, str]]:
    """The messages asking a chat model for ``request``'s output.

    ``request.history`` and ``request.summary`` are used as given (the context builder
    has fitted them to their budget); ``history_limit`` keeps only the last messages.
    ``system_role=False`` puts the system text at the head of the first user message, for
    a model whose chat template has no system role (Gemma: llama-cpp-python's ``gemma``
    format drops a system message, and with it the schema and the instructions).
    """
    system = (system_prompt(request) + resources_block(request.resources)
              + memory_block(request.memory))
    history = list(request.history)
    if history_limit is not None:
        history = history[-history_limit:] if history_limit > 0 else []
    parts = [summary_block(request.summary), history_block(history),
             conversation_block(request), outputs_block(shown_outputs(request))]
    if plans_tools(request):
        parts.append(tools_block(request.tools))
    parts += [facts_block(request), input_block(request.text)]
    user = "\n\n".join(p for p in parts if p)
    messages = ([{"role": "system", "content": system}, {"role": "user", "content": user}]
                if system_role else [{"role": "user", "content": f"{system}\n\n{user}"}])
    if request.repair is not None:
        messages.append({"role": "user", "content": repair_message(request)})
    return messages


SUMMARY_INSTRUCTIONS = (
    "You keep the rolling summary of a conversation between a user and an assistant. "
    "Rewrite the summary so far to include the new messages. Keep every stated time and "
    "date, every task or request that is still open, and every constraint or preference "
    "(must, must not, before, by, only, at least), with exact numbers, names and times. "
    "Drop greetings and small talk. Write short plain-text lines, oldest first, in the "
    "language of the conversation, at most {max_tokens} tokens. Reply with the summary only."
)


def summary_messages(request: SummaryRequest) -> list[dict[str, str]]:
    """The messages asking a chat model to fold ``request.messages`` into the summary."""
    lines = "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in request.messages)
    return [{"role": "system",
             "content": SUMMARY_INSTRUCTIONS.format(max_tokens=request.max_tokens)},
            {"role": "user", "content": f"Summary so far:\n{request.previous or '(none)'}"
                                        f"\n\nNew messages:\n{lines or '(none)'}"}]


def strip_fences(content: str) -> str:
    """A model's reply without a Markdown code fence around it (models often add one)."""
    match = _FENCE.match(content)
    return match.group(1) if match else content


def answer_field(schema: Any, name: str = "text") -> bool:
    """Whether a contract schema has a top-level string field ``name`` (streamed as tokens)."""
    field = schema.get("properties", {}).get(name) if isinstance(schema, dict) else None
    return isinstance(field, dict) and field.get("type") == "string"
