"""Recordings: a session's events as JSONL, with a header naming what produced them.

Format (version 1), one JSON object per line::

    {"format": "hermes-fsm/recording", "format_version": 1, "package_version": "0.1.0",
     "session_id": "s1", "user_id": "alice", "recorded_at": "2026-…Z",
     "graph": {"name": "agent_turn", "version": "1.0.0", "hash": "…", "path": "…"},
     "contracts": {"intent": "1.0.0", "plan": "1.0.0", …},
     "tools": {"inventory_lookup": "…schema hash…", …}}
    {"session_id": "s1", "turn_id": "…", "seq": 1, "at": "…", "kind": "turn_started", …}
    …

The first line is the header; every later line is one event (:data:`hermes_fsm.events.model.Event`),
in sequence order. A reader refuses a file whose header is missing, of another format, or
of a format version it does not know, saying which versions it reads; a header of the
wrong types (read strictly: no coercion), and an event line that is not JSON, not an
object, of an unknown kind or out of sequence (seqs go up one by one), naming its line.

Event lines hold what the session stores hold (:mod:`hermes_fsm._internal.json_safe`):
U+0000 as U+FFFD, non-finite numbers as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``. So a live recording (:class:`RecordingSink`, :func:`recording_text`)
reads the same as one exported from the store, and every line is strict JSON.

>>> from hermes_fsm.testing import demo_orchestrator
>>> import asyncio, io
>>> orchestrator = demo_orchestrator()
>>> _ = asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left in the east?"))
>>> text = recording_text(orchestrator, "s1")
>>> rec = parse_recording(text, "<memory>")
>>> rec.header.graph.name, rec.events[0].kind, rec.turn_ids() == [rec.events[0].turn_id]
('agent_turn', 'turn_started', True)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import from_json

from hermes_fsm._internal.json_safe import dumps, safe_blob
from hermes_fsm._internal.version import VERSION
from hermes_fsm.errors import RecordingError
from hermes_fsm.events.model import EVENT_ADAPTER, EVENTS_ADAPTER, Event
from hermes_fsm.sources import Clock

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "GraphInfo",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "RecordingSink",
    "RecordingSource",
    "iter_recordings",
    "load_recording",
    "parse_recording",
    "recording_header",
    "recording_text",
]

FORMAT: Literal["hermes-fsm/recording"] = "hermes-fsm/recording"
FORMAT_VERSION = 1
READABLE_VERSIONS = (1,)


class GraphInfo(BaseModel):
    """The graph a recording was made with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    hash: str
    path: str = ""


class RecordingHeader(BaseModel):
    """The first line of a recording."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["hermes-fsm/recording"] = FORMAT
    format_version: int = FORMAT_VERSION
    package_version: str
    session_id: str
    user_id: str
    recorded_at: datetime
    graph: GraphInfo
    contracts: dict[str, str]
    tools: dict[str, str] = {}


class Recording:
    """A parsed recording: its header, its events, and where it came from.

    ``raw`` holds each event as parsed JSON; ``events`` the typed events, built and
    validated on first use when the recording was loaded ``lazy`` (a malformed event then
    raises :class:`RecordingError` there, naming its line). A lazy recording keeps its
    event lines unparsed until something asks: ``raw`` parses them all at once, and
    :meth:`select` only the lines of the kinds it is given (what ``replay validate``
    needs is a third of a recording's bytes).
    """

    __slots__ = ("_blanks", "_body", "_events", "_raw", "header", "source")

    def __init__(self, header: RecordingHeader, raw: list[dict[str, Any]] | None, source: str,
                 events: list[Event] | None = None, *, body: bytes | None = None,
                 blank_lines: bool = False) -> None:
        if raw is None and body is None:
            raise TypeError("Recording needs its events: raw dicts, or the body's JSON lines")
        self.header = header
        self.source = source
        self._raw = raw
        # the event lines (JSONL), each an object on one line, stripped; ``blank_lines``:
        # there may be blank lines among them too (removed when first needed, see _clean)
        self._body = body
        self._blanks = blank_lines
        self._events = events

    @property
    def raw(self) -> list[dict[str, Any]]:
        """Every event as parsed JSON (an object with at least ``kind`` and ``turn_id``)."""
        if self._raw is None:
            assert self._body is not None
            # a blank line makes the parse fail: only then are blank lines looked for
            parsed = _parse_lines(self._body) if self._blanks else None
            if parsed is None:
                parsed = _parse_body(self._clean(), self.source)
            self._blanks = False
            self._raw = _checked(parsed, self.source)
        return self._raw

    def _clean(self) -> bytes:
        """The body without blank lines (looked for once, when first needed)."""
        assert self._body is not None
        if self._blanks:
            self._body = _split_body(self._body)
            self._blanks = False
        return self._body

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            self._events = _typed(self.raw, self.source)
        return self._events

    @property
    def event_count(self) -> int:
        """How many events the recording holds (without parsing them)."""
        if self._raw is not None or self._body is None:
            return len(self.raw)
        body = self._clean()  # newlines counted by what removing them leaves (memchr: fast)
        return len(body) - len(body.replace(b"\n", b"")) + 1 if body else 0

    def select(self, kinds: Collection[str]) -> list[dict[str, Any]]:
        """The raw events of ``kinds``, in order, parsing only the lines that may hold one.

        A line is parsed when it contains one of the kind names (or a ``\\u`` escape, which
        could spell one); the others cannot be events of those kinds. The last line is
        always parsed: a recording cut short by a crash ends in a broken line.

        Raises:
            RecordingError: a line read is not JSON, or not an event (naming it).
        """
        if self._raw is not None or self._body is None:
            return [e for e in self.raw if e["kind"] in kinds]
        body = self._body
        if not body:
            return []
        starts = {body.rfind(b"\n") + 1}
        needles = [kind.encode() for kind in kinds]
        if b"\\" in body and _ESCAPE.search(body) is not None:
            needles.append(b"\\u")  # rare: an escaped character might spell a kind
        for needle in needles:
            at = body.find(needle)
            while at >= 0:
                start = body.rfind(b"\n", 0, at) + 1
                starts.add(start)
                end = body.find(b"\n", at)
                if end < 0:
                    break
                at = body.find(needle, end)
        lines = []
        for start in sorted(starts):
            end = body.find(b"\n", start)
            lines.append(body[start:] if end < 0 else body[start:end])
        try:
            picked: list[Any] = from_json(b"[" + b",".join(lines) + b"]")
        except ValueError:
            self.raw  # noqa: B018 - parses every line, naming the bad one
            raise  # pragma: no cover - the whole body parsed where a part did not
        chosen = []
        for item in picked:
            if not (isinstance(item, dict) and isinstance(item.get("turn_id"), str)
                    and isinstance(item.get("kind"), str)):
                self.raw  # noqa: B018 - names the line of the malformed event
            if item["kind"] in kinds:
                chosen.append(item)
        return chosen

    def turn_ids(self) -> list[str]:
        """The ids of the recorded turns, in order."""
        return list(dict.fromkeys(e["turn_id"] for e in self.raw))

    def turns(self) -> list[list[Event]]:
        """The events grouped by turn, in order."""
        groups: dict[str, list[Event]] = {}
        for event in self.events:
            groups.setdefault(event.turn_id, []).append(event)
        return list(groups.values())

    def raw_turns(self, skip: Collection[str] = ()) -> list[list[dict[str, Any]]]:
        """The raw events grouped by turn, in order; without the events of ``skip``.

        A lazy recording does not even parse the lines that are surely events of those
        kinds (see :meth:`_raw_without`): like :meth:`select`, it reads only what it is
        asked for, so a malformed line of a skipped kind goes unnoticed here.
        """
        groups: dict[str, list[dict[str, Any]]] = {}
        current, group = None, []
        events = ([e for e in self._raw_without(skip) if e["kind"] not in skip] if skip
                  else self.raw)
        for event in events:
            turn_id = event["turn_id"]
            if turn_id != current:  # a turn's events are usually together: one look-up each
                current, group = turn_id, groups.setdefault(turn_id, [])
            group.append(event)
        return list(groups.values())

    def _raw_without(self, kinds: Collection[str]) -> list[dict[str, Any]]:
        """The raw events, leaving unparsed the lines that are surely of ``kinds``.

        Such a line starts with ``{``, holds no ``{`` or ``[`` before a
        ``,"kind":"<kind>"`` and has ``,`` or ``}`` right after it. Its quotes follow a
        comma or a letter, so none is escaped: ``"kind"`` is a key, not part of a string,
        and with no nesting begun before it, the event's own ``kind`` field. Any other
        line is parsed (the caller filters the parsed events too), and so is the last
        line (a recording cut short ends in a broken one). A malformed line among the
        rest is named as by :attr:`raw`; blank lines are dealt with there too.
        """
        body = self._body
        if self._raw is not None or not body:
            return self.raw
        last = body.rfind(b"\n") + 1
        cuts: list[tuple[int, int]] = []
        for kind in kinds:
            needle = b',"kind":"' + kind.encode() + b'"'
            at = body.find(needle, 0, last)
            while at >= 0:
                start = body.rfind(b"\n", 0, at) + 1
                end = body.find(b"\n", at)  # there is one: the line is not the last
                if (body[start:start + 1] == b"{"
                        and body[at + len(needle):at + len(needle) + 1] in (b",", b"}")
                        and body.find(b"{", start + 1, at) < 0
                        and body.find(b"[", start + 1, at) < 0):
                    cuts.append((start, end + 1))
                at = body.find(needle, end, last)
        if not cuts:
            return self.raw
        cuts.sort()
        # one JSON array of the kept lines: newlines become commas (the same length, so
        # the cuts still fit), and the kept stretches are joined in one copy
        flat = memoryview(body.replace(b"\n", b","))
        pieces: list[Any] = [b"["]
        position = 0
        for start, end in cuts:
            pieces.append(flat[position:start])
            position = end
        pieces += (flat[position:], b"]")
        try:
            parsed: list[Any] = from_json(b"".join(pieces), cache_strings="keys")
            self._blanks = False  # the kept lines parsed, and the cut ones are not blank
            return _checked(parsed, self.source, contiguous=False)
        except (ValueError, RecordingError):
            # blank lines (removed by a full read), or a malformed line: named from every
            # line, as the kept lines' numbers are off
            return self.raw


def _typed(raw: list[dict[str, Any]], source: str) -> list[Event]:
    try:
        return EVENTS_ADAPTER.validate_python(raw)
    except ValidationError:
        for number, item in enumerate(raw, start=2):  # find and name the bad line
            try:
                EVENT_ADAPTER.validate_python(item)
            except ValidationError as exc:
                raise RecordingError(f"{source}:{number}: not a valid event: "
                                     f"{_first_error(exc)}") from None
        raise RecordingError(f"{source}: the events do not validate together") from None


def _split_body(data: bytes) -> bytes:
    """The event lines of a recording's body as one block, one event per line, without
    blank lines (the form :meth:`Recording.select` searches)."""
    data = data.strip()
    if _BLANK_LINE.search(data) is None:
        return data  # what recordings look like: no line is touched
    return b"\n".join(line for line in data.split(b"\n") if line.strip())


_BLANK_LINE = re.compile(rb"\n\s*\n")
_ESCAPE = re.compile(rb"\\u")


def _parse_lines(body: bytes) -> list[Any] | None:
    """Every line of ``body`` parsed, or ``None`` when that fails (a line is not JSON, or
    is blank: its comma would follow another)."""
    try:
        parsed: list[Any] = from_json(b"[" + body.replace(b"\n", b",") + b"]",
                                      cache_strings="keys")  # values rarely repeat
    except ValueError:
        return None
    return parsed


def _parse_body(body: bytes, source: str) -> list[Any]:
    """Every line of ``body`` parsed (one parse of the whole body: much faster than a
    parse per line); a line that is not JSON is named."""
    if not body:
        return []
    try:  # a JSON string cannot hold a raw newline: every newline ends an event line
        parsed: list[Any] = from_json(b"[" + body.replace(b"\n", b",") + b"]",
                                      cache_strings="keys")  # values rarely repeat
        return parsed
    except ValueError:
        for number, line in enumerate(body.split(b"\n"), start=2):  # name the bad line
            try:
                from_json(line)
            except ValueError as exc:
                raise RecordingError(f"{source}:{number}: not JSON ({exc})") from None
        raise RecordingError(f"{source}: the event lines do not parse") from None


_KINDS = frozenset(cls.model_fields["kind"].default for cls in get_args(get_args(Event)[0]))
"""Every event kind this version knows."""


def _checked(raw: list[Any], source: str, contiguous: bool = True) -> list[dict[str, Any]]:
    """``raw`` when every item is an object with a known ``kind``, a string ``turn_id``
    and an integer ``seq``, the seqs increasing by one from line to line (with
    ``contiguous`` off, only increasing: some lines were left unparsed); else a
    :class:`RecordingError` naming the first line that is not."""
    try:
        prev = 0
        for item in raw:  # the fast path: plain checks on the dicts the parse made
            seq = item["seq"]
            if (type(item["turn_id"]) is not str or item["kind"] not in _KINDS
                    or type(seq) is not int or seq <= prev
                    or (contiguous and prev and seq != prev + 1)):
                break
            prev = seq
        else:
            return raw
    except (KeyError, TypeError, IndexError):
        pass
    prev = 0
    for number, item in enumerate(raw, start=2):  # name the line
        if not (isinstance(item, dict) and isinstance(item.get("turn_id"), str)
                and isinstance(item.get("kind"), str)):
            raise RecordingError(f"{source}:{number}: not a valid event: an event is an "
                                 "object with kind, session_id, turn_id, seq and at")
        if item["kind"] not in _KINDS:
            raise RecordingError(f"{source}:{number}: unknown event kind {item['kind']!r}; "
                                 "this hermes-fsm knows " + ", ".join(sorted(_KINDS)))
        seq = item.get("seq")
        if type(seq) is not int or seq < 1:
            raise RecordingError(f"{source}:{number}: not a valid event: seq must be an "
                                 f"integer >= 1, not {seq!r}")
        if seq <= prev or (contiguous and prev and seq != prev + 1):
            raise RecordingError(
                f"{source}:{number}: event seq {seq} after seq {prev}: a recording's events "
                "are numbered one by one in order (this one is duplicated, shuffled or has "
                "events missing)")
        prev = seq
    return raw


def _schema_hash(schema: Any) -> str:
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Contract(Protocol):
    @property
    def contract_name(self) -> str: ...
    @property
    def contract_version(self) -> str: ...


class _Graph(Protocol):
    """What a header names of a graph (a :class:`~hermes_fsm.graph.model.Graph` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def contracts(self) -> Iterable[_Contract]: ...


class _Tool(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def input_schema(self) -> Mapping[str, Any]: ...


class _ToolCatalog(Protocol):
    def describe(self) -> Sequence[_Tool]: ...


class _Services(Protocol):
    @property
    def tools(self) -> _ToolCatalog: ...
    @property
    def clock(self) -> Clock: ...


class _Session(Protocol):
    @property
    def user_id(self) -> str: ...
    def event_lines(self) -> Iterable[bytes]: ...


class RecordingSource(Protocol):
    """What a recording reads of an orchestrator (an :class:`~hermes_fsm.Orchestrator` is
    one): its graph and the graph's contracts, its tools' ``describe()``, its clock, and —
    for :func:`recording_text` — its sessions."""

    @property
    def graph(self) -> _Graph: ...
    @property
    def services(self) -> _Services: ...
    def sessions(self) -> Mapping[str, _Session]: ...


def recording_header(orchestrator: RecordingSource, session_id: str,
                     user_id: str) -> RecordingHeader:
    """The header for a recording of ``session_id`` made by ``orchestrator``."""
    graph = orchestrator.graph
    contracts = {c.contract_name: c.contract_version for c in graph.contracts}
    tools = {d.name: _schema_hash(d.input_schema) for d in orchestrator.services.tools.describe()}
    return RecordingHeader(
        package_version=VERSION, session_id=session_id, user_id=user_id,
        recorded_at=orchestrator.services.clock.now().astimezone(UTC),
        graph=GraphInfo(name=graph.name, version=graph.version, hash=graph.content_hash,
                        path=graph.path),
        contracts=contracts, tools=tools,
    )


def recording_text(orchestrator: RecordingSource, session_id: str) -> str:
    """The recording of a session of ``orchestrator`` as JSONL text (header + events)."""
    session = orchestrator.sessions().get(session_id)
    if session is None:
        known = ", ".join(sorted(orchestrator.sessions())[:10]) or "none"
        raise RecordingError(f"no session {session_id!r} to record (sessions: {known})")
    header = recording_header(orchestrator, session_id, session.user_id)
    lines = [header.model_dump_json()]
    lines.extend(_safe_line(line).decode("utf-8") for line in session.event_lines())
    return "\n".join(lines) + "\n"


def _safe_line(line: bytes) -> bytes:
    """An event line as the stores write it (see the module docs)."""
    if b"NaN" in line or b"Infinity" in line:  # maybe a bare token: from the value again
        return dumps(from_json(line))
    return safe_blob(line, None)  # only a U+0000 to fix, in place


class RecordingSink:
    """Writes each session's events to ``<directory>/<session_id>.jsonl`` as they happen.

    The header is written with a session's first event; every event is flushed as it
    is emitted, so a crashed process leaves a readable recording up to its last event.

    Args:
        directory: where recordings go (created if missing).
        orchestrator: whose graph, contracts and tools the headers name.
    """

    def __init__(self, directory: str | Path, orchestrator: RecordingSource) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.orchestrator = orchestrator
        self._files: dict[str, IO[str]] = {}

    def path_for(self, session_id: str) -> Path:
        """The file of a session's recording."""
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in session_id)
        return self.directory / f"{safe}.jsonl"

    def emit(self, event: Event) -> None:
        handle = self._files.get(event.session_id)
        if handle is None:
            path = self.path_for(event.session_id)
            fresh = not path.exists() or path.stat().st_size == 0
            handle = self._files[event.session_id] = path.open("a", encoding="utf-8")
            if fresh:
                user = getattr(event, "user_id", "") or ""
                header = recording_header(self.orchestrator, event.session_id, user)
                handle.write(header.model_dump_json() + "\n")
        handle.write(dumps(event.model_dump()).decode("utf-8") + "\n")  # as the stores do
        handle.flush()

    def close(self) -> None:
        """Close every open file."""
        for handle in self._files.values():
            handle.close()
        self._files.clear()


def parse_recording(text: str | bytes, source: str, lazy: bool = False) -> Recording:
    """Parse recording text; with ``lazy``, events are parsed and validated on first use.

    Raises:
        RecordingError: no header, another format, an unknown version, a malformed line —
            naming the source and line (with ``lazy``, when the line is first read).
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    data = data.lstrip()
    cut = data.find(b"\n")
    first, rest = (data, b"") if cut < 0 else (data[:cut], data[cut + 1:])
    if not first.strip():
        raise RecordingError(f"{source}: empty file; a recording starts with a header line")
    try:
        head = from_json(first)
    except ValueError as exc:
        raise RecordingError(f"{source}:1: the header is not JSON ({exc})") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise RecordingError(f"{source}:1: not a hermes-fsm recording (the first line must be "
                             f"a header with \"format\": \"{FORMAT}\")")
    version = head.get("format_version")
    if version not in READABLE_VERSIONS:
        raise RecordingError(
            f"{source}:1: recording format version {version!r} is not supported; this "
            f"hermes-fsm reads version(s) {', '.join(map(str, READABLE_VERSIONS))} — "
            "upgrade hermes-fsm to read it")
    try:  # strict: a header of the wrong types is refused, not coerced
        header = RecordingHeader.model_validate_json(first, strict=True)
    except ValidationError as exc:
        raise RecordingError(f"{source}:1: malformed header: {_first_error(exc)}") from None
    recording = Recording(header, None, source, body=rest.strip(), blank_lines=True)
    if not lazy:
        recording.events  # noqa: B018 - validates every event now
    return recording


def load_recording(path: str | Path, lazy: bool = False) -> Recording:
    """Read a recording file (see :func:`parse_recording`)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_recording(data, str(path), lazy)


def iter_recordings(paths: Sequence[str | Path]) -> Iterator[Path]:
    """Every recording file named by ``paths``: files as given, directories searched for
    ``*.jsonl`` (sorted).

    Raises:
        RecordingError: a path that does not exist.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(path.rglob("*.jsonl"))
        elif path.exists():
            yield path
        else:
            raise RecordingError(f"{path}: no such file or directory")


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(root)"
    return f"{where}: {err['msg']}"
