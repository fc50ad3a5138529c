"""hermes_fsm._internal.time_limits: held to asyncio.timeout's outcomes, scenario by scenario.

Each scenario runs once with ``within`` and once with the reference (``async with
asyncio.timeout(s): return await aw``) and both must end the same way: the same result or
the same exception type, the same events seen inside, the same cancellation count left
on the task. Then what only ``within`` has: no timer for a coroutine that never suspends,
one loop timer for many limits, a heap that stays bounded and keeps no finished task.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hermes_fsm._internal import time_limits
from hermes_fsm._internal.time_limits import within

Limiter = Callable[[Awaitable[Any], float | None], Awaitable[Any]]


async def reference(awaitable: Awaitable[Any], seconds: float | None) -> Any:
    async with asyncio.timeout(seconds):
        return await awaitable


LIMITERS = [pytest.param(within, id="within"), pytest.param(reference, id="asyncio.timeout")]


def timers() -> time_limits._Timers:
    return time_limits._timers(asyncio.get_running_loop())


async def outcome(coro: Awaitable[Any]) -> tuple[str, Any, int]:
    """How awaiting ``coro`` in a task of its own ended, and the task's cancellation count."""
    async def run() -> Any:
        return await coro

    task = asyncio.ensure_future(run())
    try:
        value: Any = await asyncio.shield(task)
        how = "value"
    except BaseException as exc:  # the outcome is what is compared
        await asyncio.sleep(0)
        how, value = type(exc).__name__, None
        if task.done() and not task.cancelled() and task.exception() is not None:
            how = type(task.exception()).__name__
    return how, value, task.cancelling()


async def sleeper(seconds: float, seen: list[str], value: str = "done") -> str:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        seen.append("cancelled")
        raise
    seen.append("finished")
    return value


def same_outcomes(scenario: Callable[[Limiter, list[str]], Awaitable[Any]]
                  ) -> tuple[tuple[Any, list[str]], tuple[Any, list[str]]]:
    """Run ``scenario(limiter, seen)`` under each limiter, each in a new loop."""
    results = []
    for limiter in (within, reference):
        seen: list[str] = []
        results.append((asyncio.run(outcome(scenario(limiter, seen))), seen))
    return results[0], results[1]


async def _expires(limit: Limiter, seen: list[str]) -> Any:
    return await limit(sleeper(1.0, seen), 0.02)


async def _finishes(limit: Limiter, seen: list[str]) -> Any:
    return await limit(sleeper(0.01, seen, "ok"), 1.0)


async def _no_limit(limit: Limiter, seen: list[str]) -> Any:
    return await limit(sleeper(0.01, seen, "free"), None)


async def _zero(limit: Limiter, seen: list[str]) -> Any:
    return await limit(sleeper(0.01, seen), 0)


async def _raises_after_suspending(limit: Limiter, seen: list[str]) -> Any:
    async def fails() -> None:
        await asyncio.sleep(0.01)
        seen.append("raising")
        raise ValueError("inside")
    return await limit(fails(), 1.0)


async def _inner_expires_first(limit: Limiter, seen: list[str]) -> Any:
    async def inner() -> str:
        try:
            await limit(sleeper(1.0, seen), 0.02)
        except TimeoutError:
            seen.append("inner timed out")
        return await sleeper(0.01, seen, "outer went on")
    return await limit(inner(), 1.0)


async def _nested(limit: Limiter, seen: list[str], inner_s: float, outer_s: float) -> Any:
    async def inner() -> Any:
        try:
            return await limit(sleeper(1.0, seen), inner_s)
        except TimeoutError:
            seen.append("the inner limit ran out")  # not when the outer one runs out first
            raise
    return await limit(inner(), outer_s)


async def _outer_expires_first(limit: Limiter, seen: list[str]) -> Any:
    return await _nested(limit, seen, 5.0, 0.02)


async def _both_expire_together(limit: Limiter, seen: list[str]) -> Any:
    return await _nested(limit, seen, 0.02, 0.02)


async def _cancelled_from_outside(limit: Limiter, seen: list[str]) -> Any:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().call_later(0.01, task.cancel)
    return await limit(sleeper(1.0, seen), 0.5)


async def _cancelled_as_it_expires(limit: Limiter, seen: list[str]) -> Any:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().call_later(0.02, task.cancel)
    return await limit(sleeper(1.0, seen), 0.02)


async def _limit_ended_before_its_time(limit: Limiter, seen: list[str]) -> Any:
    value = await limit(sleeper(0.005, seen, "early"), 0.03)
    await asyncio.sleep(0.06)  # past the first limit's time: nothing may cancel this task
    seen.append("slept past it")
    return value


async def _a_future(limit: Limiter, seen: list[str]) -> Any:
    future = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, future.set_result, "from a future")
    return await limit(future, 1.0)


async def _a_future_that_never_resolves(limit: Limiter, seen: list[str]) -> Any:
    return await limit(asyncio.get_running_loop().create_future(), 0.02)


async def _sequential_limits(limit: Limiter, seen: list[str]) -> Any:
    values = [await limit(sleeper(0.002, seen, str(i)), 0.05) for i in range(5)]
    try:
        await limit(sleeper(1.0, seen), 0.02)
    except TimeoutError:
        values.append("timed out")
    values.append(await limit(sleeper(0.002, seen, "after"), 0.05))
    return values


async def _a_later_limit_outlives_an_earlier_one(limit: Limiter, seen: list[str]) -> Any:
    async def short() -> Any:
        try:
            return await limit(sleeper(1.0, seen), 0.02)
        except TimeoutError:
            return "short timed out"
    later = asyncio.ensure_future(limit(sleeper(0.1, seen, "long finished"), 0.3))
    first = await short()  # its timer fires while the later limit still has 0.28 s
    return first, await later


async def _a_lagging_loop(limit: Limiter, seen: list[str]) -> Any:
    async def guarded(sleep_s: float, limit_s: float, name: str) -> Any:
        try:
            return await limit(sleeper(sleep_s, seen, name), limit_s)
        except TimeoutError:
            return f"{name} timed out"
    overdue = asyncio.ensure_future(guarded(0.05, 0.02, "overdue"))
    in_time = asyncio.ensure_future(guarded(0.01, 0.3, "in time"))
    await asyncio.sleep(0)  # both started
    time.sleep(0.1)  # the loop lags: both sleeps and the first limit are past their time
    return await overdue, await in_time  # only a limit whose time has passed ends


SCENARIOS = [_expires, _finishes, _no_limit, _zero, _raises_after_suspending,
             _inner_expires_first, _outer_expires_first, _both_expire_together,
             _cancelled_from_outside, _cancelled_as_it_expires,
             _limit_ended_before_its_time, _a_future, _a_future_that_never_resolves,
             _sequential_limits, _a_later_limit_outlives_an_earlier_one,
             _a_lagging_loop]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__.strip("_") for s in SCENARIOS])
def test_within_ends_every_scenario_as_asyncio_timeout_does(scenario: Any) -> None:
    ours, theirs = same_outcomes(scenario)
    assert ours == theirs


def test_the_scenarios_tell_the_outcomes_apart() -> None:
    """The comparison above is not vacuous: the scenarios end in different ways."""
    ends = {scenario.__name__: same_outcomes(scenario)[1][0][0] for scenario in SCENARIOS}
    assert ends["_expires"] == "TimeoutError"
    assert ends["_finishes"] == "value"
    assert ends["_raises_after_suspending"] == "ValueError"
    assert ends["_cancelled_from_outside"] == "CancelledError"
    assert ends["_outer_expires_first"] == "TimeoutError"


async def test_a_coroutine_that_never_suspends_runs_with_no_timer() -> None:
    async def immediate() -> int:
        return 42

    state = timers()
    pushed = next(state.count)
    assert await within(immediate(), 0.001) == 42
    assert next(state.count) == pushed + 1  # no limit was started in between
    assert state.handle is None and not state.heap


@pytest.mark.parametrize("limiter", LIMITERS)
async def test_a_coroutine_that_raises_at_once_raises_its_own_error(limiter: Limiter) -> None:
    async def broken() -> None:
        raise KeyError("at once")

    with pytest.raises(KeyError, match="at once"):
        await limiter(broken(), 0.01)


async def test_many_limits_share_one_loop_timer_armed_for_the_earliest() -> None:
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    slow = [asyncio.ensure_future(within(sleeper(10, seen), 5 + i)) for i in range(50)]
    await asyncio.sleep(0)
    state = timers()
    assert state.handle is not None and state.handle() is not None and len(state.heap) == 50
    assert state.armed == min(entry[0] for entry in state.heap)
    armed = state.armed
    # a shorter limit started later re-arms the timer for itself, and runs out in time
    started = loop.time()
    with pytest.raises(TimeoutError):
        await within(sleeper(10, seen), 0.02)
    assert loop.time() - started < 1.0
    assert state.armed == armed  # back on the earliest of the 50
    for task in slow:
        task.cancel()
    results = await asyncio.gather(*slow, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)


async def test_the_heap_is_compacted_and_keeps_no_finished_task() -> None:
    seen: list[str] = []
    state = timers()
    long_lived = asyncio.ensure_future(within(sleeper(10, seen), 60))
    await asyncio.sleep(0)

    async def short() -> Any:
        return await within(sleeper(0.001, seen, "short"), 60)

    tasks = [asyncio.ensure_future(short()) for _ in range(500)]
    assert set(await asyncio.gather(*tasks)) == {"short"}
    assert len(state.heap) <= 2 * 1 + 65  # one live limit; the rest compacted away
    held = [entry[2].task for entry in state.heap if entry[2].task is not None]
    assert len(held) == 1 and not held[0].done()  # the heap holds no finished task
    long_lived.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long_lived


async def test_a_timer_that_finds_only_ended_limits_arms_nothing() -> None:
    seen: list[str] = []
    state = timers()
    assert await within(sleeper(0.001, seen, "quick"), 0.01) == "quick"
    assert state.handle is not None and state.handle() is not None  # armed still
    await asyncio.sleep(0.03)
    assert state.handle is None and not state.heap and state.dead == 0


def test_each_event_loop_has_its_own_timers_and_a_closed_one_is_let_go() -> None:
    seen_loops: list[weakref.ref[Any]] = []

    async def one() -> Any:
        seen_loops.append(weakref.ref(asyncio.get_running_loop()))
        return await within(sleeper(0.001, [], "x"), 1), id(timers())

    first = asyncio.run(one())
    second = asyncio.run(one())
    assert first[0] == second[0] == "x"
    gc.collect()
    assert seen_loops[0]() is None and seen_loops[1]() is None  # let go, with their timers


async def test_a_limit_needs_a_task() -> None:
    async def suspends() -> None:
        await asyncio.sleep(0)

    coro = suspends()
    yielded = coro.send(None)
    resumed = time_limits.resume_within(coro, yielded, 1.0)
    loop = asyncio.get_running_loop()
    # run the coroutine with the loop running but outside any task: a loop callback
    failures: list[BaseException] = []

    def step() -> None:
        try:
            resumed.send(None)
        except BaseException as exc:  # recorded and checked below
            failures.append(exc)

    loop.call_soon(step)
    await asyncio.sleep(0.01)
    coro.close()
    assert len(failures) == 1 and isinstance(failures[0], RuntimeError)
    assert "needs a task" in str(failures[0])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__.strip("_") for s in SCENARIOS])
def test_within_ends_every_scenario_as_asyncio_timeout_does_on_uvloop(scenario: Any) -> None:
    """The same on uvloop, the loop `hermes-fsm serve` runs on (its own timer handles)."""
    uvloop = pytest.importorskip("uvloop", reason="uvloop is in the serve extra; not installed")
    ends = []
    for limiter in (within, reference):
        seen: list[str] = []
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            ends.append((runner.run(outcome(scenario(limiter, seen))), seen))
    assert ends[0] == ends[1]
