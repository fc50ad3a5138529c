"""Replay throughput: `replay validate` and `replay rerun` over a corpus of recorded turns.

    .venv/bin/python bench/replay.py [--turns 10000] [--per-session 10] [--repeat 3]
                                     [--keep DIR | --corpus DIR]

Makes a corpus by running real turns (the bundled graph, the rules brain, the demo
tools; English and Chinese questions, reminders, preferences) and recording each session
to JSONL (``--corpus DIR`` reuses one made with ``--keep DIR``), then times, on one core
(pinned to CPU 0 where possible), streamed like ``hermes-fsm replay`` (read a recording,
replay it, drop it):

- read + parse: reading every recording and parsing every event (a reference);
- validate: re-validating every recorded state output, tool input and tool output
  against today's contracts;
- rerun: driving today's graph with the recorded outputs, offline, and comparing events,
  through ``Replayer.rerun_all`` as ``hermes-fsm replay rerun`` does (one event loop, the
  garbage collector tuned for the batch, no contexts built: see ``hermes_fsm.replay.replayer``).
  Its time is split into the engine (``run_turn``: today's graph and handlers, with the
  replay brain, tools and memory) and the replay side (reading, indexing, comparing).

Figures are turns per second of CPU time (``time.process_time``, best of ``--repeat``):
other processes on the machine do not count against them; wall-clock figures are printed
beside them. Targets (issue 6): validate ≥ 5,000 turns/s, rerun ≥ 2,000 turns/s.
No assertions: this prints figures.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http` (which httpx, langgraph and others import): drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(1, str(_ROOT))

from hermes_fsm import Replayer
from hermes_fsm.events.recording import load_recording, recording_text
from hermes_fsm.testing import demo_orchestrator

QUESTIONS = [
    "How many A1001 are left in the east warehouse?",
    "SKU A1002 在华北仓还有多少库存?",
    "How many B2001 do we have in total?",
    "C3001 在华南仓还有多少?",
    "Remind me to call Bob tomorrow at 9",
    "What are my reminders?",
    "I prefer email",
    "hello",
    "How many B2002 in the west warehouse?",
    "谢谢",
]

TARGETS = {"validate": 5_000, "rerun": 2_000}


async def make_corpus(directory: Path, turns: int, per_session: int) -> int:
    orchestrator = demo_orchestrator()
    sessions = max(1, turns // per_session)
    for s in range(sessions):
        sid = f"bench-{s:05d}"
        for t in range(per_session):
            await orchestrator.run_turn(sid, QUESTIONS[(s + t) % len(QUESTIONS)],
                                        user_id=f"user-{s % 97}")
        (directory / f"{sid}.jsonl").write_text(recording_text(orchestrator, sid),
                                                encoding="utf-8")
        orchestrator.session_cache.discard(sid)
    return sessions * per_session


def timed(run: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best CPU seconds and best wall seconds of ``repeat`` runs, and the last result."""
    cpu = wall = float("inf")
    result = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = run()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each step")
    parser.add_argument("--keep", type=Path, help="keep the corpus in this directory")
    parser.add_argument("--corpus", type=Path,
                        help="reuse the corpus in this directory (made with --keep)")
    args = parser.parse_args()
    try:
        os.sched_setaffinity(0, {0})
        pinned = "pinned to CPU 0"
    except (AttributeError, OSError):
        pinned = "not pinned"
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs, {pinned}; load average {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        if args.corpus is not None:
            directory = args.corpus
            print(f"corpus: reusing {directory}")
        else:
            directory = args.keep or Path(tmp)
            directory.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            asyncio.run(make_corpus(directory, args.turns, args.per_session))
            print(f"corpus: recorded in {time.perf_counter() - started:.1f}s")
        files = sorted(directory.glob("bench-*.jsonl"))
        if not files:
            sys.exit(f"no bench-*.jsonl recordings in {directory}")
        size = sum(f.stat().st_size for f in files)
        replayer = Replayer()

        def parse_all() -> tuple[int, int]:
            turns = events = 0
            for f in files:
                recording = load_recording(f, lazy=True)
                turns += len(recording.raw_turns())
                events += len(recording.raw)
            return turns, events

        def validate_all() -> int:
            return sum(not replayer.validate(load_recording(f, lazy=True),
                                             raise_on_failure=False).ok for f in files)

        # The rerun's engine time: every run_turn of the replayer's one orchestrator.
        engine = [0.0]
        orchestrator = replayer._orchestrator()
        run_turn = orchestrator.run_turn

        async def counted_turn(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await run_turn(*args, **kwargs)
            finally:
                engine[0] += time.process_time() - started

        orchestrator.run_turn = counted_turn

        engine_s: list[float] = []

        def rerun_all() -> int:  # as `hermes-fsm replay rerun` does: Replayer.rerun_all
            engine[0] = 0.0
            bad = sum(not result.ok for result in replayer.rerun_all(files))
            engine_s.append(engine[0])
            return bad

        validate_all()  # warm-up: imports, compiled validators, the rerun's orchestrator
        list(replayer.rerun_all(files[:1]))
        parse_cpu, parse_wall, (total, events) = timed(parse_all, args.repeat)
        validate_cpu, validate_wall, validate_bad = timed(validate_all, args.repeat)
        rerun_cpu, rerun_wall, rerun_bad = timed(rerun_all, args.repeat)

    print(f"corpus: {total:,} turns in {len(files):,} recordings, {events:,} events "
          f"({events / total:.1f} per turn), {size / 1e6:.1f} MB ({size / total / 1e3:.1f} "
          "KB per turn)")
    print(f"CPU time of this process (time.process_time), best of {args.repeat}; wall "
          "clock beside it")
    rows = [("read + parse only", parse_cpu, parse_wall, None, ""),
            ("validate (read + check)", validate_cpu, validate_wall, "validate", validate_bad),
            ("rerun (read + run + diff)", rerun_cpu, rerun_wall, "rerun", rerun_bad)]
    print("| step                      | CPU s | turns/s CPU | µs/turn | turns/s wall "
          "| target  | ÷ target | failed |")
    print("|---------------------------|-------|-------------|---------|--------------"
          "|---------|----------|--------|")
    for name, cpu, wall, mode, bad in rows:
        rate = total / cpu
        target = TARGETS.get(mode or "")
        versus = f"{rate / target:.2f}×" if target else ""
        goal = f"≥ {target:,}" if target else ""
        print(f"| {name:<25} | {cpu:5.2f} | {rate:11,.0f} | {cpu / total * 1e6:7.0f} | "
              f"{total / wall:12,.0f} | {goal:>7} | {versus:>8} | {bad!s:>6} |")
    engine_cpu = min(engine_s)
    side = rerun_cpu - engine_cpu
    print(f"rerun split (CPU, µs/turn): engine {engine_cpu / total * 1e6:.0f} (today's graph "
          f"and handlers: run_turn), replay side {side / total * 1e6:.0f} (read, index, "
          "compare)")


if __name__ == "__main__":
    main()
