"""The conversation graph of a session (seed 002 §2.1), and the fold that changes it.

Entity nodes (a product, a warehouse, a place, a time …), intent nodes (what the user
asked for, its slots pointing at entity nodes), edges between them (``refers_to``,
``located_in``, ``replaces``) and the stack of pending tasks (a clarification or an
approval the turn is waiting for). The graph changes only by *operations*: plain JSON
mappings that the engine carries in ``graph_updated`` events; :func:`apply_ops` folds
them into a :class:`Conversation`, so a session rebuilt from its events (on any process)
has the same graph, and replay can check it.

A :class:`GraphEdit` computes the operations of one change against the current graph
(merging a re-mention into its node, versioning a correction) and applies them as it
goes, so the edit and the fold are the same code.

>>> conv = Conversation()
>>> edit = GraphEdit(conv, at="2026-06-12T08:00:00+00:00", source="m1")
>>> a = edit.mention("Location", "杭州西湖区")
>>> b = edit.mention("Location", "杭州市西湖区")  # the same place: one node
>>> c = edit.mention("Product", "iPhone 15")
>>> d = edit.mention("Product", "iPhone 15 Pro")  # another product
>>> a == b, c == d, len(conv.entities)
(True, False, 3)
>>> new = edit.correct(a, "Location", "深圳南山区")
>>> conv.entities[a].deprecated_at is not None, conv.entities[new].version, new
(True, 2, 'ent_1_v2')
>>> Conversation.from_data(conv.to_data()).to_data() == conv.to_data()
True
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "ENTITY_TYPES",
    "FROM_MEMORY",
    "Conversation",
    "ConversationPolicy",
    "Edge",
    "EntityNode",
    "GraphEdit",
    "IntentNode",
    "Task",
    "apply_ops",
    "cited_problems",
    "entity_type_of",
    "merge_key",
    "node_ids_in",
]

ENTITY_TYPES: dict[str, str] = {
    "sku": "Product", "product": "Product", "product_id": "Product",
    "warehouse": "Warehouse", "store": "Store", "store_id": "Store",
    "location": "Location", "city": "Location", "district": "Location",
    "order_id": "Order", "order": "Order",
    "due": "Time", "time": "Time", "date": "Time", "when": "Time", "start": "Time",
    "contact": "Person", "person": "Person", "to": "Person", "recipient": "Person",
}
"""The entity type of a slot by its name, when no tool contract says (``slots.X.entity``)."""

FROM_MEMORY = "from_memory"
"""The intent parameter naming the slots filled from recalled memory (slot → memory key):
their entity nodes get the source ``memory:<key>``, not the message."""

NOT_ENTITIES = frozenset({"lang", "kind", "memory", "missing", "decision", "task_id", "fragment",
                          "question", "time_problem", FROM_MEMORY})
"""Intent parameters that are never entities (the language, a constant of the rule …)."""

TaskKind = Literal["clarify", "approval", "confirm"]


@dataclass(frozen=True, slots=True)
class ConversationPolicy:
    """How the conversation layer behaves (``Orchestrator(conversation=...)``).

    Attributes:
        enabled: keep the conversation graph and pending tasks (``False``: turns stand
            alone, as before the graph existed).
        pending_ttl_s: how long a pending clarification or approval waits for the user.
        decay_per_hour: how much confidence a node loses per hour since it was last
            mentioned or confirmed (seed 002 tip 5: 0.02, so a day-old 0.95 is 0.47).
        confirm_below: a node whose decayed confidence is below this is confirmed with
            the user before a follow-up uses it.
        max_slot_failures: answers that fail a slot's format before the task is dropped
            with a clear question (bounded: never a loop).
        max_entities: the most entity nodes a session's graph keeps (active and
            deprecated) as a turn starts; past it the least recently seen go
            (:meth:`GraphEdit.prune`; the turn's own nodes come on top).
        max_deprecated: the most deprecated (corrected) nodes kept, newest first.
        max_intents: the most intent nodes kept, newest first.

    Pruned nodes leave the graph (the session's events still hold them: the archive);
    a node whose confidence has decayed to 0 goes too, unless a kept intent or a pending
    task points at it.
    """

    enabled: bool = True
    pending_ttl_s: float = 1800.0
    decay_per_hour: float = 0.02
    confirm_below: float = 0.6
    max_slot_failures: int = 2
    max_entities: int = 64
    max_deprecated: int = 8
    max_intents: int = 16


@dataclass(slots=True)
class EntityNode:
    """An entity the user mentioned (or a tool established).

    ``canonical`` is the value tools take (a SKU, a warehouse code, an ISO time); ``key``
    is what re-mentions are merged on (:func:`merge_key`); ``seen_at`` is when it was
    last mentioned or confirmed (time decay starts there); ``sources`` are message or
    tool-call ids.
    """

    id: str
    type: str
    value: str
    canonical: str
    confidence: float
    version: int
    created_at: str
    seen_at: str
    key: str
    deprecated_at: str | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """Not deprecated by a correction."""
        return self.deprecated_at is None


@dataclass(slots=True)
class IntentNode:
    """What the user asked for: ``params`` maps slot names to entity node ids, ``extra``
    holds the slots that are not entities (the language …)."""

    id: str
    type: str
    params: dict[str, str]
    extra: dict[str, Any]
    status: str
    created_at: str
    turn_id: str = ""


@dataclass(frozen=True, slots=True)
class Edge:
    """``src --kind--> dst`` (``refers_to``: intent → entity; ``replaces``: the corrected
    version → the old one; ``located_in``: an entity → a place)."""

    kind: str
    src: str
    dst: str


@dataclass(slots=True)
class Task:
    """A task waiting for the user: a slot to fill (``clarify``), a plan to approve
    (``approval``) or a stale node to confirm (``confirm``).

    ``parameters`` are the intent's slots as values (what resumes it); ``plan`` is the
    exact tool calls an approval would run; ``failures`` counts answers that failed the
    slot's format.
    """

    id: str
    kind: TaskKind
    intent_type: str
    parameters: dict[str, Any]
    created_at: str
    expires_at: str
    slot: str = ""
    tool: str = ""
    pattern: str = ""
    question: str = ""
    plan: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    intent_id: str = ""
    node_id: str = ""

    def expired(self, now: datetime) -> bool:
        """Whether it waited longer than its time to live."""
        return now >= datetime.fromisoformat(self.expires_at)


class Conversation:
    """A session's conversation graph and pending tasks (plain data; see the module docs).

    Attributes:
        entities: entity nodes by id, in creation order.
        intents: intent nodes by id, in creation order.
        edges: the edges, in creation order.
        tasks: the pending tasks, oldest first (the last is answered first).
    """

    __slots__ = ("counter", "edges", "entities", "intents", "revision", "tasks")

    def __init__(self) -> None:
        self.entities: dict[str, EntityNode] = {}
        self.intents: dict[str, IntentNode] = {}
        self.edges: list[Edge] = []
        self.tasks: list[Task] = []
        self.counter = 0
        self.revision = 0  # bumped by every fold (a cache key: not part of the data)

    def __repr__(self) -> str:
        return (f"Conversation({len(self.entities)} entities, {len(self.intents)} intents, "
                f"{len(self.tasks)} pending)")

    # --- reading ------------------------------------------------------------------------

    def active(self, type_: str | None = None) -> list[EntityNode]:
        """The active entity nodes (of ``type_``), most recently mentioned last."""
        nodes = [n for n in self.entities.values()
                 if n.active and (type_ is None or n.type == type_)]
        return sorted(nodes, key=lambda n: _instant(n.seen_at))

    def latest(self, type_: str) -> EntityNode | None:
        """The most recently mentioned active node of ``type_`` (what "it", "there" and
        "那家店" resolve to), or ``None``."""
        nodes = self.active(type_)
        return nodes[-1] if nodes else None

    def find(self, type_: str, value: str) -> EntityNode | None:
        """The active node of ``type_`` that ``value`` is a mention of, or ``None``."""
        key = merge_key(value)
        for node in self.entities.values():
            if node.active and node.type == type_ and (node.key == key
                                                       or merge_key(node.canonical) == key):
                return node
        return None

    def last_intent(self) -> IntentNode | None:
        """The latest intent with entity slots (the task a follow-up reuses), or ``None``."""
        for node in reversed(self.intents.values()):
            if node.params and node.status != "cancelled":
                return node
        return None

    def recent_intents(self, limit: int = 6) -> list[IntentNode]:
        """The latest intents with entity slots, newest first, one per intent type, at most
        ``limit`` (the tasks a follow-up may continue: "那华北仓呢" after an e-mail was
        approved goes back to the stock question before it)."""
        found: dict[str, IntentNode] = {}
        for node in reversed(self.intents.values()):
            if node.params and node.status != "cancelled" and node.type not in found:
                found[node.type] = node
                if len(found) >= limit:
                    break
        return list(found.values())

    def pending(self, now: datetime) -> Task | None:
        """The task waiting for an answer (the latest one not expired), or ``None``."""
        for task in reversed(self.tasks):
            if not task.expired(now):
                return task
        return None

    def confidence_at(self, node: EntityNode, now: datetime, per_hour: float) -> float:
        """``node``'s confidence decayed linearly since it was last seen (never below 0)."""
        hours = max(0.0, (_aware(now) - _instant(node.seen_at)).total_seconds() / 3600)
        return max(0.0, round(node.confidence - per_hour * hours, 4))

    def values_of(self, intent: IntentNode) -> dict[str, Any]:
        """The intent's slots as canonical values (entity slots) plus its other slots."""
        values = dict(intent.extra)
        for slot, node_id in intent.params.items():
            node = self.entities.get(node_id)
            if node is not None:
                values[slot] = node.canonical
        return values

    def summary(self, now: datetime | None = None, per_hour: float = 0.02) -> dict[str, Any]:
        """A compact view for a model's context and for ``view``: active entities (with
        decayed confidence), the last intent and the pending task."""
        entities = []
        for n in self.active():
            conf = self.confidence_at(n, now, per_hour) if now is not None else n.confidence
            entities.append({"id": n.id, "type": n.type, "value": n.value,
                             "canonical": n.canonical, "confidence": conf})
        last = self.last_intent()
        task = self.pending(now) if now is not None else (self.tasks[-1] if self.tasks else None)
        return {
            "entities": entities,
            "last_intent": None if last is None else {
                "id": last.id, "type": last.type, "params": dict(last.params)},
            "pending": None if task is None else {
                "id": task.id, "kind": task.kind, "intent_type": task.intent_type,
                "slot": task.slot, "tool": task.tool, "question": task.question,
                "plan": task.plan},
        }

    # --- plain data (checkpoints) -------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        """The whole state as JSON-ready data (what a checkpoint keeps)."""
        return {"counter": self.counter,
                "entities": [_plain(n) for n in self.entities.values()],
                "intents": [_plain(n) for n in self.intents.values()],
                "edges": [_plain(e) for e in self.edges],
                "tasks": [_plain(t) for t in self.tasks]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Conversation:
        """The state :meth:`to_data` wrote."""
        conv = cls()
        conv.counter = int(data.get("counter", 0))
        for n in data.get("entities", ()):
            conv.entities[n["id"]] = EntityNode(**{**n, "sources": list(n["sources"])})
        for n in data.get("intents", ()):
            conv.intents[n["id"]] = IntentNode(**{**n, "params": dict(n["params"]),
                                                  "extra": dict(n["extra"])})
        conv.edges = [Edge(**e) for e in data.get("edges", ())]
        conv.tasks = [Task(**{**t, "parameters": dict(t["parameters"]),
                              "plan": list(t["plan"])}) for t in data.get("tasks", ())]
        return conv


def entity_type_of(slot: str, declared: Mapping[str, str] | None = None) -> str:
    """The entity type of a slot: the tool contracts' ``slots`` (``declared``), then
    :data:`ENTITY_TYPES`, else the slot name itself."""
    if declared and slot in declared:
        return declared[slot]
    return ENTITY_TYPES.get(slot, slot)


_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)
_ADMIN = re.compile(r"(?<=.)[省市](?=.)")  # 杭州市西湖区 is 杭州西湖区: 省/市 inside a name


@lru_cache(maxsize=4096)
def merge_key(value: str) -> str:
    """What two mentions of one entity share: NFKC, case-folded, without spaces and
    punctuation, and without 省/市 inside a place name ("杭州市西湖区" → "杭州西湖区").
    "iPhone 15" and "iPhone 15 Pro" keep different keys.

    >>> merge_key("杭州市西湖区") == merge_key("杭州西湖区"), merge_key("iPhone 15")
    (True, 'iphone15')
    """
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return _ADMIN.sub("", _PUNCT.sub("", text))


# --- the fold --------------------------------------------------------------------------


def apply_ops(conv: Conversation, ops: Iterable[Mapping[str, Any]]) -> Conversation:
    """Fold operations (a ``graph_updated`` event's ``ops``) into ``conv``; returns it.

    Operations: ``entity`` (add a node), ``mention`` (a re-mention: sources, seen_at,
    confidence), ``deprecate``, ``intent`` (add an intent node), ``intent_status``,
    ``edge``, ``task`` (push or replace a pending task), ``task_end`` (drop it),
    ``prune`` (drop old nodes and their edges: :meth:`GraphEdit.prune`).
    An operation naming an unknown node is ignored (it cannot come from this code).
    """
    conv.revision += 1
    for op in ops:
        kind = op["op"]
        if kind == "entity":
            node = EntityNode(**{**op["node"], "sources": list(op["node"]["sources"])})
            conv.entities[node.id] = node
            conv.counter = max(conv.counter, _number(node.id))
        elif kind == "mention":
            seen = conv.entities.get(op["id"])
            if seen is not None:
                seen.seen_at = op["at"]
                seen.confidence = max(seen.confidence, float(op["confidence"]))
                if op["source"] and op["source"] not in seen.sources:
                    seen.sources.append(op["source"])
        elif kind == "deprecate":
            old = conv.entities.get(op["id"])
            if old is not None:
                old.deprecated_at = op["at"]
        elif kind == "intent":
            intent = IntentNode(**{**op["node"], "params": dict(op["node"]["params"]),
                                   "extra": dict(op["node"]["extra"])})
            conv.intents[intent.id] = intent
            conv.counter = max(conv.counter, _number(intent.id))
        elif kind == "intent_status":
            target = conv.intents.get(op["id"])
            if target is not None:
                target.status = op["status"]
        elif kind == "edge":
            conv.edges.append(Edge(op["kind"], op["src"], op["dst"]))
        elif kind == "task":
            task = Task(**{**op["task"], "parameters": dict(op["task"]["parameters"]),
                           "plan": list(op["task"]["plan"])})
            conv.tasks = [t for t in conv.tasks if t.id != task.id] + [task]
            conv.counter = max(conv.counter, _number(task.id))
        elif kind == "task_end":
            conv.tasks = [t for t in conv.tasks if t.id != op["id"]]
        elif kind == "prune":
            gone = set(op.get("entities", ())) | set(op.get("intents", ()))
            for node_id in op.get("entities", ()):
                conv.entities.pop(node_id, None)
            for node_id in op.get("intents", ()):
                conv.intents.pop(node_id, None)
            conv.edges = [e for e in conv.edges if e.src not in gone and e.dst not in gone]
    return conv


def _number(node_id: str) -> int:
    """The sequence number in a node id (``ent_3_v2`` → 3)."""
    parts = node_id.split("_", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _plain(obj: Any) -> dict[str, Any]:
    """A node or task as a plain dict (``dataclasses.asdict`` without its deep copy: the
    values are strings, numbers and flat lists or dicts, copied one level)."""
    out = {}
    for f in _FIELDS.get(type(obj)) or _fields_of(type(obj)):
        value = getattr(obj, f)
        out[f] = value.copy() if isinstance(value, list | dict) else value
    return out


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(cls: type) -> tuple[str, ...]:
    names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


class GraphEdit:
    """The operations of one change to a conversation, applied as they are made.

    Args:
        conv: the conversation (changed in place, through :func:`apply_ops`).
        at: the time of the change (ISO 8601).
        source: the message or tool-call id the mentions come from.

    Attributes:
        ops: the operations so far (a ``graph_updated`` event's payload).
    """

    def __init__(self, conv: Conversation, at: str, source: str) -> None:
        self.conv, self.at, self.source = conv, at, source
        self.ops: list[dict[str, Any]] = []

    def _do(self, op: dict[str, Any]) -> None:
        self.ops.append(op)
        apply_ops(self.conv, (op,))

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.conv.counter + 1}"

    def mention(self, type_: str, value: str, canonical: str | None = None,
                confidence: float = 0.9, source: str | None = None) -> str:
        """A mention of an entity: merged into the active node it names (same type and
        merge key, of the value or the canonical value), else a new node. Returns its id.
        ``source``: where it came from, when not the edit's message (``memory:<key>``)."""
        canonical = value if canonical is None else canonical
        source = source or self.source
        found = self.conv.find(type_, canonical) or self.conv.find(type_, value)
        if found is not None:
            self._do({"op": "mention", "id": found.id, "at": self.at, "source": source,
                      "confidence": confidence})
            return found.id
        node_id = self._new_id("ent")
        self._do({"op": "entity", "node": _plain(EntityNode(
            node_id, type_, str(value), str(canonical), confidence, 1, self.at, self.at,
            merge_key(value), None, [source] if source else []))})
        return node_id

    def correct(self, old_id: str, type_: str, value: str, canonical: str | None = None,
                confidence: float = 0.98) -> str:
        """A correction of node ``old_id``: it is deprecated (kept, with its confidence) and
        the next version is created, ``replaces`` the old one. Returns the new id (an
        active node already holding ``value`` is reused instead of a new version)."""
        canonical = value if canonical is None else canonical
        old = self.conv.entities[old_id]
        self._do({"op": "deprecate", "id": old_id, "at": self.at})
        existing = self.conv.find(type_, canonical) or self.conv.find(type_, value)
        if existing is not None:
            self._do({"op": "mention", "id": existing.id, "at": self.at,
                      "source": self.source, "confidence": confidence})
            new_id = existing.id
        else:
            base = old_id.split("_v")[0]
            version = old.version + 1
            new_id = f"{base}_v{version}"
            self._do({"op": "entity", "node": _plain(EntityNode(
                new_id, type_, str(value), str(canonical), confidence, version, self.at,
                self.at, merge_key(value), None, [self.source] if self.source else []))})
        self._do({"op": "edge", "kind": "replaces", "src": new_id, "dst": old_id})
        return new_id

    def confirm(self, node_id: str) -> None:
        """The user confirmed a node: it is fresh again (decay restarts now)."""
        self._do({"op": "mention", "id": node_id, "at": self.at, "source": self.source,
                  "confidence": self.conv.entities[node_id].confidence})

    def intent(self, type_: str, params: Mapping[str, str], extra: Mapping[str, Any],
               turn_id: str = "", status: str = "active") -> str:
        """A new intent node with its entity slots (``refers_to`` edges). Returns its id."""
        intent_id = self._new_id("int")
        self._do({"op": "intent", "node": _plain(IntentNode(
            intent_id, type_, dict(params), dict(extra), status, self.at, turn_id))})
        for node_id in params.values():
            self._do({"op": "edge", "kind": "refers_to", "src": intent_id, "dst": node_id})
        return intent_id

    def intent_status(self, intent_id: str, status: str) -> None:
        """Set an intent's status (``active``, ``pending``, ``done``, ``cancelled``)."""
        self._do({"op": "intent_status", "id": intent_id, "status": status})

    def push_task(self, task: Task) -> None:
        """Push (or replace) a pending task."""
        self._do({"op": "task", "task": _plain(task)})

    def new_task_id(self) -> str:
        """An id for a new task."""
        return self._new_id("task")

    def end_task(self, task_id: str, outcome: str) -> None:
        """The task is over (``resumed``, ``approved``, ``cancelled``, ``expired``,
        ``abandoned``)."""
        self._do({"op": "task_end", "id": task_id, "outcome": outcome})

    def prune(self, now: datetime, policy: ConversationPolicy) -> None:
        """Keep the graph bounded (one ``prune`` operation, when anything goes): the
        intents past ``max_intents`` (oldest first), the deprecated nodes past
        ``max_deprecated``, active nodes decayed to confidence 0 that no kept intent or
        pending task points at, and then, past ``max_entities``, the least recently seen
        nodes outside the latest intent."""
        conv = self.conv
        intents = list(conv.intents)
        old_intents = intents[:max(0, len(intents) - policy.max_intents)]
        deprecated = sorted((n for n in conv.entities.values() if not n.active),
                            key=lambda n: _instant(n.deprecated_at or _NEVER))
        gone = [n.id for n in deprecated[:max(0, len(deprecated) - policy.max_deprecated)]]
        if policy.decay_per_hour > 0:  # only a node unseen this long can have decayed to 0
            cutoff = _aware(now) - timedelta(hours=1.0 / policy.decay_per_hour)
            stale = [n for n in conv.entities.values()
                     if n.active and _instant(n.seen_at) <= cutoff]
            if stale:
                held = {n for i in intents[len(old_intents):]
                        for n in conv.intents[i].params.values()}
                held |= {t.node_id for t in conv.tasks if t.node_id}
                gone += [n.id for n in stale if n.id not in held
                         and conv.confidence_at(n, now, policy.decay_per_hour) <= 0.0]
        over = len(conv.entities) - len(set(gone)) - policy.max_entities
        if over > 0:
            last = conv.last_intent()
            latest = set(last.params.values()) if last is not None else set()
            left = [n for n in sorted(conv.entities.values(), key=lambda n: _instant(n.seen_at))
                    if n.id not in gone and n.id not in latest]
            gone += [n.id for n in left[:over]]
        if gone or old_intents:
            self._do({"op": "prune", "entities": list(dict.fromkeys(gone)),
                      "intents": old_intents, "at": self.at})

    def expire(self, now: datetime) -> None:
        """End every expired task."""
        for task in list(self.conv.tasks):
            if task.expired(now):
                self.end_task(task.id, "expired")


_NEVER = "0001-01-01T00:00:00+00:00"


@lru_cache(maxsize=256)  # one session's nodes, read many times a turn; ~25 KB at most
def _instant(iso: str) -> datetime:
    """A time the graph wrote (``at``, ``seen_at``, ``deprecated_at``: ISO 8601) as an
    instant to order by: a session's times may carry different UTC offsets (a
    daylight-saving change, a new configured time zone), so their text order is not their
    time order (15:00+08:00 is before 08:00+00:00). A time without an offset counts as UTC."""
    return _aware(datetime.fromisoformat(iso))


def _aware(moment: datetime) -> datetime:
    """``moment``, in UTC when it has no offset (what :func:`_instant` compares it with)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def node_ids_in(text: str) -> list[str]:
    """The node ids a text cites (``ent_3``, ``ent_3_v2``, ``int_4``), in order."""
    return re.findall(r"\b(?:ent|int)_\d+(?:_v\d+)?\b", text)


def cited_problems(conv: Conversation | None, ids: Sequence[str]) -> list[str]:
    """Why each cited id cannot be cited: it names no node, or a deprecated one."""
    problems = []
    for node_id in ids:
        node = None if conv is None else conv.entities.get(node_id)
        if node is None and (conv is None or node_id not in conv.intents):
            problems.append(f"{node_id} names no node of the conversation graph")
        elif node is not None and not node.active:
            problems.append(f"{node_id} is deprecated (corrected at {node.deprecated_at}); "
                            "cite its current version")
    return problems
