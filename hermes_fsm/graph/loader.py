"""The graph file format and its loader: YAML in, a :class:`~hermes_fsm.graph.model.Graph` out.

A graph file declares states (handler, contract, timeout, retry policy, failure route,
what to recall) and the transitions between them. The engine knows nothing about particular states;
the seven-state agent turn is just ``states/agent_turn.yaml``.

Triggers are fixed by the engine: ``start`` leaves the initial state when a message
arrives; ``done`` fires when a state's output passes its contract (the transitions of a
source are tried in file order; the first whose conditions hold is taken). From every
state with a handler, the engine adds ``retry`` (back into the state) and ``fail`` (to
its ``on_failure`` route); from every state, ``abort`` (to the initial state, when the
turn budget runs out). All of these are real transitions of the machine and are drawn
in every diagram.

Conditions are either ``output.FIELD`` / ``not output.FIELD`` (the truth of a field of
the state's validated output) or the dotted path of a callable taking the turn context.

A state's ``recall:`` lists what its brain request is given from memory: ``memory``
(the user's long-term memories recalled for the message, once per turn) and
``past_outcomes`` (the outcomes of the user's similar earlier requests, from the
experience log). Without it a state recalls ``[memory]``; ``recall: []`` recalls
nothing. The default turn gives PLANNING ``[memory, past_outcomes]``.

A graph registers its own contracts in a ``contracts:`` section, one
``contract_name: package.module.ContractClass`` per line (the key is the class's
``contract_name``); its states then refer to them as ``contract_name@MAJOR``.

Every mistake in a file is a :class:`~hermes_fsm.errors.GraphError` naming the file,
the line, and what to change.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hermes_fsm._internal.data import data_path
from hermes_fsm._internal.yaml_lines import (
    LineDict,
    YamlProblem,
    line_at,
    load_yaml_file,
    load_yaml_text,
)
from hermes_fsm.contracts.base import ContractRegistry
from hermes_fsm.contracts.legacy import LEGACY_CONTRACTS
from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.contracts.states import STATE_CONTRACTS
from hermes_fsm.errors import ContractError, GraphError
from hermes_fsm.graph.model import (
    DEFAULT_RECALL,
    ENGINE_TRIGGERS,
    RECALL_KINDS,
    Condition,
    Graph,
    Recall,
    StateSpec,
    TransitionSpec,
)

__all__ = ["default_graph_path", "load_graph", "parse_graph"]

# --- the file format ----------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _StateFile(_Strict):
    description: str = ""
    handler: str | None = None
    contract: str | None = None
    timeout_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    retry: RetryPolicy = RetryPolicy()
    on_failure: str | None = None
    on_output: str | None = None
    recall: Any = None  # checked by _Resolver._recall, which words the errors
    brain: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    fallback_brain: str | None = Field(default=None, min_length=1,
                                       pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _int_is_a_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _TransitionFile(_Strict):
    trigger: str = "done"
    source: str
    dest: str
    conditions: list[str] = []
    unless: list[str] = []
    limit: int | None = Field(default=None, ge=1, le=1000)


class _GraphFile(_Strict):
    name: str = Field(min_length=1)
    version: str = "1.0.0"
    description: str = ""
    initial: str
    budget_s: float = Field(default=60.0, gt=0.0, le=86400.0)
    partial_answer: str = "I could not finish this in time (stopped in {state})."
    fallback_answer: str = Field(
        default="Sorry, I could not answer that this time ({state}: {reason}). "
                "Please try again.", min_length=1)
    contracts: dict[str, str] = {}
    states: dict[str, _StateFile | None]
    transitions: list[_TransitionFile]

    @field_validator("budget_s", mode="before")
    @classmethod
    def _int_is_a_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def default_graph_path() -> Path:
    """The bundled seven-state turn, ``states/agent_turn.yaml``."""
    return data_path("states", "agent_turn.yaml")


def load_graph(path: str | Path, contracts: ContractRegistry | None = None) -> Graph:
    """Load and validate a graph file.

    Args:
        path: the YAML file.
        contracts: registry to resolve ``contract:`` references (default: the state
            contracts of the seven-state turn).

    Raises:
        GraphError: anything wrong with the file, with its path and line.
    """
    path = Path(path)
    try:
        doc = load_yaml_file(path)
        text = path.read_text(encoding="utf-8")
    except YamlProblem as exc:
        raise GraphError(str(path), exc.line, exc.problem) from None
    return _build(doc, str(path), text, contracts)


def parse_graph(
    text: str, name: str = "<string>", contracts: ContractRegistry | None = None
) -> Graph:
    """Validate a graph given as YAML text (see :func:`load_graph`)."""
    try:
        doc = load_yaml_text(text, name)
    except YamlProblem as exc:
        raise GraphError(name, exc.line, exc.problem) from None
    return _build(doc, name, text, contracts)


def _build(doc: Any, path: str, text: str, contracts: ContractRegistry | None) -> Graph:
    if not isinstance(doc, LineDict):
        raise GraphError(
            path, getattr(doc, "line", 1),
            "a graph file must be a mapping with name, initial, states and transitions",
        )
    try:
        spec = _GraphFile.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        # strip union/model branch names pydantic adds for `X | None` fields
        loc = tuple(p for p in loc if p not in ("_StateFile", "function-after[...]"))
        raise GraphError(path, line_at(doc, loc), _describe_error(first, loc, doc)) from None
    return _Resolver(doc, path, spec, contracts).graph(text)


def _describe_error(error: Mapping[str, Any], loc: tuple[Any, ...], doc: Any) -> str:
    where = ".".join(str(p) for p in loc) or "the file"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown field {where!r}; remove it or check its spelling"
    if kind == "missing":
        return f"missing required field {where!r}"
    # show the value as written (validators may have converted it, e.g. 0 to 0.0)
    written = doc
    for part in loc:
        try:
            written = written[part]
        except (KeyError, IndexError, TypeError):
            written = error.get("input")
            break
    return f"{where}: {error['msg']} (got {written!r})"


def _import(dotted: str) -> Any:
    module_name, _, attr = dotted.rpartition(".")
    if not module_name:
        raise ImportError(f"{dotted!r} is not a dotted path like 'package.module.name'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None


def _declared(states: Mapping[str, Any]) -> str:
    return f"declared: {', '.join(states)}" if states else "no states are declared"


def _import_hint(exc: ImportError) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return ("; check the spelling, and that the module is importable (installed, or its "
                "directory on PYTHONPATH)")
    return ""


def _output_condition(text: str) -> Callable[[Any], bool] | None:
    negate = text.startswith("not ")
    expr = text[4:].strip() if negate else text
    if not expr.startswith("output."):
        return None
    field_name = expr[len("output."):]
    if not field_name.isidentifier():
        return None

    def check(ctx: Any) -> bool:
        output = ctx.output
        value = output.get(field_name) if isinstance(output, Mapping) else getattr(
            output, field_name, None)
        return bool(value) != negate

    return check


class _Resolver:
    """Turns a validated file into a Graph, checking what the schema alone cannot."""

    def __init__(
        self, doc: LineDict, path: str, spec: _GraphFile, contracts: ContractRegistry | None
    ) -> None:
        self.doc, self.path, self.spec = doc, path, spec
        if contracts is None:
            contracts = ContractRegistry((*STATE_CONTRACTS, *LEGACY_CONTRACTS))
        self.contracts = contracts

    def fail(self, loc: tuple[Any, ...], problem: str) -> GraphError:
        return GraphError(self.path, line_at(self.doc, loc), problem)

    def graph(self, text: str) -> Graph:
        spec = self.spec
        self._register_contracts()
        if spec.initial not in spec.states:
            raise self.fail(("initial",), f"initial state {spec.initial!r} is not declared "
                            f"under states ({_declared(spec.states)})")
        states = {name: self._state(name, s) for name, s in spec.states.items()}
        transitions = tuple(self._transition(i, t) for i, t in enumerate(spec.transitions))
        self._check_shape(states, transitions)
        return Graph(
            name=spec.name, version=spec.version, initial=spec.initial, states=states,
            transitions=transitions, budget_s=spec.budget_s, partial_answer=spec.partial_answer,
            fallback_answer=spec.fallback_answer,
            description=spec.description, path=self.path,
            content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
            contracts=self.contracts,
        )

    def _register_contracts(self) -> None:
        for name, dotted in self.spec.contracts.items():
            loc = ("contracts", name)
            what = f"contract {name!r} ({dotted})"
            try:
                contract = _import(dotted)
            except ImportError as exc:
                raise self.fail(loc, f"{what} cannot be imported: {exc}{_import_hint(exc)}; "
                                "give the dotted path of a hermes_fsm.Contract subclass") from None
            except Exception as exc:  # the module itself failed to import
                raise self.fail(loc, f"{what}: importing it raised "
                                f"{type(exc).__name__}: {exc}") from None
            try:
                self.contracts.register(contract)
            except ContractError as exc:
                raise self.fail(loc, f"{what} cannot be registered: {exc}") from None
            if contract.contract_name != name:
                raise self.fail(loc, f"{what} is named {contract.contract_name!r}; list it as "
                                f"'{contract.contract_name}: {dotted}' (states refer to it as "
                                f"{contract.contract_name}@{contract.contract_version.split('.')[0]})")

    def _state(self, name: str, s: _StateFile | None) -> StateSpec:
        s = s or _StateFile()
        loc = ("states", name)
        is_initial = name == self.spec.initial
        if is_initial and (s.handler or s.contract):
            field_name = "handler" if s.handler else "contract"
            raise self.fail((*loc, field_name), f"the initial state {name!r} waits for a "
                            f"message and cannot have a {field_name}; remove it, or make "
                            "another state the initial one")
        contract = None
        if s.contract:
            try:
                contract = self.contracts.get(s.contract)
            except ContractError as exc:
                raise self.fail((*loc, "contract"), f"state {name}: {exc}") from None
        handler = None
        if s.handler:
            handler = self._callable((*loc, "handler"), s.handler, f"handler of state {name}")
        elif not is_initial:
            if contract is None:  # (a contract alone means: the engine asks the brain)
                raise self.fail(loc, f"state {name!r} has neither a handler nor a contract; give "
                                "it a handler (dotted path), or a contract for the brain to fill")
        on_output = None
        if s.on_output:
            on_output = self._callable((*loc, "on_output"), s.on_output, f"on_output of {name}")
        if s.on_failure is not None and s.on_failure not in self.spec.states:
            raise self.fail((*loc, "on_failure"), f"state {name}: on_failure names unknown state "
                            f"{s.on_failure!r} ({_declared(self.spec.states)})")
        if not is_initial and s.on_failure is None:
            raise self.fail(loc, f"state {name!r} has no on_failure route; every working state "
                            f"needs one (e.g. on_failure: {self.spec.initial})")
        state_line = line_at(self.doc, loc)
        return StateSpec(
            name=name, description=s.description, handler=handler, handler_path=s.handler,
            contract=contract, timeout_s=s.timeout_s, retry=s.retry, on_failure=s.on_failure,
            on_output=on_output, line=state_line, recall=self._recall(name, s.recall),
            brain=s.brain, fallback_brain=s.fallback_brain,
        )

    def _recall(self, name: str, recall: Any) -> frozenset[Recall]:
        loc = ("states", name, "recall")
        if recall is None:
            return frozenset() if name == self.spec.initial else DEFAULT_RECALL
        if name == self.spec.initial:
            raise self.fail(loc, f"the initial state {name!r} waits for a message and recalls "
                            "nothing; remove its recall")
        if isinstance(recall, str):
            raise self.fail(loc, f"state {name}: recall is a list, even of one item; write "
                            f"recall: [{recall}]")
        if not isinstance(recall, list):
            raise self.fail(loc, f"state {name}: recall must be a list (got {recall!r}); "
                            f"list any of {', '.join(RECALL_KINDS)}, or write recall: [] for none")
        kinds: dict[str, Recall] = {k: k for k in RECALL_KINDS}
        seen: set[Recall] = set()
        for i, item in enumerate(recall):
            kind = kinds.get(item) if isinstance(item, str) else None
            if kind is None:
                raise self.fail((*loc, i), f"state {name}: recall lists unknown {item!r}; "
                                f"list any of {', '.join(RECALL_KINDS)} (e.g. recall: "
                                "[memory, past_outcomes]), or write recall: [] for none")
            if kind in seen:
                raise self.fail((*loc, i), f"state {name}: recall lists {item!r} twice; "
                                "list it once")
            seen.add(kind)
        return frozenset(seen)

    def _callable(self, loc: tuple[Any, ...], dotted: str, what: str) -> Callable[..., Any]:
        try:
            obj = _import(dotted)
        except ImportError as exc:
            raise self.fail(loc, f"{what}: cannot import {dotted!r}: {exc}"
                            f"{_import_hint(exc)}") from None
        except Exception as exc:  # the module itself failed to import
            raise self.fail(loc, f"{what}: importing {dotted!r} raised "
                            f"{type(exc).__name__}: {exc}") from None
        if not callable(obj):
            raise self.fail(loc, f"{what}: {dotted!r} is not callable")
        return obj  # type: ignore[no-any-return]

    def _condition(self, loc: tuple[Any, ...], text: str, source: str | None = None
                   ) -> Condition:
        check = _output_condition(text)
        if check is None and (text == "output" or text.startswith(("output.", "not "))):
            raise self.fail(loc, f"condition {text!r} is malformed: write output.FIELD or "
                            "not output.FIELD (FIELD a field name of the state's output), or "
                            "the dotted path of a callable (negate a callable with unless:)")
        if check is None:
            check = self._callable(loc, text, f"condition {text!r}")
        elif source is not None:
            self._check_output_field(loc, text, source)
        return Condition(text, check)

    def _check_output_field(self, loc: tuple[Any, ...], text: str, source: str) -> None:
        """``output.FIELD`` must name a field of the source state's contract (a state
        without a contract, whose handler's output has no declared shape, is not checked)."""
        state = self.spec.states.get(source)
        if state is None or not state.contract:
            return
        try:
            model = self.contracts.get(state.contract)
        except ContractError:
            return  # the state itself reports its unknown contract
        field_name = text.removeprefix("not ").strip().removeprefix("output.")
        fields = set(model.model_fields) | set(model.model_computed_fields)
        if field_name in fields or isinstance(getattr(model, field_name, None), property):
            return
        close = difflib.get_close_matches(field_name, sorted(fields), n=1)
        hint = f"did you mean output.{close[0]}? " if close else ""
        raise self.fail(loc, f"condition {text!r}: the output of {source} "
                        f"({state.contract}) has no field {field_name!r}; {hint}its fields "
                        f"are {', '.join(sorted(fields))}")

    def _transition(self, i: int, t: _TransitionFile) -> TransitionSpec:
        loc = ("transitions", i)
        names = self.spec.states
        for end in ("source", "dest"):
            value = getattr(t, end)
            if value not in names:
                raise self.fail((*loc, end), f"transition {i + 1}: {end} {value!r} is not a "
                                f"declared state ({_declared(names)})")
        if t.trigger not in ENGINE_TRIGGERS:
            raise self.fail((*loc, "trigger"), f"transition {i + 1}: unknown trigger "
                            f"{t.trigger!r}; the engine fires 'start' (from the initial state) "
                            "and 'done' (when a state's output passes its contract) — choose "
                            "between destinations with conditions")
        if (t.trigger == "start") != (t.source == self.spec.initial):
            raise self.fail((*loc, "trigger"), f"transition {i + 1}: use trigger 'start' from "
                            f"the initial state {self.spec.initial} and 'done' from other states")
        conditions = tuple(self._condition((*loc, "conditions", j), c, t.source)
                           for j, c in enumerate(t.conditions))
        unless = tuple(self._condition((*loc, "unless", j), c, t.source)
                       for j, c in enumerate(t.unless))
        return TransitionSpec(t.trigger, t.source, t.dest, conditions, unless, t.limit,
                              line_at(self.doc, loc))

    def _check_shape(
        self, states: Mapping[str, StateSpec], transitions: tuple[TransitionSpec, ...]
    ) -> None:
        initial = self.spec.initial
        by_source: dict[str, list[tuple[int, TransitionSpec]]] = {}
        for i, t in enumerate(transitions):
            by_source.setdefault(t.source, []).append((i, t))
        for name in states:
            outs = by_source.get(name, [])
            if not outs:
                raise self.fail(("states", name), f"state {name!r} has no outgoing transition; "
                                "add one (a turn must always be able to move on)")
            unconditional = [i for i, t in outs if not (t.conditions or t.unless or t.limit)]
            if not unconditional:
                raise self.fail(("transitions", outs[-1][0]),
                                f"every transition out of {name!r} has a condition or limit; "
                                "add an unconditional one last so the turn can always move on")
            shadowed = [i for i, _ in outs if i > unconditional[0]]
            if shadowed:
                raise self.fail(("transitions", shadowed[0]),
                                f"transition {shadowed[0] + 1} out of {name!r} can never be taken:"
                                f" the unconditional transition {unconditional[0] + 1} comes "
                                "before it; move the unconditional one last")
        edges: dict[str, set[str]] = {n: set() for n in states}
        for t in transitions:
            edges[t.source].add(t.dest)
        for s in states.values():
            if s.on_failure:
                edges[s.name].add(s.on_failure)
        reachable = _closure(initial, edges)
        for name in states:
            if name not in reachable:
                raise self.fail(("states", name), f"state {name!r} is unreachable from the "
                                f"initial state {initial!r}; add a transition into it or remove it")
        reverse: dict[str, set[str]] = {n: set() for n in states}
        for src, dests in edges.items():
            for d in dests:
                reverse[d].add(src)
        back = _closure(initial, reverse)
        for name in states:
            if name not in back:
                raise self.fail(("states", name), f"from state {name!r} the turn can never get "
                                f"back to {initial!r}; add a transition or on_failure route")


def _closure(start: str, edges: Mapping[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
