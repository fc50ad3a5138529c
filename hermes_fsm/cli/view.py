"""The graph view commands of the CLI: ``view``, ``graph --format svg|html``, ``--record``.

::

    hermes-fsm run --record out/ "How many A1001 are left?"   # writes out/<session>.jsonl
    hermes-fsm view out/<session>.jsonl --out page.html        # the recording over its graph
    hermes-fsm graph --format html > graph.html                # the graph alone
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from hermes_fsm.errors import UsageError
from hermes_fsm.viz.render import GRAPH_FORMATS, render_graph

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.config.settings import HermesConfig
    from hermes_fsm.events.recording import Recording, RecordingSink, RecordingSource
    from hermes_fsm.events.sinks import SinkHost

    class Recordable(RecordingSource, SinkHost, Protocol):
        """An orchestrator a recording sink can be attached to (an ``Orchestrator`` is one)."""
else:
    def __getattr__(name: str) -> object:
        """``Recordable`` is built when first asked for: its bases import the event model,
        which ``hermes-fsm --help`` does without."""
        if name != "Recordable":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from hermes_fsm.events.recording import RecordingSource
        from hermes_fsm.events.sinks import SinkHost

        class Recordable(RecordingSource, SinkHost, Protocol):
            """An orchestrator a recording sink can be attached to (an ``Orchestrator`` is
            one)."""

        globals()["Recordable"] = Recordable
        return Recordable

__all__ = ["GRAPH_FORMATS", "add_record_option", "add_view_parser", "attach_recording",
           "one_turn", "render_graph", "run_view"]

def add_view_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``view`` command to the CLI's subparsers."""
    view = sub.add_parser("view", parents=[common],
                          help="write a recording laid over its graph as one HTML page")
    view.add_argument("recording", type=Path, help="a recording (.jsonl, from run --record)")
    view.add_argument("--out", metavar="FILE", type=Path,
                      help="the HTML page to write (default: the recording's name, .html)")
    view.add_argument("--graph", metavar="PATH",
                      help="graph file (default: the recorded one when it is unchanged, "
                           "else from config, else the bundled one)")
    view.add_argument("--turn", metavar="N",
                      help="only this turn: its number (1 = the first) or its turn id")


def one_turn(recording: Recording, which: str) -> Recording:
    """The recording with the events of one turn only: ``which`` is its number (1-based)
    or its turn id.

    Raises:
        UsageError: no such turn (the message lists how many there are, and their ids).
    """
    turns = recording.turns()
    ids = [events[0].turn_id for events in turns if events]
    chosen = None
    if which.isdigit() and 1 <= int(which) <= len(turns):
        chosen = turns[int(which) - 1]
    elif which in ids:
        chosen = turns[ids.index(which)]
    if chosen is None:
        raise UsageError(f"--turn {which}: the recording has {len(turns)} turn(s) "
                         f"({', '.join(ids) or 'none'}); pass a number from 1 to "
                         f"{len(turns)} or one of those ids")
    from hermes_fsm.events.recording import Recording

    turn_id = chosen[0].turn_id
    raw = [r for r in recording.raw if r.get("turn_id") == turn_id]
    return Recording(recording.header, raw, recording.source, list(chosen))


def add_record_option(p: argparse.ArgumentParser) -> None:
    """Add ``--record DIR`` to a command that runs turns."""
    p.add_argument("--record", metavar="DIR", type=Path,
                   help="write each session's events to DIR/<session>.jsonl (for view/replay)")


def attach_recording(orchestrator: Recordable, directory: Path | None) -> RecordingSink | None:
    """Attach a :class:`~hermes_fsm.events.recording.RecordingSink` writing to ``directory``
    (nothing when it is ``None``); returns the sink, or ``None``."""
    if directory is None:
        return None
    from hermes_fsm.events.recording import RecordingSink

    try:
        sink = RecordingSink(directory, orchestrator)
    except OSError as exc:
        raise UsageError(f"--record {directory}: cannot create the directory: "
                         f"{exc.strerror or exc}; choose another directory") from None
    orchestrator.add_sink(sink)
    return sink


def run_view(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """``hermes-fsm view RECORDING [--out FILE] [--graph PATH]``."""
    from hermes_fsm.cli.recorded import graph_for, graph_note
    from hermes_fsm.events.recording import load_recording
    from hermes_fsm.viz.view import render_view

    recording = load_recording(args.recording)
    if getattr(args, "turn", None):
        recording = one_turn(recording, args.turn)
    graph = graph_for(recording.header.graph, config.graph, args.recording)
    page = render_view(recording, graph)
    target: Path = args.out or args.recording.with_suffix(".html")
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out {target}: cannot write the page: {exc.strerror or exc}; "
                         "choose another file") from None
    out.write(f"wrote {target} ({len(recording.events)} events, graph {graph.name})\n")
    note = graph_note(recording.header.graph, graph)
    if note:
        out.write(f"warning: {note}\n")
    return 0
