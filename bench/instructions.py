#!/usr/bin/env python
"""Instructions a turn, counted by valgrind: engine_overhead's workload without the noise.

    .venv/bin/python bench/instructions.py [--turns N] [--compare DIR] [--peers ...]

Timings on these machines move by tens of percent from one minute to the next (2 shared
cores); callgrind counts the instructions the CPU executes, the same from run to run
whatever else the machine does. Each peer runs bench/engine_overhead.py's seven-state
workload in a child process under ``valgrind --tool=callgrind``: once with one round of
turns and once with three, so that the difference divided by two rounds' turns is what a
turn costs, with the interpreter's start, the imports and the orchestrator's build taken
out. Two modes by default:

  * sequential  -- N turns one after another over 100 sessions (the turns/s column);
  * concurrent  -- 1,000 turns at once, one per new session, EXECUTION awaiting 10 ms
                   (the 1k x 10 ms column; CPU-bound, so its wall time is these
                   instructions).

Two more, not run unless named, take the concurrent turn apart:

  * at_once     -- the same 1,000 turns started at once, EXECUTION awaiting nothing: each
                   runs to its end in its task's first step (one turn in flight at a
                   time). concurrent − at_once is what a turn's suspension costs: its
                   resumption, the sleep's timer, and the garbage collector passing over
                   the objects of the turns in flight.
  * no_gc       -- concurrent with the garbage collector off during the rounds
                   (``gc.disable()``): concurrent − no_gc is the collector's share.

Each child says on stderr how many turns of a probe of the mode (20 turns, before the
rounds) were in flight at once, and how many collections ran
(``tests/test_bench_instructions.py`` holds the modes to what they say).

The peers ``default_off`` and ``default_on`` are engine_overhead's default turn instead
(the rules brain, the demo tools, the default graph; sessions of 15 turns of its DIALOGUE,
a user of its own each round) with the conversation graph off and on, ``default_log`` the
graph off with the session log kept (the library's default; the others keep none):
sequential only, ``--default-turns`` a round (60). ``default_long`` is the graph-off turn
of one user with a long history: 600 turns of their own first (each message made unique,
as a real user's are), then the rounds, by the same user — what recall and the
past-outcomes query cost once the experience log holds hundreds of the user's calls (not
run unless named). The children run with OpenBLAS on one
thread (``OPENBLAS_NUM_THREADS=1``): numpy's idle BLAS threads otherwise spin for a number
of instructions that depends on the machine's load (±50,000 a default turn, seen here);
and with ``PYTHONHASHSEED=0``, so that every run lays out its dicts and sets alike.

``--compare DIR`` runs the hermes-fsm peers a second time from another checkout (its
``hermes_fsm`` first on the path: ``git worktree add --detach /tmp/base <commit>``), for
the before/after of a change. Instructions are not time (a cache miss costs more than an
add): the ratios say how much work each engine does, engine_overhead.py how long it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODES = ("sequential", "concurrent", "at_once", "no_gc")
DEFAULT_MODES = ("sequential", "concurrent")
PEERS = ("hermes", "hermes_nolog", "hand", "default_off", "default_on", "default_log",
         "default_long")
LONG_HISTORY = 600
"""Turns the ``default_long`` peer's user has taken before the rounds."""
DEFAULT_PEERS = ("hermes", "hermes_nolog", "hand")
CONCURRENT = 1000
PROBE = 20
"""Turns of the probe that sees how many are in flight at once."""


def child(peer: str, mode: str, rounds: int, turns: int) -> None:
    """Run ``rounds`` rounds of ``mode`` for ``peer`` (in the process valgrind watches)."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    sys.path.insert(0, str(HERE))
    import engine_overhead as eo

    eo.EXEC_SLEEP = 0.01 if mode in ("concurrent", "no_gc") else 0.0
    if peer == "default_long":
        orchestrator = eo._default_orchestrator(False)

        async def history() -> None:
            said = eo.DIALOGUE
            for i in range(LONG_HISTORY):
                await orchestrator.run_turn(f"h-{i // 15}", f"{said[i % 6]} #{i}", "long")
            for r in range(rounds):
                for i in range(turns):
                    await orchestrator.run_turn(f"r{r}-{i // 15}", f"{said[i % 6]} #{r}.{i}",
                                                "long")

        asyncio.run(history())
        return
    if peer.startswith("default_"):
        orchestrator = eo._default_orchestrator(peer == "default_on",
                                                log=peer == "default_log")

        async def dialogue() -> None:
            for i in range(30):  # warm-up: rule caches, schemas
                await orchestrator.run_turn(f"warm-{i // 15}", eo.DIALOGUE[i % 6])
            for r in range(rounds):  # each round the same work: a user of its own (memory
                for i in range(turns):  # is per user), sessions of its own
                    await orchestrator.run_turn(f"r{r}-{i // 15}", eo.DIALOGUE[i % 6],
                                                f"user-{r}")

        asyncio.run(dialogue())
        return
    if peer == "hand":
        turn, make = eo._hand_turn, eo.Session
    else:
        options = {"event_log": False} if peer == "hermes_nolog" else {}
        orchestrator = eo._hermes_orchestrator(**options)
        turn, make = eo._hermes_turn(orchestrator), lambda sid: sid
        import hermes_fsm

        print(f"hermes_fsm from {Path(hermes_fsm.__file__).parent.parent}", file=sys.stderr)

    flight = [0, 0]  # turns in flight now, at most (in the probe)

    async def probe(session: Any) -> None:
        flight[0] += 1
        flight[1] = max(flight)
        try:
            await turn(session)
        finally:
            flight[0] -= 1

    async def run() -> None:
        # first a probe of the mode (the same in every child, so it cancels out of the
        # difference of the rounds): how many of its turns are in flight at once
        probed = [make(f"p{i}") for i in range(PROBE)]
        if mode == "sequential":
            for session in probed:
                await probe(session)
            sessions = [make(f"s{i}") for i in range(100)]
            await turn(sessions[0])  # the session's first turn is not the one measured
            for _ in range(rounds):
                for i in range(turns):
                    await turn(sessions[i % 100])
        else:
            await asyncio.gather(*(probe(s) for s in probed))
            for r in range(rounds):
                sessions = [make(f"r{r}c{i}") for i in range(CONCURRENT)]
                await asyncio.gather(*(turn(s) for s in sessions))

    collections = sum(generation["collections"] for generation in gc.get_stats())
    if mode == "no_gc":
        gc.disable()
    asyncio.run(run())
    collections = sum(generation["collections"] for generation in gc.get_stats()) - collections
    print(f"{mode}: at most {flight[1]} of {PROBE} turns in flight at once; "
          f"{collections} collections", file=sys.stderr)


def counted(peer: str, mode: str, rounds: int, turns: int, path: str | None) -> int:
    """Instructions of a child run under callgrind."""
    # no idle BLAS thread spinning; one string hash seed, so dicts and sets of strings
    # are laid out alike in every run (default_long read 7,599,054 and 8,062,861 in two
    # runs of the same code with the seed left random)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    if path is not None:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
             sys.executable, __file__, "--child", peer, mode, str(rounds), str(turns)],
            env=env, cwd=path or ROOT, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{peer} {mode} under valgrind failed ({proc.returncode}):\n"
                         + proc.stderr[-2000:])
    return int(found.group(1))


def per_turn(peer: str, mode: str, turns: int, path: str | None, pool: ThreadPoolExecutor
             ) -> float:
    one, three = pool.map(lambda rounds: counted(peer, mode, rounds, turns, path), (1, 3))
    done = 2 * (turns if mode == "sequential" else CONCURRENT)
    return (three - one) / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000,
                        help="sequential turns a round (default 1000)")
    parser.add_argument("--default-turns", type=int, default=60,
                        help="turns a round for default_off/default_on (default 60: four "
                             "sessions of 15)")
    parser.add_argument("--peers", default=",".join(DEFAULT_PEERS),
                        help=f"comma-separated subset of {','.join(PEERS)} "
                             f"(default {','.join(DEFAULT_PEERS)})")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help=f"comma-separated subset of {','.join(MODES)} "
                             f"(default {','.join(DEFAULT_MODES)})")
    parser.add_argument("--compare", metavar="DIR",
                        help="another checkout: its hermes-fsm is counted too (before/after)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        peer, mode, rounds, turns = args.child
        child(peer, mode, int(rounds), int(turns))
        return
    peers = [p for p in args.peers.split(",") if p]
    modes = [m for m in args.modes.split(",") if m]
    for name in (*peers, *modes):
        if name not in (*PEERS, *MODES):
            raise SystemExit(f"unknown peer or mode {name!r}; peers: {', '.join(PEERS)}; "
                             f"modes: {', '.join(MODES)}")
    compare = str(Path(args.compare).resolve()) if args.compare else None
    if compare is not None and not (Path(compare) / "hermes_fsm").is_dir():
        raise SystemExit(f"--compare {args.compare}: no hermes_fsm package there")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind); "
                         "this benchmark counts instructions with its callgrind tool")
    rows: list[tuple[str, str, float]] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for mode in modes:
            for peer in peers:
                if peer.startswith("default_") and mode != "sequential":
                    continue
                turns = args.default_turns if peer.startswith("default_") else args.turns
                rows.append((peer, mode, per_turn(peer, mode, turns, str(ROOT), pool)))
                if compare is not None and peer != "hand":
                    rows.append((f"{peer} @ {args.compare}", mode,
                                 per_turn(peer, mode, turns, compare, pool)))
    hand = {mode: n for peer, mode, n in rows if peer == "hand"}
    off = {label.replace("default_off", ""): n for label, _, n in rows
           if label.startswith("default_off")}
    print(f"instructions a turn (callgrind; python {sys.version.split()[0]}; "
          f"{args.turns} sequential turns a round, {CONCURRENT} concurrent, "
          f"{args.default_turns} default turns)")
    print(f"| {'peer':40} | {'mode':10} | {'instructions':>12} | {'÷ hand':>7} |")
    print(f"|{'-' * 42}|{'-' * 12}|{'-' * 14}|{'-' * 9}|")
    for peer, mode, n in rows:
        ratio = f"{n / hand[mode]:.2f}×" if mode in hand else "-"
        if peer.startswith("default_"):  # against the same checkout's graph-off turn
            base = off.get(peer.replace("default_on", "").replace("default_off", "")
                           .replace("default_log", ""))
            ratio = f"{n / base:.3f}× off" if base else "-"
        print(f"| {peer:40} | {mode:10} | {n:12,.0f} | {ratio:>7} |")


if __name__ == "__main__":
    main()
