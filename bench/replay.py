"""Replay throughput: `replay validate` and `replay rerun` over a corpus of recorded turns.

    .venv/bin/python bench/replay.py [--turns 10000] [--per-session 10] [--keep DIR]

Makes a corpus by running real turns (the bundled graph, the rules brain, the demo
tools; English and Chinese questions, reminders, preferences) and recording each session
to JSONL, then times, on one core (pinned to CPU 0 where possible):

- parse: reading every recording (header + events);
- validate: re-validating every state output and tool input against today's contracts;
- rerun: driving today's graph with the recorded outputs, offline, and comparing events.

Prints turns/s for each; targets (issue 6): validate ≥ 5,000 turns/s, rerun ≥ 2,000.
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
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(1, str(_ROOT))

from hermes_fsm import Orchestrator
from hermes_fsm.recording import load_recording, recording_text
from hermes_fsm.replay import Replayer

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


async def make_corpus(directory: Path, turns: int, per_session: int) -> int:
    orchestrator = Orchestrator()
    sessions = max(1, turns // per_session)
    for s in range(sessions):
        sid = f"bench-{s:05d}"
        for t in range(per_session):
            await orchestrator.run_turn(sid, QUESTIONS[(s + t) % len(QUESTIONS)],
                                        user_id=f"user-{s % 97}")
        (directory / f"{sid}.jsonl").write_text(recording_text(orchestrator, sid),
                                                encoding="utf-8")
        del orchestrator.sessions()[sid]  # type: ignore[attr-defined]
    return sessions * per_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="keep the corpus in this directory")
    args = parser.parse_args()
    try:
        os.sched_setaffinity(0, {0})
        pinned = "pinned to CPU 0"
    except (AttributeError, OSError):
        pinned = "not pinned"
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs, {pinned}")

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        total = asyncio.run(make_corpus(directory, args.turns, args.per_session))
        files = sorted(directory.glob("bench-*.jsonl"))
        size = sum(f.stat().st_size for f in files)
        print(f"corpus: {total:,} turns in {len(files):,} recordings, {size / 1e6:.1f} MB, "
              f"recorded in {time.perf_counter() - started:.1f}s")

        # Streamed like `hermes-fsm replay` does: read one recording, replay it, drop it.
        replayer = Replayer()
        started = time.perf_counter()
        events = sum(len(load_recording(f, lazy=True).raw) for f in files)
        parse_s = time.perf_counter() - started

        started = time.perf_counter()
        validate_bad = sum(
            not replayer.validate(load_recording(f, lazy=True), raise_on_failure=False).ok
            for f in files)
        validate_s = time.perf_counter() - started

        async def rerun_all() -> int:
            bad = 0
            for f in files:
                result = await replayer.arerun(load_recording(f, lazy=True),
                                               raise_on_failure=False)
                bad += not result.ok
            return bad

        started = time.perf_counter()
        rerun_bad = asyncio.run(rerun_all())
        rerun_s = time.perf_counter() - started

    print(f"events: {events:,} ({events / total:.1f} per turn)")
    rows = [("read + parse only", parse_s, "", ""),
            ("validate (read + check)", validate_s, "≥ 5,000", validate_bad),
            ("rerun (read + run + diff)", rerun_s, "≥ 2,000", rerun_bad)]
    print("| step                      | seconds | turns/s | target  | failed |")
    print("|---------------------------|---------|---------|---------|--------|")
    for name, seconds, target, bad in rows:
        print(f"| {name:<25} | {seconds:7.2f} | {total / seconds:7,.0f} | {target:>7} | "
              f"{bad!s:>6} |")


if __name__ == "__main__":
    main()
