"""Which graph a recording goes with: the one its header names, or the one the user passed.

``view`` and ``replay rerun`` use :func:`graph_for`: with ``--graph`` (or a configured
graph) that graph; else the file the recording's header names (its ``path``) when that
file still has the recorded content hash; else the bundled graph. Whenever the graph used
is not the recorded one (another content hash), :func:`graph_note` says so plainly, with
the recorded name, version, hash and path, and how to pass the right one.
"""

from __future__ import annotations

from pathlib import Path

from hermes_fsm.errors import HermesError
from hermes_fsm.events.recording import GraphInfo
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.graph.model import Graph

__all__ = ["graph_for", "graph_note", "recorded_graph_path"]


def recorded_graph_path(info: GraphInfo, recording: Path | None = None) -> Path | None:
    """The graph file the header names, when it exists and still has the recorded hash
    (a relative path is tried from the working directory, then beside the recording)."""
    if not info.path:
        return None
    candidates = [Path(info.path)]
    if recording is not None and not Path(info.path).is_absolute():
        candidates.append(recording.parent / info.path)
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            if load_graph(candidate).content_hash == info.hash:
                return candidate
        except (HermesError, OSError):  # a broken or unreadable file is not the recorded one
            continue
    return None


def graph_for(info: GraphInfo, explicit: Path | None, recording: Path | None = None) -> Graph:
    """The graph to lay a recording over / rerun it on: ``explicit`` (``--graph`` or the
    configuration's), else the recorded file (see :func:`recorded_graph_path`), else the
    bundled graph."""
    if explicit is not None:
        return load_graph(explicit)
    return load_graph(recorded_graph_path(info, recording) or default_graph_path())


def graph_note(info: GraphInfo, graph: Graph) -> str | None:
    """A plain sentence when ``graph`` is not the graph the recording was made with."""
    if info.hash == graph.content_hash:
        return None
    where = f" at {info.path}" if info.path else ""
    return (f"the recording was made with graph {info.name} {info.version} (hash {info.hash})"
            f"{where}, which differs from the graph used now, {graph.name} {graph.version} "
            f"(hash {graph.content_hash}, {graph.path}); its turns may diverge for that "
            "reason alone: pass --graph PATH with the recorded graph file")
