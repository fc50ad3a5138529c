"""Turn hooks: code the engine calls at defined points of every turn.

Modelled on Apache Burr's lifecycle hooks (``PostRunStepHook`` …): each hook point is a
method called with **keyword arguments only**, and a hook declares ``**future_kwargs``,
so a release that passes one more argument never breaks a hook written before it. A
hook is any object with one or more of these methods, plain or ``async``; pass hooks as
``Orchestrator(hooks=[...])``. The engine knows nothing of what a hook does: durable
sessions (:class:`~hermes_fsm.engine.durable.DurableSessions`) are one hook, added by
``Orchestrator(store=...)`` ahead of the hooks given.

The points, in the order a turn reaches them (``session`` is the
:class:`~hermes_fsm.engine.session.Session`, ``turn`` the running
:class:`~hermes_fsm.engine.turn.TurnContext`; ``turn.events`` holds the turn's events so
far):

``pre_turn(*, session, turn, resumed, **future_kwargs)``
    Before the turn's first event. ``resumed``: the turn was rebuilt from stored events
    (a durable session whose process died mid-turn) and goes on from ``session.state``,
    without a new ``turn_started``.
``post_step(*, session, turn, source, dest, **future_kwargs)``
    After each step fired its transition, before the next state runs: the turn's start
    (``source`` is the initial state), and each attempt at a state. ``source`` is the
    state the step left, ``dest`` the state that runs next (the same on a retry). Not
    called for the step that ends the turn: ``post_turn`` follows it.
``post_turn(*, session, turn, result, **future_kwargs)``
    After the turn finished — its ``turn_finished`` event emitted, its messages in the
    session's history — before ``run_turn`` returns ``result``
    (:class:`~hermes_fsm.engine.turn.TurnResult`).
``turn_failed(*, session, turn, exception, **future_kwargs)``
    The turn raised ``exception`` (it was cancelled, a hook or the store failed, or an
    engine bug): the session is back in the initial state, and the exception goes on to
    the caller once the hooks ran. It runs on cancellation too: keep it short.

Hooks run in the order given, each awaited before the next, inside the turn (their time
counts against the turn's budget). An exception from ``pre_turn``, ``post_step`` or
``post_turn`` fails the turn: the ``turn_failed`` hooks run, then it propagates. An
exception from a ``turn_failed`` hook propagates in place of the turn's (which is its
``__context__``), and the hooks after it do not run.

>>> import asyncio
>>> from hermes_fsm.testing import demo_orchestrator
>>> class Steps:
...     def __init__(self):
...         self.steps = []
...     def post_step(self, *, source, dest, **future_kwargs):
...         self.steps.append(f"{source}->{dest}")
>>> steps = Steps()
>>> _ = asyncio.run(demo_orchestrator(hooks=[steps]).run_turn("s1", "hello"))
>>> steps.steps[:2]
['IDLE->INTENT', 'INTENT->RESPONSE']
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterable
from typing import Any, Protocol

from hermes_fsm.engine.session import Session
from hermes_fsm.engine.turn import TurnContext, TurnResult
from hermes_fsm.errors import UsageError

__all__ = ["HOOK_POINTS", "PostStepHook", "PostTurnHook", "PreTurnHook", "TurnFailedHook",
           "TurnHook", "TurnHooks"]

HOOK_POINTS = ("pre_turn", "post_step", "post_turn", "turn_failed")
"""The hook points, in the order a turn reaches them."""


class PreTurnHook(Protocol):
    """A hook called before a turn's first event (see the module docs)."""

    def pre_turn(self, *, session: Session, turn: TurnContext, resumed: bool,
                 **future_kwargs: Any) -> Awaitable[None] | None: ...


class PostStepHook(Protocol):
    """A hook called after each step that does not end the turn (see the module docs)."""

    def post_step(self, *, session: Session, turn: TurnContext, source: str, dest: str,
                  **future_kwargs: Any) -> Awaitable[None] | None: ...


class PostTurnHook(Protocol):
    """A hook called after a turn finished, before its result is returned."""

    def post_turn(self, *, session: Session, turn: TurnContext, result: TurnResult,
                  **future_kwargs: Any) -> Awaitable[None] | None: ...


class TurnFailedHook(Protocol):
    """A hook called when a turn raised, before the exception goes on."""

    def turn_failed(self, *, session: Session, turn: TurnContext, exception: BaseException,
                    **future_kwargs: Any) -> Awaitable[None] | None: ...


TurnHook = PreTurnHook | PostStepHook | PostTurnHook | TurnFailedHook
"""A hook: an object with at least one of the hook methods."""


class TurnHooks:
    """Hooks sorted by point: for each point, the methods to call, in order.

    Raises:
        UsageError: an object given as a hook has none of the hook methods.
    """

    __slots__ = ("hooks", "post_step", "post_turn", "pre_turn", "turn_failed")

    def __init__(self, hooks: Iterable[TurnHook] = ()) -> None:
        self.hooks: tuple[TurnHook, ...] = tuple(hooks)
        points: dict[str, list[Any]] = {point: [] for point in HOOK_POINTS}
        for hook in self.hooks:
            found = False
            for point in HOOK_POINTS:
                method = getattr(hook, point, None)
                if callable(method):
                    points[point].append(method)
                    found = True
            if not found:
                raise UsageError(f"{hook!r} is not a turn hook: it has none of the methods "
                                 f"{', '.join(HOOK_POINTS)}; see hermes_fsm.engine.hooks")
        self.pre_turn: tuple[Any, ...] = tuple(points["pre_turn"])
        self.post_step: tuple[Any, ...] = tuple(points["post_step"])
        self.post_turn: tuple[Any, ...] = tuple(points["post_turn"])
        self.turn_failed: tuple[Any, ...] = tuple(points["turn_failed"])

    def __repr__(self) -> str:
        return f"TurnHooks({list(self.hooks)!r})"


async def call_hooks(methods: tuple[Any, ...], **kwargs: Any) -> None:
    """Call each of ``methods`` with ``kwargs``, awaiting those that return an awaitable."""
    for method in methods:
        result = method(**kwargs)
        if result is not None and inspect.isawaitable(result):
            await result
