"""The conversation layer's handlers, hooks and conditions in ``states/agent_turn.yaml``.

Every change to the session's conversation graph is a ``graph_updated`` event whose
``ops`` are folded by :func:`~hermes_fsm.conversation.graph.apply_ops` — here as the
change is made, and again wherever the session is rebuilt from its events.

- INTENT's handler :func:`classify` first looks at the pending task: a yes/no to a
  pending approval, or a message that fills the slot a clarification asked for, answers
  it without asking the brain (the task resumes where it stopped; it is not classified
  from scratch). Anything else goes to the brain, and a pending task stays pending.
- INTENT's ``on_output`` :func:`record_intent` merges the intent's entities into the graph
  (re-mentions merge, corrections deprecate and version) and adds the intent node.
- PLANNING → CLARIFY when the plan lists ``missing_slots``: :func:`clarify` asks for
  exactly that slot with its expected format (from the tool contract), stores the task and
  ends the turn ``awaiting_input``; a value that fails its format again is counted, and
  past ``max_slot_failures`` the task is dropped with a clear message (bounded).
- PLANNING → APPROVAL when a call's tool contract says ``approval: true``:
  :func:`approval` lists exactly what would run, stores that plan and ends the turn
  ``awaiting_approval`` (after RESPONSE when earlier rounds found facts: :func:`has_facts`).
  A later yes goes INTENT → APPROVED, whose handler :func:`run_approved` hands EXECUTION
  the stored plan, unchanged.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from hermes_fsm.brain.rulebook import detect_language
from hermes_fsm.contracts.states import Intent, Plan
from hermes_fsm.conversation.followups import reply_kind
from hermes_fsm.conversation.graph import (
    FROM_MEMORY,
    NOT_ENTITIES,
    Conversation,
    GraphEdit,
    Task,
    entity_type_of,
)
from hermes_fsm.conversation.slots import (
    Slot,
    SlotProblem,
    expected_format,
    question,
    required_slots,
    value_in_text,
)
from hermes_fsm.engine.handlers import ask_brain
from hermes_fsm.engine.turn import TurnContext
from hermes_fsm.events.model import GraphUpdated

__all__ = [
    "approval",
    "approved",
    "clarify",
    "classify",
    "has_facts",
    "needs_approval",
    "record_intent",
    "record_plan",
    "run_approved",
]

_CONFIDENT = 0.5
"""Below this an answer to a pending clarification is taken as a try at the slot."""


def _edit(turn: TurnContext) -> GraphEdit:
    return GraphEdit(turn.conversation(), turn.services.clock.now().isoformat(), turn.turn_id)


def _emit(turn: TurnContext, edit: GraphEdit) -> None:
    if edit.ops:
        assert turn.state is not None
        turn.emit(GraphUpdated, state=turn.state.name, ops=edit.ops)
        edit.ops = []


def _slot(turn: TurnContext, tool_name: str, name: str) -> Slot:
    """The slot ``name`` of tool ``tool_name`` as its contract describes it."""
    try:
        contract = turn.services.tools.get(tool_name).contract
    except Exception:  # an unknown tool: the slot is known by its name only
        return Slot(name, True)
    assert contract is not None
    for slot in required_slots(contract.input_schema, contract.slots, every=True):
        if slot.name == name:
            return slot
    return Slot(name, True)


def _lang(parameters: dict[str, Any], text: str) -> str:
    lang = parameters.get("lang")
    return lang if isinstance(lang, str) and lang else detect_language(text)


# --- INTENT ----------------------------------------------------------------------------


async def classify(turn: TurnContext) -> Any:
    """INTENT's handler: answer the pending task if this message answers it, else ask
    the brain (see the module docs)."""
    if not turn.services.conversation.enabled:
        return await ask_brain(turn)
    conv = turn.conversation()
    now = turn.services.clock.now()
    edit = _edit(turn)
    edit.expire(now)
    edit.prune(now, turn.services.conversation)  # bounded: the pruning is in the diff
    _emit(turn, edit)
    task = conv.pending(now)
    if task is None:
        return _confirm_stale(turn, await ask_brain(turn))
    lang = _lang(task.parameters, turn.text)
    said = reply_kind(turn.text)
    if task.kind == "confirm" and said == "yes":  # the old node is still meant: go on
        return {"intent_type": task.intent_type, "parameters": dict(task.parameters),
                "confidence": 1.0, "needs_tools": True, "task": task.id}
    if said == "no":
        return {"intent_type": "cancel_task", "parameters": {"lang": lang, "kind": task.kind},
                "confidence": 1.0, "needs_tools": False, "task": task.id, "decision": "cancel"}
    if task.kind == "confirm":
        return _confirm_stale(turn, await ask_brain(turn))  # a new message: not confirmed
    if task.kind == "approval":
        if said == "yes":
            return {"intent_type": task.intent_type, "parameters": dict(task.parameters),
                    "confidence": 1.0, "needs_tools": False,  # no new plan: the stored one
                    "task": task.id, "decision": "approve"}
        return await ask_brain(turn)  # a new message: the approval stays pending
    slot = _slot(turn, task.tool, task.slot)
    typed = bool(slot.pattern or slot.enum)  # a value in the text is then evidence enough
    value = value_in_text(slot, turn.text) if typed else None
    if value is not None:
        return _resumed(task, value)
    raw = await ask_brain(turn)  # a free slot (a time, a text): the brain reads it first
    if _confidence(raw) >= _CONFIDENT:
        data = _as_dict(raw)
        if data is not None and data.get("intent_type") == task.intent_type \
                and not data.get("task"):  # the same request, said again: the answer to it
            return {**data, "parameters": {**task.parameters, **(data.get("parameters") or {})},
                    "task": task.id}
        return raw  # a different request (or the brain's own resumption): answered
    value = value_in_text(slot, turn.text) if not typed else None
    if value is not None:
        return _resumed(task, value)
    return {"intent_type": task.intent_type,  # a try at the slot that fails its format
            "parameters": {**task.parameters, task.slot: turn.text.strip()},
            "confidence": 1.0, "needs_tools": True, "task": task.id}


def _resumed(task: Task, value: str) -> dict[str, Any]:
    """The pending task with its slot filled by ``value`` (what was wrong before goes)."""
    kept = {k: v for k, v in task.parameters.items()
            if k != "time_problem" and not k.endswith("_unclear")}
    return {"intent_type": task.intent_type, "parameters": {**kept, task.slot: value},
            "confidence": 1.0, "needs_tools": True, "task": task.id}


def _as_dict(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, dict) else None


def _confirm_stale(turn: TurnContext, raw: Any) -> Any:
    """``raw`` unless it reuses a node whose confidence has decayed below the policy's
    ``confirm_below`` (seed 002 tip 5: a day-old reference is confirmed before it is used):
    then a ``confirm`` task waits with the intent, and the answer asks about the node."""
    data = raw
    if isinstance(raw, str | bytes):
        try:
            data = json.loads(raw)
        except ValueError:
            return raw
    if not isinstance(data, dict) or not data.get("needs_tools", True):
        return raw
    policy = turn.services.conversation
    conv = turn.conversation()
    now = turn.services.clock.now()
    for ref in data.get("entities") or ():
        node = conv.entities.get(ref.get("node_id") or "") if isinstance(ref, dict) else None
        if node is None or conv.confidence_at(node, now, policy.decay_per_hour) >= \
                policy.confirm_below:
            continue
        parameters = dict(data.get("parameters") or {})
        lang = _lang(parameters, turn.text)
        edit = _edit(turn)
        task_id = edit.new_task_id()
        question_text = (f"您指的还是之前提到的“{node.value}”吗?回复“是”继续,或告诉我新的。"
                         if lang == "zh" else
                         f'Do you still mean "{node.value}" from earlier? Say yes to go on, '
                         "or tell me which one.")
        edit.push_task(Task(task_id, "confirm", str(data.get("intent_type", "unknown")),
                            parameters, now.isoformat(),
                            (now + timedelta(seconds=policy.pending_ttl_s)).isoformat(),
                            slot=ref.get("slot", ""), question=question_text,
                            node_id=node.id))
        _emit(turn, edit)
        turn.awaiting = "awaiting_input"
        return {"intent_type": "confirm_entity", "confidence": 1.0, "needs_tools": False,
                "parameters": {"lang": lang, "question": question_text}, "task": task_id}
    return raw


def _confidence(raw: Any) -> float:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError:
            return 0.0
    value = raw.get("confidence") if isinstance(raw, dict) else getattr(raw, "confidence", 0)
    return float(value) if isinstance(value, int | float) else 0.0


_DECLARED: dict[int, tuple[Any, tuple[str, ...], dict[str, str]]] = {}


def _declared_types(turn: TurnContext) -> dict[str, str]:
    """Slot name → entity type, as the tool contracts' ``slots`` declare (per registry,
    computed again when its tools change)."""
    tools = turn.services.tools
    names = tuple(tools.names())
    cached = _DECLARED.get(id(tools))
    if cached is not None and cached[0] is tools and cached[1] == names:
        return cached[2]
    declared: dict[str, str] = {}
    for name in names:
        contract = tools.get(name).contract
        if contract is not None:
            declared.update({k: v.entity for k, v in contract.slots.items() if v.entity})
    if len(_DECLARED) > 64:
        _DECLARED.clear()
    _DECLARED[id(tools)] = (tools, names, declared)
    return declared


async def record_intent(turn: TurnContext, output: Intent) -> None:
    """INTENT's ``on_output``: the intent's entities and the intent node into the graph
    (an intent of an older contract, without ``entities``, gives its parameters)."""
    if not turn.services.conversation.enabled:
        return
    edit = _edit(turn)
    ids: dict[str, str] = {}
    decision, task = getattr(output, "decision", None), getattr(output, "task", None)
    for ref in getattr(output, "entities", ()):
        if ref.replaces is not None:
            ids[ref.slot] = edit.correct(ref.replaces, ref.type, ref.value, ref.canonical)
        elif ref.node_id is not None:
            edit.confirm(ref.node_id)
            ids[ref.slot] = ref.node_id
        else:
            ids[ref.slot] = edit.mention(ref.type, ref.value, ref.canonical)
    declared: dict[str, str] | None = None
    extra: dict[str, Any] = {}
    remembered = output.parameters.get(FROM_MEMORY)  # slot -> memory key (a preference)
    for slot, value in output.parameters.items():
        if slot in ids:
            continue
        if slot in NOT_ENTITIES or slot.endswith("_unclear") or not isinstance(value, str) \
                or not value:
            extra[slot] = value
            continue
        if declared is None:
            declared = _declared_types(turn)
        key = remembered.get(slot) if isinstance(remembered, dict) else None
        ids[slot] = edit.mention(entity_type_of(slot, declared), value, value,
                                 source=f"memory:{key}" if key else None)
    if decision == "cancel" and task is not None:
        edit.end_task(task, "cancelled")
    confirmed = next((t for t in turn.conversation().tasks if t.id == task
                      and t.kind == "confirm"), None)
    if confirmed is not None and output.intent_type != "confirm_entity":
        if confirmed.node_id in turn.conversation().entities:
            edit.confirm(confirmed.node_id)  # fresh again: decay restarts now
        edit.end_task(confirmed.id, "confirmed")
    if output.needs_tools or ids or decision == "approve":
        edit.intent(output.intent_type, ids, extra, turn.turn_id)
    _emit(turn, edit)


# --- PLANNING, CLARIFY ------------------------------------------------------------------


async def record_plan(turn: TurnContext, output: Plan) -> None:
    """PLANNING's ``on_output``: a clarification this plan no longer needs is over."""
    if not turn.services.conversation.enabled or output.missing_slots:
        return
    intent = turn.by_contract.get("intent")
    task_id = getattr(intent, "task", None)
    conv = turn.session.conversation
    if task_id and conv is not None and any(t.id == task_id and t.kind == "clarify"
                                            for t in conv.tasks):
        edit = _edit(turn)
        edit.end_task(task_id, "resumed")
        _emit(turn, edit)


async def clarify(turn: TurnContext) -> dict[str, Any]:
    """CLARIFY's handler: ask for exactly the first missing (or invalid) slot, with its
    expected format; the task waits in the session (the turn ends ``awaiting_input``)."""
    plan = turn.by_contract["plan"]
    intent = turn.by_contract.get("intent")
    assert isinstance(plan, Plan) and plan.missing_slots
    missing = plan.missing_slots[0]
    parameters = dict(getattr(intent, "parameters", {}) or {})
    lang = _lang(parameters, turn.text)
    slot = _slot(turn, missing.tool, missing.slot)
    policy = turn.services.conversation
    conv: Conversation = turn.conversation()
    now = turn.services.clock.now()
    task_id = getattr(intent, "task", None)
    previous = next((t for t in conv.tasks if t.id == task_id and t.kind == "clarify"), None)
    failures = previous.failures if previous is not None and previous.slot == slot.name else 0
    problem = SlotProblem(missing.slot, missing.reason, missing.value)
    if missing.reason == "invalid":
        failures += 1
    edit = _edit(turn)
    if previous is None:
        task_id = edit.new_task_id()
    assert task_id is not None
    abandoned = failures > policy.max_slot_failures
    if abandoned:  # bounded: after the clear question, one more miss ends the task
        edit.end_task(task_id, "abandoned")
        text = (f"“{missing.value}”仍然不是有效的格式,我先不继续这个请求了。需要时请直接带上"
                f"正确的值重新问我({expected_format(slot, 'zh') or slot.name})。"
                if lang == "zh" else
                f'"{missing.value}" still does not fit, so I have stopped this request. Ask '
                f"again with the {slot.name.replace('_', ' ')} when you have it "
                f"({expected_format(slot, 'en') or slot.name}).")
    else:
        text = question(slot, lang, problem if missing.reason == "invalid" else None,
                        failures=failures)
        unclear = parameters.pop(f"{missing.slot}_unclear", None)
        if isinstance(unclear, str) and unclear:  # a time said but not exact: say so
            text = (f"“{unclear}”不是一个确切的时间。{text}" if lang == "zh" else
                    f'I can\'t pin "{unclear}" down to an exact time. {text}')
        parameters.pop(missing.slot, None)  # an invalid value is not kept
        edit.push_task(Task(
            task_id, "clarify", getattr(intent, "intent_type", "unknown"), parameters,
            previous.created_at if previous is not None else now.isoformat(),
            (now + timedelta(seconds=policy.pending_ttl_s)).isoformat(),
            slot=slot.name, tool=missing.tool, pattern=slot.pattern, question=text,
            failures=failures))
        turn.awaiting = "awaiting_input"
    _emit(turn, edit)
    return {"text": text, "task_id": task_id, "slot": slot.name,
            "expected_format": expected_format(slot, lang), "abandoned": abandoned}


# --- APPROVAL, APPROVED -----------------------------------------------------------------


def needs_approval(turn: TurnContext) -> bool:
    """Condition: the plan calls a tool whose contract says ``approval: true``."""
    plan = turn.output
    tools = turn.services.tools
    for call in getattr(plan, "tool_calls", ()):
        try:
            contract = tools.get(call.tool_name).contract
        except Exception:
            continue
        if contract is not None and contract.approval:
            return True
    return False


def _describe(call: Any) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.tool_name}({args})"


async def approval(turn: TurnContext) -> dict[str, Any]:
    """APPROVAL's handler: store the plan exactly as planned, list what would run, and end
    the turn ``awaiting_approval``."""
    plan = turn.by_contract["plan"]
    assert isinstance(plan, Plan)
    intent = turn.by_contract.get("intent")
    parameters = dict(getattr(intent, "parameters", {}) or {})
    lang = _lang(parameters, turn.text)
    now = turn.services.clock.now()
    edit = _edit(turn)
    task_id = edit.new_task_id()
    calls = [c.model_dump() for c in plan.tool_calls]
    listed = "\n".join(f"{i}. {_describe(c)}" for i, c in enumerate(plan.tool_calls, 1))
    text = (f"以下操作需要您确认后才会执行:\n{listed}\n回复“确认”执行,回复“取消”放弃。"
            if lang == "zh" else
            f"This needs your approval before it runs:\n{listed}\n"
            "Reply yes to run it, or no to cancel.")
    edit.push_task(Task(task_id, "approval", getattr(intent, "intent_type", "unknown"),
                        parameters, now.isoformat(),
                        (now + timedelta(seconds=turn.services.conversation.pending_ttl_s))
                        .isoformat(), question=text, plan=calls))
    _emit(turn, edit)
    turn.awaiting = "awaiting_approval"
    return {"text": text, "task_id": task_id, "calls": calls}


def has_facts(turn: TurnContext) -> bool:
    """Condition: earlier rounds of this turn established facts (APPROVAL → RESPONSE: the
    answer gives them, and asks for the approval)."""
    return bool(getattr(turn.by_contract.get("result_report"), "facts", ()))


def approved(turn: TurnContext) -> bool:
    """Condition: the message approved a pending plan (INTENT → APPROVED)."""
    return getattr(turn.output, "decision", None) == "approve"


async def run_approved(turn: TurnContext) -> dict[str, Any]:
    """APPROVED's handler: the stored plan, unchanged, for EXECUTION (no plan when the
    approval expired meanwhile)."""
    intent = turn.by_contract.get("intent")
    conv = turn.conversation()
    task = next((t for t in conv.tasks if t.id == getattr(intent, "task", None)
                 and t.kind == "approval"), None)
    if task is None:
        return {"tool_calls": []}
    edit = _edit(turn)
    edit.end_task(task.id, "approved")
    _emit(turn, edit)
    return {"tool_calls": [dict(c) for c in task.plan]}
