#!/usr/bin/env python
"""Where a turn's time goes: engine_overhead.py's workload under a sampling profiler.

    .venv/bin/python bench/profile_turn.py [--peer hermes|hermes_nolog|hand|tool]
                                           [--mode sequential|concurrent] [--seconds 20]
                                           [--rate 1000] [--top 20] [--raw FILE]

The peer (``hermes``, ``hermes_nolog``: hermes-fsm without its in-process session log,
``hand``: the hand-written loop) runs bench/engine_overhead.py's seven-state workload in a
child process pinned to one CPU — ``sequential``: turns one after another over 100
sessions; ``concurrent``: rounds of 1,000 turns at once, EXECUTION awaiting 10 ms; the
peer ``tool`` runs bench/tool_overhead.py's ``executor+events`` row instead (a local tool
called through ``ToolExecutor.execute`` with a real turn's events) — while
py-spy (``pip install py-spy``, in the bench extra) samples its stack ``--rate`` times a
second. Sampling leaves the code as it is (cProfile's per-call hook costs more than most
of the functions it times here); py-spy pauses the child for each sample (its default:
consistent stacks), so the turns per CPU-second printed under it are lower than
engine_overhead.py's. What it cannot see is what runs in C: a pydantic validation or
serialization counts on the Python line that called it, and so does the garbage collector,
on the line whose allocation set it off (in the concurrent mode a third of the turn once
showed up on a loop header of ``GraphMachine.fire`` that way). So the child times the
collector itself (``gc.callbacks``, CPU time from each collection's start to its stop) and
the header says what share of the measured CPU time it took. (py-spy's ``--native`` would
name it in the stacks, but its unwinding stops the child for so long here — four minutes
for a 15-second profile, most of it the kernel's — that the shares no longer describe the
turn.) Shares move by a point or two from one run to the next; a syscall (``os.urandom``
for a turn's id) tends to be over-counted by a sampler that stops the process.

Printed, over the samples taken inside the turn (warm-up and setup left out): the turn's
time by engine part (each sample goes to the innermost frame that a part's rule names:
the contract validation is the line that calls the contract's validator, the session log
what writes each turn's events as JSON, and so on; ``other`` is what no rule names), then
the functions with the most time of their own and the line of each that has the most.
``--raw FILE`` keeps py-spy's raw stacks (flamegraph.pl reads them). No assertions: it
prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS = ("hermes", "hermes_nolog", "hand", "tool")
MODES = ("sequential", "concurrent")
CONCURRENT = 1000
ROOTS = {"hermes": "_hermes_turn.<locals>.turn", "hermes_nolog": "_hermes_turn.<locals>.turn",
         "hand": "_hand_turn", "tool": "ToolExecutor.execute"}
HANDLERS = ("h_intent", "h_planning", "h_execution", "h_result", "h_response",
            "h_memory_commit")

# Each part of a turn and the frames that count in it: (function, text on the sample's
# line or None). The first rule naming a frame, from the innermost frame outwards, takes
# the sample; rules are tried in this order (a line's rule before its function's).
PARTS: tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...] = (
    ("handlers (the workload's)", tuple((name, None) for name in HANDLERS)),
    ("contract validation (the workload's)", (
        ("Orchestrator._run_state", "fast(raw"), ("Orchestrator._validate", "validate_output("),
        ("_hand_turn", "model_validate("))),
    ("session log: the outputs' JSON", (
        ("TurnContext.emit_output", "to_json(output)"),
        ("TurnContext.emit_output", "to_python(output"))),
    ("session log: the turn's JSON, kept", (("Session.record", None),)),
    ("transitions: guard, exit and entry events", (
        ("GraphMachine.fire", None), ("TurnContext.on_transition", None))),
    ("events: the turn's, the outputs', the tool calls'", (
        ("TurnContext.emit_output", None), ("TurnContext.emit_started", None),
        ("TurnContext.emit_finished", None), ("TurnContext.emit", None),
        ("ToolExecutor._run_one", "emit("))),
    ("accepting an output (turn.outputs, the validation context)",
     (("TurnContext.accept", None),)),
    ("a new turn (its context, its id)", (("Orchestrator.new_turn", None),)),
    ("finishing (the result, the history)", (("Orchestrator._finish", None),)),
    ("the input's token check", (("ContextBuilder.check_input", None),)),
    ("time limits (a handler that suspends)", (("resume_within", None),)),
    ("the state loop (handler calls, plan, checks)", (
        ("Orchestrator._run_state", None), ("Orchestrator.drive_turn", None),
        ("Orchestrator.run_turn", None), ("Orchestrator.session", None))),
    ("the hand loop", (("_hand_turn", None),)),
    # a tool call (--peer tool)
    ("the tool itself", (("lookup", None),)),
    ("the arguments' check (the tool's schema)", (("Tool.argument_problem", None),)),
    ("the output's checks (JSON-able, depth, size)", (
        ("ToolExecutor._unstorable", None), ("Tool.output_problem", None),
        ("ToolExecutor._truncate", None))),
    ("the executor (lookup, permission, breaker, outcome)", (
        ("ToolExecutor._run_one", None), ("ToolExecutor._outcome", None),
        ("ToolExecutor._attempt", None), ("ToolExecutor.execute", None))),
)
RULES: tuple[tuple[str, str, str | None], ...] = tuple(
    (part, function, text) for part, frames in PARTS for function, text in frames)

_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>.*):(?P<line>\d+)\)$")


class Collector:
    """The garbage collector's CPU time and collections while :attr:`on`, timed by a
    ``gc.callbacks`` entry (from each collection's start to its stop)."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0
        gc.callbacks.append(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections += 1

    def says(self, cpu: float) -> str:
        """What the collector took of ``cpu`` seconds, for the child's last line."""
        share = 100 * self.seconds / cpu if cpu > 0 else 0.0
        return (f"the garbage collector {share:.1f} % of that CPU time "
                f"({self.collections} collections)")


def child(peer: str, mode: str, seconds: float) -> None:
    """Run ``peer``'s turns for ``seconds`` (in the process py-spy samples).

    The concurrent mode runs as engine_overhead.py's 1k × 10 ms scenario does: each round
    on a new orchestrator (the hand loop: new sessions), its 1,000 sessions made and the
    collector run before the round; only the rounds' CPU time counts. (On one orchestrator
    the sessions of every round stay in its cache, and the collector's full passes over
    them grow round by round: a profile of a growing heap, not of the turn.)
    """
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    sys.path.insert(0, str(HERE))
    import engine_overhead as eo

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    eo.EXEC_SLEEP = 0.01 if mode == "concurrent" else 0.0
    collector = Collector()
    if peer == "tool":
        _tool_calls(seconds, collector)
        return

    def fresh() -> tuple[Any, Any]:
        """The peer's turn function and how it makes a session, on a new orchestrator."""
        if peer == "hand":
            return eo._hand_turn, eo.Session
        orchestrator = eo._hermes_orchestrator(**({"event_log": False}
                                                  if peer == "hermes_nolog" else {}))
        return eo._hermes_turn(orchestrator), (
            lambda sid: orchestrator.session(sid).session_id)

    async def run() -> tuple[int, float]:
        turn, make = fresh()
        sessions = [make(f"s{i}") for i in range(100)]
        for i in range(200):  # warm-up: caches, schemas, first turns of each session
            await turn(sessions[i % 100])
        turns, cpu, started = 0, 0.0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            if mode == "sequential":
                begun, collector.on = time.process_time(), True
                for i in range(1000):
                    await turn(sessions[i % 100])
                turns += 1000
            else:
                turn, make = fresh()
                batch = [make(f"c{i}") for i in range(CONCURRENT)]
                gc.collect()
                begun, collector.on = time.process_time(), True
                await asyncio.gather(*(turn(s) for s in batch))
                turns += CONCURRENT
            cpu += time.process_time() - begun
            collector.on = False
        return turns, cpu

    turns, cpu = asyncio.run(run())
    print(f"{turns} turns, {turns / cpu:,.0f} turns per CPU-second under the profiler; "
          f"{collector.says(cpu)}", file=sys.stderr)


def _tool_calls(seconds: float, collector: Collector) -> None:
    """bench/tool_overhead.py's ``executor+events`` row, for ``seconds``."""
    sys.path.insert(0, str(HERE))  # engine_overhead took this folder off the path
    import tool_overhead as to

    from hermes_fsm.tools.executor import ToolExecutor
    from hermes_fsm.tools.registry import ToolRegistry

    registry = ToolRegistry()
    registry.tool(inline=True)(to.lookup)
    executor = ToolExecutor(registry)
    calls = [("c1", "lookup", {"sku": "A1001", "warehouse": "east"})]
    turns = to.TurnEvents(registry, executor)

    async def run() -> tuple[int, float]:
        done, started, cpu = 0, time.perf_counter(), time.process_time()
        collector.on = True
        while done < 2000 or time.perf_counter() - started < seconds:
            for emit in turns.emitters(2000):  # a new turn's context every 20 calls
                await executor.execute(calls, emit, "alice")
            done += 2000
        return done, time.process_time() - cpu

    done, cpu = asyncio.run(run())
    print(f"{done} calls, {done / cpu:,.0f} calls per CPU-second under the profiler; "
          f"{collector.says(cpu)}", file=sys.stderr)


def read_raw(lines: Iterable[str]) -> list[tuple[list[tuple[str, str, int]], int]]:
    """py-spy's raw format (``frame;frame;... count``, outermost first) as stacks of
    ``(function, file, line)``, innermost last, with their sample counts."""
    stacks = []
    for text in lines:
        stack, _, count = text.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for frame in stack.split(";"):
            match = _FRAME.match(frame)
            if match is None:
                frames.append((frame, "", 0))
            else:
                frames.append((match["name"], match["file"], int(match["line"])))
        stacks.append((frames, int(count)))
    return stacks


def _source(file: str, line: int) -> str:
    return linecache.getline(file, line).strip() if file and line else ""


def part_of(frames: Sequence[tuple[str, str, int]]) -> str:
    """The part of the turn a sample (its frames, innermost last) counts in."""
    for name, file, line in reversed(frames):
        for part, function, text in RULES:
            if name == function and (text is None or text in _source(file, line)):
                return part
    return "other"


def report(stacks: Sequence[tuple[list[tuple[str, str, int]], int]], root: str,
           top: int = 20) -> str:
    """The samples taken inside ``root`` (the turn function): by part, then by function."""
    parts: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    lines: dict[str, collections.Counter[tuple[str, int]]] = collections.defaultdict(
        collections.Counter)
    total = outside = 0
    for frames, count in stacks:
        names = [name for name, _, _ in frames]
        if root not in names:
            outside += count
            continue
        inner = frames[names.index(root):]
        total += count
        parts[part_of(inner)] += count
        name, file, line = inner[-1]
        own[name] += count
        lines[name][(file, line)] += count
    if not total:
        return f"no sample inside {root} (of {outside}): was the profile too short?"
    out = [f"{total:,} samples inside {root}, {outside:,} outside it "
           "(start, imports, setup, warm-up)", "", "| part | share |", "|---|---:|"]
    out += [f"| {part} | {100 * n / total:.1f} % |" for part, n in parts.most_common()]
    out += ["", "| function (time of its own) | share | its hottest line |", "|---|---:|---|"]
    for name, n in own.most_common(top):
        (file, line), _ = lines[name].most_common(1)[0]
        where = f"{Path(file).name}:{line} `{_source(file, line)[:60]}`" if line else ""
        out.append(f"| {name} | {100 * n / total:.1f} % | {where} |")
    return "\n".join(out)


def _py_spy(given: str | None) -> str:
    if given is not None:
        if not (Path(given).is_file() and os.access(given, os.X_OK)):
            raise SystemExit(f"--py-spy {given}: not an executable file")
        return given
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.is_file() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy (or the "
                         "bench extra, .venv/bin/pip install -e '.[bench]')")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", default="hermes", choices=PEERS)
    parser.add_argument("--mode", default="sequential", choices=MODES,
                        help="how the turns run (the peer tool: calls one after another)")
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="how long the turns run (default 20)")
    parser.add_argument("--rate", type=int, default=1000, help="samples a second (default 1000)")
    parser.add_argument("--top", type=int, default=20, help="functions listed (default 20)")
    parser.add_argument("--raw", metavar="FILE", help="keep py-spy's raw stacks there")
    parser.add_argument("--py-spy", dest="py_spy", metavar="PATH",
                        help="the py-spy executable (default: beside this Python, or on PATH)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], float(args.child[2]))
        return
    if args.seconds <= 0 or args.rate <= 0:
        raise SystemExit("--seconds and --rate must be above 0")
    py_spy = _py_spy(args.py_spy)
    with tempfile.TemporaryDirectory() as tmp:
        raw = args.raw or str(Path(tmp) / "stacks.raw")
        command = [py_spy, "record", "--rate", str(args.rate), "--format", "raw",
                   "--full-filenames", "--output", raw, "--", sys.executable,
                   str(Path(__file__).resolve()), "--child", args.peer, args.mode,
                   str(args.seconds)]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not Path(raw).is_file():
            raise SystemExit(f"py-spy failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        ran = [line for line in proc.stderr.splitlines() if "per CPU-second" in line]
        if not ran:  # py-spy's own exit says nothing of the child's
            raise SystemExit(f"the profiled child failed:\n{proc.stderr[-2000:]}")
        print(f"{args.peer}, {args.mode}, {args.seconds:g} s at {args.rate} samples a second "
              f"(python {sys.version.split()[0]}); {ran[-1]}")
        with open(raw, encoding="utf-8") as stacks:
            print(report(read_raw(stacks), ROOTS[args.peer], args.top))


if __name__ == "__main__":
    main()
