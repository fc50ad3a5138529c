"""orjson, where ``hermes-fsm[fast]`` installed it, else ``None``: the fast writer of event
batches (:func:`hermes_fsm.events.model.write_json`) and of a session log's rows
(:func:`hermes_fsm.events.rows.rows_json`), each falling back to pydantic's without it."""

from __future__ import annotations

__all__ = ["orjson"]

try:
    import orjson
except ImportError:  # pragma: no cover - the extra is not installed
    orjson = None  # type: ignore[assignment]
