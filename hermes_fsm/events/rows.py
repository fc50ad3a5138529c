"""Compact rows: the engine's own events of a turn, kept as tuples until someone reads them.

A turn emits about twenty events of five kinds whose fields the engine itself fills in
(``turn_started``, ``state_entered``, ``state_exited``, ``state_output``,
``turn_finished``). With no sink attached, nothing reads them while the turn runs: until
a handler or a tool emits an event of its own (then the turn's batch is written from field
dicts anyway), the turn keeps each as a *row*, a flat tuple of its values (a fifth of a
dict's cost to build), and its field dict (the same dict :func:`~hermes_fsm.events.model.event_data`
gives, in the model's field order) is made from the row only when someone reads the
turn's events (:func:`row_data`, through :class:`~hermes_fsm.events.model.EventList`). A
session's in-process log keeps a turn made only of rows as their compact JSON
(:func:`rows_json`: arrays, no field names; :func:`rows_data` reads it back), not as
the rows: even tuples of atomic values, which the garbage collector stops tracking after
a pass, cost it ~20,000 instructions a turn when kept (measured with
``bench/instructions.py``), bytes nothing.

Two values are kept in a cheaper form than the field dict's:

* ``at``: for the system clock, the integer from :func:`time.time_ns` (a quarter of
  ``datetime.now(UTC)``'s cost); :func:`stamp_time` turns it into the same aware UTC
  datetime ``datetime.now(UTC)`` would have given at that instant (microseconds, rounded
  down). An injected clock's datetime is kept as it is.
* ``state_output``'s ``output``: its JSON, written by the contract's pydantic
  serializer, when the contract's dump can hold no NaN or ±Infinity float (JSON has no
  such number): in an ``orjson.Fragment`` where orjson is installed (written into the
  batch's JSON as it is, no Python call per output), else as bytes; the field dict holds
  it parsed back (``pydantic_core.from_json``), the same data ``model_dump(mode="json")``
  gives. Any other contract's row holds that data itself, and the batch's writer checks
  it for NaN as it checks a field dict's.

Row layouts: position 0 is the kind's code (:data:`STARTED` … :data:`FINISHED`), then
``session_id``, ``turn_id``, ``seq``, ``at``, then the kind's own fields in the model's
order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import from_json, to_json

from hermes_fsm._internal.fast_json import orjson as _orjson

__all__ = [
    "ENTERED",
    "EXITED",
    "FINISHED",
    "OUTPUT",
    "OUTPUT_JSON",
    "ROW_KINDS",
    "STARTED",
    "Row",
    "row_data",
    "rows_data",
    "rows_json",
    "stamp_time",
]

Row = tuple[Any, ...]
"""A compact event: ``(code, session_id, turn_id, seq, at, *fields)``."""

STARTED = 0
"""``turn_started``: ``user_id``, ``text``, ``graph``, ``domain``."""
ENTERED = 1
"""``state_entered``: ``state``, ``source``, ``trigger``, ``attempt``."""
EXITED = 2
"""``state_exited``: ``state``, ``trigger``, ``dest``, ``duration_ms``."""
OUTPUT = 3
"""``state_output``: ``state``, ``attempt``, ``contract``, ``output`` (its JSON: an
``orjson.Fragment`` or bytes; or its data), ``raw`` (str or ``None``)."""

OUTPUT_JSON: Callable[[bytes], Any] | None = None if _orjson is None else _orjson.Fragment
"""How a row keeps an output's JSON where orjson is installed (``None``: as the bytes)."""
FINISHED = 4
"""``turn_finished``: ``status``, ``answer``, ``duration_ms``, then the ``path``'s state
names, one a position (a list in the field dict)."""

ROW_KINDS = ("turn_started", "state_entered", "state_exited", "state_output",
             "turn_finished")
"""The ``kind`` of each code."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stamp_time(at: Any) -> datetime:
    """A row's ``at`` as the field dict holds it: an integer from :func:`time.time_ns`
    becomes the aware UTC datetime of that instant, to the microsecond (rounded down, as
    ``datetime.now(UTC)`` rounds); a datetime (an injected clock's) stays as it is."""
    if type(at) is int:
        return _EPOCH + timedelta(0, 0, at // 1000)  # positional: no keyword parsing
    return at  # type: ignore[no-any-return]


def _started(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "turn_started", "user_id": row[5], "text": row[6], "graph": row[7],
            "domain": row[8]}


def _entered(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "state_entered", "state": row[5], "source": row[6], "trigger": row[7],
            "attempt": row[8]}


def _exited(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "state_exited", "state": row[5], "trigger": row[6], "dest": row[7],
            "duration_ms": row[8]}


def _output(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "state_output", "state": row[5], "attempt": row[6], "contract": row[7],
            "output": _parsed(row[8]), "raw": row[9]}


def _output_written(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "state_output", "state": row[5], "attempt": row[6], "contract": row[7],
            "output": row[8], "raw": row[9]}  # a Fragment, or the output's data, as it is


def _finished(row: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": row[1], "turn_id": row[2], "seq": row[3], "at": stamp_time(row[4]),
            "kind": "turn_finished", "status": row[5], "answer": row[6],
            "duration_ms": row[7], "path": list(row[8:])}


_MAKERS: tuple[Callable[[Sequence[Any]], dict[str, Any]], ...] = (
    _started, _entered, _exited, _output, _finished)


def row_data(row: Sequence[Any], *, written: bool = False) -> dict[str, Any]:
    """The field dict of the event ``row`` keeps (a new dict each call); ``row`` may also
    be one read back from :func:`rows_json`'s JSON (a list).

    ``written``: the dict only orjson writes (its caller checked orjson is there): an
    output's JSON stays as it is, in an ``orjson.Fragment``, rather than parsed.
    """
    if written and row[0] == OUTPUT:
        return _output_written(row)
    maker: Callable[[Sequence[Any]], dict[str, Any]] = _MAKERS[row[0]]
    return maker(row)


def rows_json(rows: Sequence[Row]) -> bytes:
    """``rows`` as one compact JSON array of arrays: what a session's log keeps of a turn
    made only of rows (no field names, no dict made). An output's JSON is embedded as it
    is (``orjson.Fragment``); without orjson (``hermes-fsm[fast]``), or where orjson
    gives up on a value, pydantic writes it as a string. :func:`rows_data` reads either
    back."""
    if _orjson is not None:
        try:
            return _orjson.dumps(rows, option=_orjson.OPT_UTC_Z)
        except TypeError:  # a value orjson does not write as pydantic does
            pass
        return to_json(rows, fallback=_fragment_text)
    return to_json(rows, serialize_unknown=True)


def rows_data(blob: bytes) -> list[dict[str, Any]]:
    """The field dicts of the rows :func:`rows_json` wrote (an injected clock's ``at``
    comes back as the string its JSON holds, which writes the same JSON again)."""
    return [row_data(row) for row in from_json(blob)]


def _fragment_text(value: Any) -> Any:
    """pydantic's fallback for a row's values: an output's JSON as a string (as it writes
    bytes), anything else as ``serialize_unknown`` does."""
    if type(value) is _orjson.Fragment:
        return _orjson.dumps(value).decode()  # orjson writes a fragment as it holds it
    return str(value)


def _parsed(output: Any) -> Any:
    """An output as its row holds it (its JSON: an ``orjson.Fragment``, bytes, or a string
    where pydantic wrote the rows; or its data) or as read back from embedded JSON, as
    data."""
    kind = type(output)
    if kind is bytes or kind is str:
        return from_json(output)
    if OUTPUT_JSON is not None and kind is OUTPUT_JSON:
        return from_json(_orjson.dumps(output))  # orjson writes a fragment as it holds it
    return output
