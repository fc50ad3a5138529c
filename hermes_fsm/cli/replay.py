"""``hermes-fsm replay validate|rerun RECORDINGS...``: replay as a CI gate.

Accepts files and directories (searched for ``*.jsonl``), prints progress on many files
and a summary table, writes a JSON report with ``--report FILE``, and exits 1 when any
recording drifted or diverged (or could not be read).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes_fsm.errors import HermesError

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.events.recording import GraphInfo
    from hermes_fsm.replay.replayer import ReplayResult

__all__ = ["add_replay_parser", "run_replay"]


def add_replay_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register the ``replay`` command on the CLI's subparsers."""
    replay = sub.add_parser("replay", parents=[common],
                            help="check recordings against today's contracts and graph")
    replay.add_argument("mode", choices=["validate", "rerun"],
                        help="validate: re-check payloads against contracts; "
                             "rerun: drive today's graph with the recorded outputs")
    replay.add_argument("recordings", nargs="+", metavar="RECORDING",
                        help="recording files or directories of *.jsonl")
    replay.add_argument("--graph", metavar="PATH", help="today's graph (default: from config)")
    replay.add_argument("--report", metavar="FILE", type=Path,
                        help="write a JSON report of every result")
    replay.add_argument("--quiet", action="store_true", help="print only the summary")
    replay.add_argument("--build-contexts", action="store_true",
                        help="rerun: build each brain request's context (token budget, "
                             "rolling summary) as a model-backed run would; off by default, "
                             "the replay brain does not read prompts")


def run_replay(args: argparse.Namespace, graph_path: Path | None, out: TextIO,
               err: TextIO | None = None) -> int:
    """Run the replay command; returns the exit code (0 all clean, 1 otherwise)."""
    from hermes_fsm.cli.recorded import graph_note
    from hermes_fsm.events.recording import iter_recordings
    from hermes_fsm.replay.replayer import Replayer

    err = err or sys.stderr
    paths = list(iter_recordings(args.recordings))
    if not paths:
        err.write("hermes-fsm: no recordings (*.jsonl) found in "
                  f"{' '.join(args.recordings)}\n")
        return 1
    groups = _by_graph(paths, graph_path)
    replayers = {key: Replayer(key, build_contexts=args.build_contexts) for key in groups}
    notes: dict[str, str] = {}
    for key, members in groups.items():
        for path, info in members:
            note = graph_note(info, replayers[key].graph) if info is not None else None
            if note:
                notes[str(path)] = note
    results: list[ReplayResult] = []
    started = time.perf_counter()

    def each() -> Iterator[ReplayResult]:
        for key, members in groups.items():
            replayer = replayers[key]
            run = replayer.validate_all if args.mode == "validate" else replayer.rerun_all
            yield from run([path for path, _ in members])

    for index, result in enumerate(each(), start=1):
        results.append(result)
        if not args.quiet and not result.ok:
            for line in _problems(result):
                out.write(line + "\n")
            if args.mode == "rerun" and result.source in notes:
                out.write(f"  note: {notes[result.source]}\n")
        if not args.quiet:
            for line in result.notes:
                out.write(f"  note: {result.source}: {line}\n")
        if len(paths) > 20 and (index % 100 == 0 or index == len(paths)):
            err.write(f"\r{args.mode}: {index}/{len(paths)} recordings")
            if index == len(paths):
                err.write("\n")
    elapsed = time.perf_counter() - started
    _summary(results, args.mode, elapsed, out)
    if args.report:
        report = {"mode": args.mode, "recordings": len(results),
                  "ok": all(r.ok for r in results), "seconds": round(elapsed, 3),
                  "results": [r.to_json() for r in results]}
        args.report.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str),
                               encoding="utf-8")
        out.write(f"report: {args.report}\n")
    return 0 if all(r.ok for r in results) else 1


def _by_graph(paths: list[Path], explicit: Path | None
              ) -> dict[Path | None, list[tuple[Path, GraphInfo | None]]]:
    """Recordings grouped by the graph to replay them on: ``explicit`` for all, else the
    file each header names when it still has the recorded hash, else the bundled graph
    (``None``). Unreadable headers go with the bundled graph (the replay reports them)."""
    from hermes_fsm.cli.recorded import recorded_graph_path
    from hermes_fsm.events.recording import load_recording

    groups: dict[Path | None, list[tuple[Path, GraphInfo | None]]] = {}
    for path in paths:
        try:
            info: GraphInfo | None = load_recording(path, lazy=True).header.graph
        except HermesError:
            info = None
        key = explicit
        if key is None and info is not None:
            key = recorded_graph_path(info, path)
        groups.setdefault(key, []).append((path, info))
    return groups


def _problems(result: ReplayResult) -> list[str]:
    lines = [f"✗ {f.describe()}" for f in result.findings]
    lines += [f"✗ {d.describe()}" for d in result.divergences]
    if result.error:
        lines.append(f"✗ {result.error}")
    return lines


def _summary(results: list[ReplayResult], mode: str, elapsed: float, out: TextIO) -> None:
    width = min(max((len(r.source) for r in results), default=10), 70)
    out.write(f"\n{'recording':<{width}}  {'turns':>5}  {'events':>6}  result\n")
    for r in results:
        if r.ok:
            status = "ok"
        elif r.error:
            status = "error"
        elif r.findings:
            status = f"drift ({len(r.findings)})"
        else:
            status = f"diverged ({len(r.divergences)} turn(s))"
        source = r.source if len(r.source) <= width else "…" + r.source[-(width - 1):]
        out.write(f"{source:<{width}}  {r.turns:>5}  {r.events:>6}  {status}\n")
    bad = sum(not r.ok for r in results)
    turns = sum(r.turns for r in results)
    rate = f", {turns / elapsed:,.0f} turns/s" if elapsed > 0 else ""
    out.write(f"\n{mode}: {len(results)} recording(s), {turns} turn(s), {bad} failed "
              f"in {elapsed:.2f}s{rate}\n")
