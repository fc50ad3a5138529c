"""Follow-ups, corrections and references for the rules brain, on the conversation graph.

The rules brain classifies each message on its own; this module reads the session's
conversation graph (:class:`~hermes_fsm.conversation.graph.Conversation`) to make a turn
part of the conversation:

- "那华南仓呢?", "and the Pudong one?", "Pro 呢": the last task again with the slot the
  fragment names replaced (the fragment is read with the rule book's extractors of the
  last task's intent);
- "不对,我说的是深圳南山区", "等等,是 iPhone 15 Pro": the same, and the old node is named in
  ``replaces`` (the engine deprecates it and creates the next version); a correction whose
  fragment names nothing the rule book knows says so (``correction_unknown``);
- a missing slot — with "它", "那家店", "there", "it", or left out ("现在多少钱" after the
  stock of an iPhone) — takes the most recent active node of the type the slot needs
  (``node_id``); with no such node, the turn asks for it (CLARIFY).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hermes_fsm.brain.rulebook import RuleBook, detect_language
from hermes_fsm.conversation.followups import (
    PLACE_TYPES,
    has_place_pronoun,
    parse_followup,
)
from hermes_fsm.conversation.graph import Conversation, IntentNode, entity_type_of

__all__ = ["again", "conversation_reply", "pending_reminder", "resolve"]

Classified = tuple[str, dict[str, Any], float, bool]


def resolve(rules: RuleBook, text: str, conv: Conversation | None,
            classified: Classified) -> dict[str, Any] | None:
    """The intent output of a follow-up, a correction or a reference to an earlier entity;
    ``None`` when ``text`` is none of these (the classification stands).

    A follow-up or correction continues the most recent task whose slots its fragment
    names (:meth:`~hermes_fsm.conversation.graph.Conversation.recent_intents`: "那华北仓呢"
    after an approved e-mail goes back to the stock question before it)."""
    if conv is None:
        return None
    name, params, _, needs_tools = classified
    last = conv.last_intent()
    followup = parse_followup(text)
    fragment_only = False  # "那浦东呢": a request of its own only with the graph's help
    if last is not None and followup is not None and followup.kind == "followup" \
            and name != rules.fallback.name and needs_tools and _incomplete(rules, name, params):
        filled = _fill_references(rules, text, conv, last, name, params)
        if filled is not None and not _incomplete(rules, name, filled["parameters"]):
            return filled
        fragment_only = True
    if last is not None and followup is not None and (
            followup.kind == "correction" or name == rules.fallback.name or fragment_only):
        for candidate in conv.recent_intents():
            reused = _reuse(rules, text, conv, candidate, followup.kind, followup.fragment)
            if reused is not None:
                return reused
        if followup.kind == "correction":
            return {"intent_type": "correction_unknown",
                    "parameters": {"lang": detect_language(text),
                                   "fragment": followup.fragment},
                    "confidence": 0.9, "needs_tools": False}
        return None
    if needs_tools and name != rules.fallback.name:
        return _fill_references(rules, text, conv, last, name, params)
    return None


def _slots_in(rules: RuleBook, fragment: str, intent: str) -> dict[str, Any]:
    """The slots the rule book finds in ``fragment``: a value an ``aliases`` table of
    ``intent``'s slots names ("north", "华南仓"), then the extractors of ``intent``, then
    any rule's."""
    low = fragment.lower().strip()
    ordered = sorted(rules.intents, key=lambda r: r.name != intent)
    for rule in ordered[:1] if ordered and ordered[0].name == intent else ():
        for slot, table_name in rule.normalize.items():
            table = rules.aliases.get(table_name, {})
            words = low.removesuffix(" one").split()
            for key, names in table.items():
                if low in (key, *map(str.lower, names)) or (words and words[0] in (
                        key, *map(str.lower, names))):
                    return {slot: key}
    for rule in ordered:
        found = rule.slots(fragment, low, rules.normalizers)
        if found:
            return found
    return {}


def _reuse(rules: RuleBook, text: str, conv: Conversation, last: IntentNode, kind: str,
           fragment: str) -> dict[str, Any] | None:
    """Task ``last`` again with the slots ``fragment`` names replaced, or ``None`` when it
    names none of ``last``'s slots."""
    found = {k: v for k, v in _slots_in(rules, fragment, last.type).items()
             if k in last.params or k in rules_slots(rules, last.type)}
    if not found:
        product = next((s for s, n in last.params.items()
                        if conv.entities.get(n) is not None
                        and conv.entities[n].type == "Product"), None)
        if product is not None and len(fragment) <= 12:  # "Pro 呢": a variant of the product
            node = conv.entities[last.params[product]]
            for base in _names_of(rules, last.type, product, node.value, node.canonical):
                found = {k: v for k, v in _slots_in(rules, f"{base} {fragment}",
                                                    last.type).items()
                         if k == product and v != node.canonical}
                if found:
                    break
    if not found:
        return None
    return again(conv, last, found, kind, detect_language(text))


def again(conv: Conversation, last: IntentNode, found: dict[str, Any], kind: str,
          lang: str, confidence: float = 0.85) -> dict[str, Any]:
    """The intent output that runs task ``last`` again with the slots of ``found``
    replaced (a ``correction`` names the old nodes in ``replaces``); the other slots keep
    their nodes. A replaced slot's derived slots (``then`` → ``then_text``, ``then_date`` …:
    what a time slot is made exact into) are not kept: they come again from the new value."""
    def derived(slot: str) -> bool:
        return any(slot.startswith(f"{s}_") for s in found)

    entities = []
    for slot, value in found.items():
        old_id = last.params.get(slot)
        old = conv.entities.get(old_id) if old_id else None
        ref: dict[str, Any] = {"slot": slot, "type": old.type if old else entity_type_of(slot),
                               "value": str(value), "canonical": str(value)}
        if kind == "correction" and old is not None and old.active:
            ref["replaces"] = old_id
        entities.append(ref)
    for slot, node_id in last.params.items():
        kept = conv.entities.get(node_id)
        if slot not in found and not derived(slot) and kept is not None and kept.active:
            entities.append({"slot": slot, "type": kept.type, "value": kept.value,
                             "canonical": kept.canonical, "node_id": node_id})
    parameters = {k: v for k, v in conv.values_of(last).items() if not derived(k)}
    parameters.update(found, lang=lang)
    return {"intent_type": last.type, "parameters": parameters, "confidence": confidence,
            "needs_tools": True, "entities": entities}


def _names_of(rules: RuleBook, intent: str, slot: str, value: str,
              canonical: str) -> list[str]:
    """How the user may have written a slot's value: as stored, and the names its
    ``aliases`` table gives the canonical value ("IP15" → "iphone 15")."""
    names = [value]
    for rule in rules.intents:
        table = rules.aliases.get(rule.normalize.get(slot, "")) if rule.name == intent else None
        for key, aliases in (table or {}).items():
            if key.lower() == canonical.lower():
                names += [a for a in aliases if a not in names]
    return names


def rules_slots(rules: RuleBook, intent: str) -> set[str]:
    """The slots the rule book's plans for ``intent`` take."""
    return {slot for p in rules.plans.get(intent, ()) for slot, _ in p.refs.values()}


def _fill_references(rules: RuleBook, text: str, conv: Conversation, last: IntentNode | None,
                     name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    lang = detect_language(text)
    plans = [p for p in rules.plans.get(name, ()) if all(
        r in params for r in p.requires)]  # a call that needs what was not said: not filled
    times = _time_slots(rules, name)
    missing = [s for p in plans for s in p.required if s not in params
               and not any(s.startswith(f"{t}_") for t in times)]  # the time's own slots
    if has_place_pronoun(text):  # "there": the place just named
        place = _latest_place(conv)
        takes = {entity_type_of(s) for s in rules_slots(rules, name)} & PLACE_TYPES
        if place is not None and place.type not in takes:
            # a place this question's slots cannot take ("how many are there?" after a
            # store): the task that named it, asked again (with what this message says)
            earlier = next((i for i in conv.recent_intents() if place.id in i.params.values()),
                           None)
            if earlier is not None:
                found = {k: v for k, v in params.items() if k in earlier.params
                         and k != "lang" and conv.entities[earlier.params[k]].canonical != v}
                return again(conv, earlier, found, "followup", lang)
        missing += [s for s in rules_slots(rules, name) if s not in params and s not in missing
                    and entity_type_of(s) in PLACE_TYPES]
    if not missing:
        return None  # an ellipsis ("现在多少钱" after the stock of a product) fills it too
    entities = []
    filled = dict(params)
    for slot in dict.fromkeys(missing):
        old = conv.entities.get(last.params.get(slot, "")) if last is not None else None
        node = conv.latest(old.type if old is not None else entity_type_of(slot))
        if node is None:
            continue
        filled[slot] = node.canonical
        entities.append({"slot": slot, "type": node.type, "value": node.value,
                         "canonical": node.canonical, "node_id": node.id})
    if not entities:
        return None
    rule = next(r for r in rules.intents if r.name == name)
    return {"intent_type": name, "parameters": filled, "confidence": rule.confidence,
            "needs_tools": True, "entities": entities}


def _incomplete(rules: RuleBook, intent: str, params: dict[str, Any]) -> bool:
    """Whether a call of ``intent``'s plan lacks a required slot (its time's own slots
    aside): the message cannot be a request on its own."""
    times = _time_slots(rules, intent)
    return any(s not in params and not any(s.startswith(f"{t}_") for t in times)
               for p in rules.plans.get(intent, ()) if all(r in params for r in p.requires)
               for s in p.required)


_TIMES: dict[int, tuple[RuleBook, dict[str, frozenset[str]]]] = {}


def _time_slots(rules: RuleBook, intent: str) -> frozenset[str]:
    """The time slots of ``intent``'s rules (made exact by the brain, with derived slots);
    computed once per rule book."""
    cached = _TIMES.get(id(rules))
    if cached is None or cached[0] is not rules:
        table: dict[str, set[str]] = {}
        for rule in rules.intents:
            table.setdefault(rule.name, set()).update(rule.times)
        if len(_TIMES) > 64:
            _TIMES.clear()
        cached = _TIMES[id(rules)] = (rules, {k: frozenset(v) for k, v in table.items()})
    return cached[1].get(intent, frozenset())


def _latest_place(conv: Conversation) -> Any:
    """The most recently mentioned active place node (a warehouse, store or location)."""
    places = [n for n in conv.active() if n.type in PLACE_TYPES]
    return places[-1] if places else None


_REPLIES = {
    "cancel_task": {"zh": "好的,已取消,没有执行任何操作。",
                    "en": "OK, cancelled: nothing was run."},
    "correction_unknown": {
        "zh": "抱歉,我不知道“{fragment}”指的是什么,没有可以按它更正的内容。"
              "请换个说法,或说出完整的请求。",
        "en": 'Sorry, I do not know what "{fragment}" refers to, so there is nothing I can '
              "correct with it. Please rephrase, or ask the whole question again."},
}


def conversation_reply(intent_type: str, params: dict[str, Any], lang: str) -> str | None:
    """The answer to a conversation-level intent (a cancellation, an unknown correction)."""
    asked = params.get("question")
    if intent_type == "confirm_entity" and isinstance(asked, str):
        return asked
    templates = _REPLIES.get(intent_type)
    if templates is None:
        return None
    return templates["zh" if lang == "zh" else "en"].format_map(
        {"fragment": params.get("fragment", "")})


def pending_reminder(conv: Conversation | None, answered_task: str | None,
                     lang: str, now: datetime | None = None) -> str | None:
    """A line that returns to the pending task after another request was answered
    (seed 000: "回到原流程继续"), or ``None``; a task made this turn (since ``now``, the
    turn's start: an approval after the first round's facts) is asked as it is."""
    if conv is None or not conv.tasks:
        return None
    task = conv.tasks[-1]
    if task.id == answered_task or task.kind == "confirm":
        return None
    if now is not None and datetime.fromisoformat(task.created_at) >= now:
        return task.question
    if lang == "zh":
        return f"(回到刚才的事:{task.question})"
    return f"(Back to where we were: {task.question})"
