"""OpenTelemetry spans of a turn: turn → state → brain call, through the engine's seams.

:class:`TurnTracer` is a turn hook (:mod:`hermes_fsm.engine.hooks`): ``pre_turn`` opens
``hermes.turn`` as a child of whatever span is current (the HTTP request's, under
``hermes-fsm serve``), each ``post_step`` ends the state span of the step that fired and
opens ``hermes.state`` for the state that runs next, ``post_turn``/``turn_failed`` end
both. Each span is made the current one inside the turn's task, so what a state does
nests under it: a brain call (:class:`TracedBrain`'s ``hermes.brain_call``), a tool
request over the bus (``hermes.tool_request``, whose trace context goes in the
``EXECUTE_REQUEST``) and the worker's ``hermes.tool_execute`` below it.

Attributes: ``hermes.session_id``, ``hermes.turn_id`` (turn); ``hermes.state``,
``hermes.from_state``, ``hermes.to_state``, ``hermes.attempt``, ``hermes.contract``
(state); ``hermes.state``, ``hermes.contract``, ``hermes.attempt``, ``hermes.brain``
(brain call); ``hermes.status`` on the turn when it ends.

Off by default: :func:`~hermes_fsm.config.build.build_orchestrator` adds the hook and the
brain wrapper only when ``telemetry:`` turns tracing on, so a default turn pays nothing.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from hermes_fsm.brain.protocol import Brain, BrainRequest
from hermes_fsm.engine.session import Session
from hermes_fsm.engine.turn import TurnContext, TurnResult

__all__ = ["TracedBrain", "TurnTracer", "traced_brain"]

_tracer = trace.get_tracer("hermes_fsm.engine")


class _Open:
    """The open spans of one turn and the context tokens that made them current."""

    __slots__ = ("state", "state_token", "turn", "turn_token")

    def __init__(self, turn: Any, turn_token: object) -> None:
        self.turn, self.turn_token = turn, turn_token
        self.state: Any = None
        self.state_token: object = None


class TurnTracer:
    """A turn hook opening the turn's and each state's spans (see the module docs)."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}  # id(turn) -> its spans (a turn runs in one task)

    def pre_turn(self, *, session: Session, turn: TurnContext, resumed: bool,
                 **future_kwargs: Any) -> None:
        """Open ``hermes.turn`` (and, for a resumed turn, the state it goes on from)."""
        span = _tracer.start_span("hermes.turn", attributes={
            "hermes.session_id": turn.session_id, "hermes.turn_id": turn.turn_id,
            "hermes.resumed": resumed})
        token = otel_context.attach(trace.set_span_in_context(span))
        opened = self._open[id(turn)] = _Open(span, token)
        if resumed:
            path = turn.path
            self._start_state(opened, turn, path[-2] if len(path) > 1 else path[-1],
                              session.state)

    def post_step(self, *, session: Session, turn: TurnContext, source: str, dest: str,
                  **future_kwargs: Any) -> None:
        """End the state span of the step that fired; open the next state's."""
        opened = self._open.get(id(turn))
        if opened is None:
            return
        self._end_state(opened, turn, dest)
        self._start_state(opened, turn, source, dest)

    def post_turn(self, *, session: Session, turn: TurnContext, result: TurnResult,
                  **future_kwargs: Any) -> None:
        """End the last state span and the turn's."""
        opened = self._open.pop(id(turn), None)
        if opened is None:
            return
        self._end_state(opened, turn, result.path[-1] if result.path else session.state)
        opened.turn.set_attribute("hermes.status", result.status)
        _detach(opened.turn_token)
        opened.turn.end()

    def turn_failed(self, *, session: Session, turn: TurnContext, exception: BaseException,
                    **future_kwargs: Any) -> None:
        """End the spans of a turn that raised, with the exception recorded."""
        opened = self._open.pop(id(turn), None)
        if opened is None:
            return
        for span, token in ((opened.state, opened.state_token),
                            (opened.turn, opened.turn_token)):
            if span is None:
                continue
            span.record_exception(exception)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exception).__name__))
            _detach(token)
            span.end()
        opened.state = None

    @staticmethod
    def _start_state(opened: _Open, turn: TurnContext, source: str, dest: str) -> None:
        span = _tracer.start_span(
            "hermes.state", context=trace.set_span_in_context(opened.turn),
            attributes={"hermes.state": dest, "hermes.from_state": source,
                        "hermes.attempt": turn.attempt})
        opened.state = span
        opened.state_token = otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def _end_state(opened: _Open, turn: TurnContext, to_state: str) -> None:
        span = opened.state
        if span is None:
            return
        span.set_attribute("hermes.to_state", to_state)
        spec = turn.state
        if spec is not None and spec.contract is not None:
            span.set_attribute("hermes.contract", spec.contract.contract_name)
        _detach(opened.state_token)
        span.end()
        opened.state = None


def _detach(token: object) -> None:
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:  # a token of another context (never expected): the span still ends
        pass


class TracedBrain:
    """A brain whose every ``decide`` is a ``hermes.brain_call`` span (see the module docs).

    Other attributes are the wrapped brain's.
    """

    def __init__(self, brain: Brain) -> None:
        self.inner = brain
        self.name = brain.name

    async def decide(self, request: BrainRequest) -> Any:
        """The wrapped brain's decision, inside its span."""
        with _tracer.start_as_current_span("hermes.brain_call", attributes={
                "hermes.state": request.state, "hermes.contract": request.contract_name,
                "hermes.attempt": request.attempt, "hermes.brain": self.name}):
            return await self.inner.decide(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _TracedSummarizingBrain(TracedBrain):
    """A traced brain that writes rolling summaries too (it wraps one that does)."""

    async def summarize(self, request: Any) -> Any:
        """The wrapped brain's summary."""
        return await self.inner.summarize(request)  # type: ignore[attr-defined]


def traced_brain(brain: Brain) -> TracedBrain:
    """``brain`` wrapped in :class:`TracedBrain` (keeping its ``summarize``, if any)."""
    if callable(getattr(brain, "summarize", None)):
        return _TracedSummarizingBrain(brain)
    return TracedBrain(brain)
