"""The rules brain: the offline default, so the product runs with no model at all.

Intents from keyword/regex rules (English and Chinese), intent → tool-call plans from
argument templates, templated answers grounded in the turn's facts, and rule-based memory
extraction — all from a user-editable YAML rule book (default ``hermes_fsm/data/rules.yaml``),
validated and compiled once at load. ``decide`` is deterministic and cheap, and so is
``summarize`` (extractive rolling summaries, :mod:`hermes_fsm.brain.summary`).

>>> import asyncio
>>> from hermes_fsm.brain.protocol import BrainRequest
>>> text = "How many A1001 are left in the east warehouse?"
>>> out = asyncio.run(RulesBrain().decide(BrainRequest("INTENT", "intent", {}, text, "u1")))
>>> out["intent_type"], out["parameters"]
('inventory_query', {'sku': 'A1001', 'warehouse': 'east', 'lang': 'en'})
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import tzinfo
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from hermes_fsm.brain import followups
from hermes_fsm.brain.protocol import BrainRequest, Repair, SummaryRequest, ToolDescription
from hermes_fsm.brain.rulebook import (
    MemoryRule,
    PlannedCall,
    RuleBook,
    TimeKind,
    capture_group,
    detect_language,
)
from hermes_fsm.brain.schema_plan import schema_call
from hermes_fsm.brain.slot_times import exact_times
from hermes_fsm.brain.summary import extractive_summary
from hermes_fsm.brain.typed_arguments import typed_arguments
from hermes_fsm.conversation.graph import FROM_MEMORY
from hermes_fsm.conversation.slots import slot_problems
from hermes_fsm.conversation.times import TimeResolver
from hermes_fsm.errors import BrainError
from hermes_fsm.sources import Clock

__all__ = ["RuleBook", "RulesBrain", "detect_language"]

_T = TypeVar("_T")
_IDENTIFIERS = re.compile(r"[A-Za-z]+-?\d[\w-]*|\d+")  # ids and numbers: no language
_WORDS = re.compile(r"[^\W\d_]")


def _cached(fn: Callable[[str], _T]) -> Callable[[str], _T]:
    """``fn`` (a pure function of a message) with short messages cached: repeats are free."""
    cached = lru_cache(maxsize=4096)(fn)
    return lambda text: cached(text) if len(text) <= 1000 else fn(text)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


class RulesBrain:
    """A deterministic brain driven by a :class:`RuleBook` (default: the packaged rules).

    Knows the contracts ``intent``, ``plan``, ``response`` and ``memory_commit``; any other
    raises :class:`~hermes_fsm.errors.BrainError`.
    """

    name = "rules"
    context_window = None  # reads no prompt: offered every tool, with no token budget

    def __init__(self, rules: RuleBook | None = None, *, timezone: str | tzinfo | None = None,
                 clock: Clock | None = None) -> None:
        self.rules = rules if rules is not None else RuleBook.default()
        self.times = TimeResolver(timezone, clock)  # base time: the request's, else the clock's
        self._handlers: dict[str, Callable[[BrainRequest], dict[str, Any]]] = {
            "intent": self._intent, "plan": self._plan,
            "response": self._response, "memory_commit": self._memory_commit,
        }
        self._classify = _cached(self._classify_text)
        self._memories = _cached(self._find_memories)

    @classmethod
    def from_file(cls, path: str | Path, *, timezone: str | tzinfo | None = None,
                  clock: Clock | None = None) -> RulesBrain:
        """A brain with the rules of a YAML file (raises ConfigError when it is malformed)."""
        return cls(RuleBook.from_file(path), timezone=timezone, clock=clock)

    async def decide(self, request: BrainRequest) -> Any:
        """The raw output (a dict) for ``request``, dispatched on its contract name.

        Raises:
            BrainError: the contract is not one the rules brain knows.
        """
        handler = self._handlers.get(request.contract_name)
        if handler is None:
            raise BrainError(
                f"the rules brain does not know contract {request.contract_name!r} (state "
                f"{request.state}); give state {request.state} a handler, or use another "
                f"brain (the rules brain knows: {', '.join(self._handlers)})")
        return handler(request)

    async def summarize(self, request: SummaryRequest) -> str:
        """The rolling summary, extractively (:func:`hermes_fsm.brain.summary.extractive_summary`):
        deterministic; keeps stated times and dates, tasks and constraints, within
        ``request.max_tokens``."""
        return extractive_summary(request.previous, request.messages, request.max_tokens,
                                  request.counter)

    def _intent(self, request: BrainRequest) -> dict[str, Any]:
        classified = self._classify(request.text)
        resolved = followups.resolve(self.rules, request.text, request.conversation, classified)
        unresolved = resolved is None or resolved["intent_type"] == "correction_unknown"
        if unresolved and classified[0] == self.rules.fallback.name:  # "no idea", "at 6pm"
            resumed = self._resume(request)
            if resumed is not None:  # the answer to a pending clarification
                return resumed
        if resolved is not None:  # a follow-up, a correction, a reference (brain/followups.py)
            self._exact_times(resolved["intent_type"], resolved["parameters"], request)
            self._exact_refs(resolved)
            return self._from_memory(resolved, request)
        name, params, confidence, needs_tools = classified
        params = dict(params)
        if request.history and not _WORDS.search(_IDENTIFIERS.sub("", request.text)):
            # only an id or a number ("ORD-12345678"): the conversation's language
            said = [m for m in request.history if m.get("role") == "user"]
            if said:
                params["lang"] = detect_language(said[-1].get("content", ""))
        self._exact_times(name, params, request)
        return self._from_memory({"intent_type": name, "parameters": params,
                                  "confidence": confidence, "needs_tools": needs_tools},
                                 request)

    @property
    def memory_keys(self) -> tuple[str, ...]:
        """The memory keys this brain reads whatever the message: those of the memory
        rules that fill a slot (``fills``); the engine recalls their items by key."""
        return tuple(dict.fromkeys(r.key for r in self.rules.memory if r.fills))

    def _from_memory(self, out: dict[str, Any], request: BrainRequest) -> dict[str, Any]:
        """``out`` with the required slots it still lacks filled from recalled memory: a
        memory rule's ``fills`` slot, when its key was recalled ("I prefer the Hangzhou
        Xihu store", said in an earlier session). The entity says where it came from
        (``source: memory:<key>``), and so does the answer."""
        if not out.get("needs_tools") or not request.memory:
            return out
        fills = {r.fills: r for r in self.rules.memory if r.fills}
        if not fills:
            return out
        params = out["parameters"]
        needed = {slot for p in self.rules.plans.get(out["intent_type"], ())  # optional too:
                  if all(r in params for r in p.requires)  # "我只看华东仓" narrows a total
                  for slot, _ in p.refs.values()}
        recalled = _recalled(request.memory)
        used: dict[str, str] = {}
        for slot, rule in fills.items():
            value = recalled.get(rule.key)
            if slot in needed and slot not in params and value:
                params[slot] = value
                used[slot] = rule.key
        if used:  # slot -> memory key: the engine records the node's source as memory:<key>
            params[FROM_MEMORY] = used
        return out

    def _resume(self, request: BrainRequest) -> dict[str, Any] | None:
        """A message that is no request of its own, while a clarification waits: the
        answer to it — the pending task with the asked slot filled (a time made exact now,
        so the graph holds the exact value; one that stays unclear is kept as said, and the
        plan asks again, counted). ``None`` when no clarification waits."""
        conv = request.conversation
        if conv is None:
            return None
        task = conv.pending(request.now or self.times.clock.now())
        if task is None or task.kind != "clarify" or not task.slot:
            return None
        params = {k: v for k, v in task.parameters.items()
                  if k != "time_problem" and not k.endswith("_unclear")}
        params[task.slot] = request.text.strip()
        answered = self._answered_times(task.intent_type, params, request)
        if answered is not None and not answered[1]:
            params = answered[0]
        return {"intent_type": task.intent_type, "parameters": params, "confidence": 0.95,
                "needs_tools": True, "task": task.id}

    def _exact_refs(self, resolved: dict[str, Any]) -> None:
        """The entity references of ``resolved``'s time slots take the exact values its
        parameters now hold (one left unclear is dropped: there is no value to point at)."""
        kinds = self._time_slots.get(resolved["intent_type"]) or {}
        params, refs = resolved["parameters"], resolved.get("entities")
        if not kinds or not refs:
            return
        kept = []
        for ref in refs:
            if ref["slot"] in kinds and "node_id" not in ref:
                if ref["slot"] not in params:
                    continue
                ref["canonical"] = str(params[ref["slot"]])
            kept.append(ref)
        resolved["entities"] = kept

    def _answered_times(self, name: str, params: Mapping[str, Any], request: BrainRequest
                        ) -> tuple[dict[str, Any], dict[str, str]] | None:
        """A time slot that holds the user's words (a task resumed with the answer to "when
        exactly?", not classified again): the parameters with it made exact, and the slots
        still unclear (slot → what was said, asked again as invalid: bounded); ``None`` when
        every time slot is exact already."""
        kinds = self._time_slots.get(name) or {}
        raw = {s: k for s, k in kinds.items() if isinstance(params.get(s), str)
               and f"{s}_text" not in params and not _is_exact(params[s], k)}
        if not raw:
            return None
        made = {k: v for k, v in params.items() if k != "time_problem"}
        exact_times(self.times, raw, made, request.now)
        unclear = {s: str(made.pop(f"{s}_unclear")) for s in raw if f"{s}_unclear" in made}
        made.pop("time_problem", None)
        return made, unclear

    def _exact_times(self, name: str, params: dict[str, Any], request: BrainRequest) -> None:
        """The intent's time slots made exact, in place (see :mod:`.slot_times`)."""
        kinds = self._time_slots.get(name)
        if kinds and any(slot in params for slot in kinds):
            exact_times(self.times, kinds, params, request.now)

    @cached_property
    def _time_slots(self) -> dict[str, dict[str, TimeKind]]:
        """Intent name → its time slots (merged over the rules of that name)."""
        found: dict[str, dict[str, TimeKind]] = {}
        for rule in self.rules.intents:
            if rule.times:
                found.setdefault(rule.name, {}).update(rule.times)
        return found

    def _classify_text(self, text: str) -> tuple[str, dict[str, Any], float, bool]:
        low, lang = text.lower(), detect_language(text)
        for rule in self.rules.intents:
            if rule.matches(low):
                params = {**rule.parameters, **rule.slots(text, low, self.rules.normalizers),
                          "lang": lang}
                return rule.name, params, rule.confidence, rule.needs_tools
        return self.rules.fallback.name, {"lang": lang}, self.rules.fallback.confidence, False

    def _plan(self, request: BrainRequest) -> dict[str, Any]:
        intent, outputs = request.outputs.get("intent"), request.outputs
        tools = {tool.name: tool for tool in request.tools}
        if "result_report" in outputs:  # a later round: retry what may pass now, and make
            done = zip(_get(outputs.get("plan"), "tool_calls") or (),  # the calls that waited
                       _get(outputs.get("execution_results"), "results") or (), strict=False)
            made, still = self._waiting_calls(intent, outputs, tools)
            later: dict[str, Any] = {"tool_calls": [
                {**call.model_dump(), "reasoning_trace": f"Retry: {result.message}"}
                for call, result in done
                if not result.success and result.retryable and call.tool_name in tools
            ] + made}
            if made and still and _has_field(request.schema, "continues"):
                later["continues"] = True  # a chain: these calls' outputs feed the next
            return later
        if intent is None:
            return {"tool_calls": []}
        params = _get(intent, "parameters") or {}
        unclear: dict[str, str] = {}
        answered = self._answered_times(_get(intent, "intent_type"), params, request)
        if answered is not None:  # a time given as the answer to a clarification
            params, unclear = answered
        calls: list[tuple[PlannedCall, dict[str, Any]]] = []
        missing: list[dict[str, Any]] = []
        waiting = False  # a call takes an output of this round's ("{@tool.field}"): later
        for planned in self.rules.plans.get(_get(intent, "intent_type"), ()):
            tool = tools.get(planned.tool)
            if tool is None:
                continue
            args = planned.arguments_for(params)
            if args is None and planned.fact_refs and all(s in params for s in planned.requires):
                waiting = True
                continue
            if args is None:  # a required slot is missing: ask for it (CLARIFY), never guess
                missing += [{"tool": planned.tool, "slot": arg, "reason": "invalid",
                             "value": unclear[slot]} if slot in unclear else
                            {"tool": planned.tool, "slot": arg, "reason": "missing"}
                            for arg, (slot, optional) in planned.refs.items()
                            if not optional and slot not in params]
                continue
            args = typed_arguments(args, tool.input_schema)  # slots are text; a tool may want 3
            required = tool.input_schema.get("required", ())
            problems = [p for p in slot_problems(tool.input_schema, args) if p.slot in required]
            if problems:  # a required value that fails the tool contract's format: ask
                missing += [{"tool": planned.tool, "slot": p.slot, "reason": p.reason,
                             "value": p.value} for p in problems]
                continue
            calls.append((planned, args))
        if not self.rules.plans.get(_get(intent, "intent_type")):  # an intent's `tool:`
            schema_calls, schema_missing = self._schema_plan(_get(intent, "intent_type"),
                                                             params, tools)
            calls += schema_calls
            missing += schema_missing
        if request.repair is not None:
            calls = _repair(calls, request.repair, tools)
        if not _has_field(request.schema, "missing_slots"):  # plan@1: no slots, no citations
            return {"tool_calls": [
                {"tool_name": p.tool, "arguments": a,
                 "reasoning_trace": p.reasoning.format_map(params)} for p, a in calls]}
        cited = _cited_nodes(request)
        plan: dict[str, Any] = {"tool_calls": [
            {"tool_name": p.tool, "arguments": a,  # cited in the trace (the contract reads it)
             "reasoning_trace": p.reasoning.format_map(params) + _citing(cited)}
            for p, a in calls], "missing_slots": missing if not calls else []}
        if waiting and calls and _has_field(request.schema, "continues"):
            plan["continues"] = True  # RESULT plans again: _waiting_calls makes the rest
        return plan

    @cached_property
    def _intent_tools(self) -> dict[str, str]:
        """Intent name → the tool its rule names (``tool:``), planned from its schema."""
        return {rule.name: rule.tool for rule in self.rules.intents if rule.tool is not None}

    def _schema_plan(self, name: str, params: Mapping[str, Any],
                     tools: Mapping[str, ToolDescription]
                     ) -> tuple[list[tuple[PlannedCall, dict[str, Any]]], list[dict[str, Any]]]:
        """The call of the intent's ``tool:`` with arguments from its input schema
        (:mod:`.schema_plan`), or the slots it misses; nothing when it is not offered (the
        answer says so)."""
        tool_name = self._intent_tools.get(name)
        tool = tools.get(tool_name) if tool_name is not None else None
        if tool is None or tool_name is None:
            return [], []
        args, missing = schema_call(tool, params)
        if args is None:
            return [], [{"tool": tool_name, "slot": slot, "reason": "missing"}
                        for slot in missing]
        planned = PlannedCall(tool=tool_name, arguments=args,
                              reasoning=f"{name}: {tool_name} with the slots its schema names")
        return [(planned, args)], []

    def _waiting_calls(self, intent: Any, outputs: Mapping[str, Any],
                       tools: Mapping[str, ToolDescription]) -> tuple[list[dict[str, Any]], int]:
        """The intent's calls that take an earlier call's output (``"{@tool.field}"``), now
        that the facts are there, unless made already this turn; and how many still wait
        for a fact no round has yet (a chain of N calls takes N rounds)."""
        facts: dict[str, Any] = {}
        for fact in _get(outputs.get("result_report"), "facts") or ():
            tool = _get(fact.content, "tool")
            if tool is not None:
                facts.setdefault(tool, _get(fact.content, "output"))
        params = _get(intent, "parameters") or {}
        calls, waiting = [], []
        for planned in self.rules.plans.get(_get(intent, "intent_type"), ()):
            if not planned.fact_refs or planned.tool in facts or planned.tool not in tools:
                continue
            args = planned.arguments_for(params, facts)
            if args is not None:
                calls.append({"tool_name": planned.tool, "arguments": args,
                              "reasoning_trace": planned.reasoning.format_map(params)})
            elif all(s in params for s in planned.requires):
                waiting.append(planned)
        ready = set(facts) | {c["tool_name"] for c in calls}
        still = sum(1 for planned in waiting  # its inputs come from this round's calls
                    if all(tool in ready for tool, _ in planned.fact_refs.values()))
        return calls, still

    def _response(self, request: BrainRequest) -> dict[str, Any]:
        outputs, rules, answers = request.outputs, self.rules, self.rules.answers
        intent, report = outputs.get("intent"), outputs.get("result_report")
        params = dict(_get(intent, "parameters") or {})
        lang = params.get("lang") or detect_language(request.text)
        parts, evidence = [], []
        for fact in _get(report, "facts") or ():
            tool, output = _get(fact.content, "tool"), _get(fact.content, "output")
            if tool is None:  # not a tool's result (e.g. recalled memory)
                continue
            said = rules.say(answers.tools.get(tool, ()), lang, output) \
                if isinstance(output, dict) else None
            parts.append(said or rules.say(answers.generic, lang, {
                "tool": tool, "output": output if isinstance(output, str)  # text as it is
                else json.dumps(output, ensure_ascii=False, default=str)}))
            evidence.append(fact.id)
        results = _get(outputs.get("execution_results"), "results") or ()
        failures = [{"tool": r.tool_name, "error_code": r.error_code,
                     "message": _failure_text(r, lang).rstrip(". 。")}
                    for r in results if not r.success]
        if not failures:  # no failed call at hand: the report's violations say what broke
            violations = _get(report, "violations") or ()
            failures = [{"message": str(v).rstrip(". 。")} for v in violations]
        parts += [rules.say(answers.failure, lang, f) for f in failures]
        if not parts:
            parts = [followups.conversation_reply(_get(intent, "intent_type", ""), params, lang)
                     or self._answer_without_facts(request, intent, params, lang)]
        for slot in (params.get(FROM_MEMORY) or {}) if evidence else ():
            parts.append(rules.say(answers.from_memory, lang, {
                "slot": slot, "value": params.get(slot)}))
        parts.append(followups.pending_reminder(request.conversation, _get(intent, "task"), lang,
                                                request.now))
        if request.repair is not None and any(e.loc[:1] == ("evidence",)
                                              for e in request.repair.errors):
            evidence = []  # the citations were refused: answer without them
        text = ("" if lang == "zh" else " ").join(p for p in parts if p)
        fallback = answers.reply_for(rules.fallback.name)
        return {"text": text or rules.say(fallback, lang, {}) or "?", "evidence": evidence}

    def _answer_without_facts(self, request: BrainRequest, intent: Any,
                              params: dict[str, Any], lang: str) -> str | None:
        answers, say = self.rules.answers, self.rules.say
        name = _get(intent, "intent_type", self.rules.fallback.name)
        if not _get(intent, "needs_tools", False):
            acks = [say([m.ack], lang, {"value": v}) for m, v in self._memories(request.text)]
            if memory := [a for a in acks if a]:
                params["memory"] = getattr(self.rules.separator, lang).join(memory)
            return say(answers.reply_for(name) if name == self.rules.fallback.name
                       else answers.replies.get(name, ()), lang, params)
        tools = {tool.name for tool in request.tools}
        wanted = self._intent_tools.get(name)
        if wanted is not None and wanted not in tools and not self.rules.plans.get(name):
            return say(answers.not_offered, lang, {**params, "tool": wanted})
        planned = self.rules.plans.get(name, [])
        if missing := [s for p in planned if all(r in params for r in p.requires)
                       for s in p.required if s not in params]:
            asked = say(answers.ask.get(name, ()), lang, {**params, "missing": ", ".join(missing)})
            if asked:
                return asked
        if planned and not any(p.tool in tools for p in planned):
            # a file's own `unavailable` says it; else the built-in names the tool
            said = answers.unavailable if "unavailable" in answers.model_fields_set \
                else answers.not_offered
            return say(said, lang, {**params, "tool": planned[0].tool})
        outputs = request.outputs
        if "result_report" in outputs or _get(outputs.get("plan"), "tool_calls"):
            return say(answers.no_facts, lang, params)
        return say(answers.unavailable, lang, params)  # e.g. planning failed

    def _find_memories(self, text: str) -> tuple[tuple[MemoryRule, str], ...]:
        """(rule, value) per memory rule that matches; a rule never re-uses matched text."""
        taken: list[tuple[int, int]] = []
        found, low = [], text.lower()
        for rule in self.rules.memory:
            for pattern in rule.patterns:
                match = pattern.search(low)
                if match is None or any(match.start() < e and s < match.end() for s, e in taken):
                    continue
                if raw := rule.value or capture_group(match, "value", text, low):
                    taken.append(match.span())
                    value = rule.values.get(raw.lower(), raw)
                    if rule.normalize is not None:  # a name of the table: its key
                        value = self.rules.normalizers[rule.normalize](value)
                    found.append((rule, value))
                    break
        return tuple(found)

    def _memory_commit(self, request: BrainRequest) -> dict[str, Any]:
        updates: dict[str, dict[str, Any]] = {}
        evidence = ("evidence_source" if _has_field(request.schema, "evidence_source")
                    or not request.schema else "evidence")  # memory_commit@2, or @1
        for rule, value in self._memories(request.text):
            key = rule.key.format(value=re.sub(r"\W+", "_", value.lower()).strip("_"))
            updates.setdefault(key, {
                "key": key, "update_type": "create", "value": value,
                "memory_type": rule.memory_type, "confidence": rule.confidence,
                evidence: "user_message"})
        if evidence == "evidence_source":  # memory_commit@2: tool results worth keeping
            for update in self._tool_memories(request):
                updates.setdefault(update["key"], update)
        return {"memory_updates": list(updates.values())}

    def _tool_memories(self, request: BrainRequest) -> list[dict[str, Any]]:
        """Memory updates from this turn's tool results that a ``tool_memory`` rule keeps
        (a store's stock of a product …), with ``tool:`` evidence and the graph node they
        are about."""
        rules = self.rules.tool_memory
        report = request.outputs.get("result_report")
        if not rules or report is None:
            return []
        conv = request.conversation
        found = []
        for fact in _get(report, "facts") or ():
            tool, output = _get(fact.content, "tool"), _get(fact.content, "output")
            if not isinstance(output, dict):
                continue
            for rule in rules:
                if rule.tool != tool:
                    continue
                try:
                    key, value = rule.key.format_map(output), rule.value.format_map(output)
                    cited = [str(output[f]) for f in rule.evidence]
                except (KeyError, IndexError, AttributeError):
                    continue  # this output lacks a field the rule needs
                if any(not c or ":" in c or c.split() != [c] for c in cited):
                    continue  # not citable in the tool:<tool>:<field> form
                update: dict[str, Any] = {
                    "key": key, "update_type": "modify", "value": value,
                    "memory_type": rule.memory_type, "confidence": rule.confidence,
                    "evidence_source": ":".join(["tool", tool, *cited])}
                target = str(output.get(rule.target, "")) if rule.target else ""
                node = next((n for n in conv.active() if n.canonical == target), None) \
                    if conv is not None and target else None
                if node is not None:
                    update["target_node_id"] = node.id
                found.append(update)
        return found


_FIELDS_IN: dict[int, tuple[Any, str]] = {}

_RECALLED = re.compile(r"^- \[[^\]]*\] (?P<key>\S+): (?P<value>.*?) \(confidence [\d.]+\)$",
                       re.MULTILINE)


def _recalled(block: str) -> dict[str, str]:
    """Key → value of a recalled-memory block (``memory.format_recall``'s lines)."""
    return {m["key"]: m["value"] for m in _RECALLED.finditer(block)}


_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:\d{2}))?$")


def _is_exact(value: str, kind: str) -> bool:
    """Whether a time slot's value is already exact (an ISO date, or date-time with offset)."""
    return kind != "range" and _ISO.match(value) is not None


def _has_field(schema: Mapping[str, Any], name: str) -> bool:
    """Whether the contract's JSON Schema has a field ``name`` (anywhere in it: nested
    models too); an empty schema (a caller without one) counts as today's contracts."""
    if not schema:
        return True
    cached = _FIELDS_IN.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_FIELDS_IN) > 256:
            _FIELDS_IN.clear()
        cached = _FIELDS_IN[id(schema)] = (schema, json.dumps(schema, default=str))
    return f'"{name}"' in cached[1]


def _cited_nodes(request: BrainRequest) -> list[str]:
    """The entity nodes this turn's intent refers to (the reasoning trace cites them)."""
    conv = request.conversation
    last = conv.last_intent() if conv is not None else None
    if last is None:
        return []
    return [n for n in last.params.values() if n in conv.entities  # type: ignore[union-attr]
            and conv.entities[n].active]  # type: ignore[union-attr]


def _citing(cited: list[str]) -> str:
    return f" (graph: {', '.join(cited)})" if cited else ""


def _repair(calls: list[tuple[PlannedCall, dict[str, Any]]], repair: Repair,
            tools: Mapping[str, ToolDescription]) -> list[tuple[PlannedCall, dict[str, Any]]]:
    """The plan again without what ``repair`` refused: a refused call whose only faults (by
    its tool's input schema) are optional arguments goes without them, any other refused
    call goes; a refusal that names no call (or a timeout) drops them all, so the same
    plan is never sent twice."""
    refused = _refused_calls(repair)
    if not refused:
        return []
    repaired = []
    for index, (planned, args) in enumerate(calls):
        if index not in refused:
            repaired.append((planned, args))
            continue
        tool = tools.get(planned.tool)
        faulty = _faulty_arguments(args, tool.input_schema) if tool is not None else set()
        if faulty and all(planned.refs.get(a, ("", False))[1] for a in faulty):
            repaired.append((planned, {a: v for a, v in args.items() if a not in faulty}))
    return repaired


def _refused_calls(repair: Repair) -> set[int]:
    """The indices of the planned calls a refusal names: by an error's location
    (``tool_calls.N…``) or in the Plan contract's ``calls`` context."""
    refused: set[int] = set()
    for error in repair.errors:
        loc = error.loc
        if len(loc) >= 2 and loc[0] == "tool_calls" and isinstance(loc[1], int):
            refused.add(loc[1])
        for call in error.ctx.get("calls", ()):
            if isinstance(call, Mapping) and isinstance(call.get("index"), int):
                refused.add(call["index"])
    return refused


def _faulty_arguments(args: Mapping[str, Any], schema: Mapping[str, Any]) -> set[str]:
    """The arguments that break the tool's input schema (empty when none can be named)."""
    try:
        validator = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator)(schema)
        errors = list(validator.iter_errors(dict(args)))
    except Exception:  # a schema this check cannot use: no argument is named
        return set()
    faulty: set[str] = set()
    for error in errors:
        if error.absolute_path:
            faulty.add(str(error.absolute_path[0]))
        elif error.validator == "additionalProperties":
            faulty.update(a for a in args if a not in schema.get("properties", {}))
        else:  # a fault of the arguments as a whole (a required one missing …)
            return set()
    return faulty


def _failure_text(result: Any, lang: str) -> str:
    """A failure's message in ``lang``: a failed precondition's ``details`` carry it in both
    languages, with what to confirm (``contracts.conditions``); else the message."""
    details = getattr(result, "details", None) or {}
    suffix = "_zh" if lang == "zh" else ""
    said = details.get(f"message{suffix}") or ""
    if not said:
        return str(result.message)
    ask = details.get(f"confirm{suffix}") or ""
    return (f"{said},{ask}" if lang == "zh" else f"{said}; {ask}") if ask else str(said)
