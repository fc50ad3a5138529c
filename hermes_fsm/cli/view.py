"""The graph view commands of the CLI: ``view``, ``graph --format svg|html``, ``--record``.

::

    hermes-fsm run --record out/ "How many A1001 are left?"   # writes out/<session>.jsonl
    hermes-fsm view out/<session>.jsonl --out page.html        # the recording over its graph
    hermes-fsm graph --format html > graph.html                # the graph alone
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Protocol, TextIO

from hermes_fsm.cli.recorded import graph_for, graph_note
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.errors import UsageError
from hermes_fsm.events.recording import RecordingSink, RecordingSource, load_recording
from hermes_fsm.events.sinks import SinkHost
from hermes_fsm.viz.render import GRAPH_FORMATS, render_graph
from hermes_fsm.viz.view import render_view

__all__ = ["GRAPH_FORMATS", "add_record_option", "add_view_parser", "attach_recording",
           "render_graph", "run_view"]

def add_view_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``view`` command to the CLI's subparsers."""
    view = sub.add_parser("view", parents=[common],
                          help="write a recording laid over its graph as one HTML page")
    view.add_argument("recording", type=Path, help="a recording (.jsonl, from run --record)")
    view.add_argument("--out", metavar="FILE", type=Path,
                      help="the HTML page to write (default: the recording's name, .html)")
    view.add_argument("--graph", metavar="PATH",
                      help="graph file (default: from config, else the bundled one)")


def add_record_option(p: argparse.ArgumentParser) -> None:
    """Add ``--record DIR`` to a command that runs turns."""
    p.add_argument("--record", metavar="DIR", type=Path,
                   help="write each session's events to DIR/<session>.jsonl (for view/replay)")


class Recordable(RecordingSource, SinkHost, Protocol):
    """An orchestrator a recording sink can be attached to (an ``Orchestrator`` is one)."""


def attach_recording(orchestrator: Recordable, directory: Path | None) -> RecordingSink | None:
    """Attach a :class:`~hermes_fsm.events.recording.RecordingSink` writing to ``directory``
    (nothing when it is ``None``); returns the sink, or ``None``."""
    if directory is None:
        return None
    try:
        sink = RecordingSink(directory, orchestrator)
    except OSError as exc:
        raise UsageError(f"--record {directory}: cannot create the directory: "
                         f"{exc.strerror or exc}; choose another directory") from None
    orchestrator.add_sink(sink)
    return sink


def run_view(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """``hermes-fsm view RECORDING [--out FILE] [--graph PATH]``."""
    recording = load_recording(args.recording)
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
