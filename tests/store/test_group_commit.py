"""Group commit: one batch for what waits together, one write per key, shared out between
concurrent writers only when there is enough to share."""

from __future__ import annotations

import asyncio

import pytest

from hermes_fsm._internal.group_commit import GroupCommit


class Recorder:
    """A ``run`` that records its batches and holds each write until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def run(self, items: list[str]) -> list[str | BaseException]:
        self.batches.append(list(items))
        await self.gate.wait()
        return [ValueError(item) if item.startswith("bad") else item.upper()
                for item in items]


def key(item: str) -> str:
    return item.split(":")[0]


async def test_items_waiting_together_are_written_as_one_batch():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key, max_in_flight=1)
    results = await asyncio.gather(*(group.submit(f"s{i}:a") for i in range(10)))
    assert results == [f"S{i}:A" for i in range(10)]
    assert len(rec.batches) == 1 and (group.batches, group.items) == (1, 10)


async def test_items_of_one_key_never_share_a_batch_and_keep_their_order():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key, max_in_flight=1)
    await asyncio.gather(group.submit("s1:a"), group.submit("s1:b"), group.submit("s2:a"))
    assert rec.batches == [["s1:a", "s2:a"], ["s1:b"]]


async def test_an_item_s_exception_goes_to_its_caller_only():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key)
    good, bad = await asyncio.gather(group.submit("s1:ok"), group.submit("bad:x"),
                                     return_exceptions=True)
    assert good == "S1:OK" and isinstance(bad, ValueError)


async def test_many_waiting_are_shared_out_between_the_free_writers():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key, max_in_flight=2, min_batch=4)
    await asyncio.gather(*(group.submit(f"s{i}:a") for i in range(10)))
    assert sorted(len(b) for b in rec.batches) == [5, 5]


async def test_too_few_for_a_write_of_their_own_wait_for_the_busy_writer():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key, max_in_flight=2, min_batch=4)
    rec.gate.clear()
    first = [asyncio.ensure_future(group.submit(f"s{i}:a")) for i in range(4)]
    await asyncio.sleep(0)  # the first batch is being written (held at the gate)
    await asyncio.sleep(0)
    later = [asyncio.ensure_future(group.submit(f"t{i}:a")) for i in range(3)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert rec.batches == [[f"s{i}:a" for i in range(4)]]  # no second write for three
    rec.gate.set()
    await asyncio.gather(*first, *later)
    assert rec.batches[1] == [f"t{i}:a" for i in range(3)]


async def test_submit_nowait_queues_at_once_and_returns_the_future():
    rec = Recorder()
    group = GroupCommit(rec.run, key=key)
    future = group.submit_nowait("s1:a")
    assert not future.done()
    assert await future == "S1:A"


async def test_an_exception_of_the_write_itself_goes_to_every_caller():
    async def broken(items: list[str]) -> list[str | BaseException]:
        raise RuntimeError("down")

    group = GroupCommit(broken, key=key)
    with pytest.raises(RuntimeError, match="down"):
        await asyncio.gather(group.submit("s1:a"), group.submit("s2:a"))
