"""``hermes-fsm record export SESSION``: a session's recording, from the session store.

The CLI keeps sessions in the configured store (SQLite in the data directory by default,
PostgreSQL with ``HERMES_POSTGRES_URL``), so a session run by any process can be exported
as a recording (header + one event per line) for ``replay`` and ``view``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes_fsm.errors import SessionError, StoreError

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["add_record_parser", "export_recording", "run_record"]


def add_record_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register the ``record`` command on the CLI's subparsers."""
    record = sub.add_parser("record", parents=[common],
                            help="export a session's recording from the session store")
    record.add_argument("action", choices=["export"],
                        help="export: write a stored session as a recording (.jsonl)")
    record.add_argument("session", help="the session id")
    record.add_argument("--out", metavar="FILE", type=Path,
                        help="where to write it (default: standard output)")


async def export_recording(config: HermesConfig, session_id: str) -> str:
    """The recording of ``session_id`` as JSONL text, read from the configured store.

    Raises:
        SessionError: the store has no such session.
        StoreError: the store failed, or a stored event cannot be read (naming its seq).
    """
    from pydantic import ValidationError

    from hermes_fsm.config.build import build_orchestrator
    from hermes_fsm.config.store import build_store
    from hermes_fsm.events.model import EVENT_ADAPTER
    from hermes_fsm.events.recording import recording_header

    store = build_store(config)
    await store.open()
    try:
        record = await store.get(session_id)
        if record is None:
            raise SessionError(f"no session {session_id!r} in the {store.name}; check that "
                               "--config / HERMES_POSTGRES_URL / HERMES_DATA_DIR point at "
                               "the store of the process that ran it")
        events = []
        for data in await store.events_after(session_id, 0):
            try:
                events.append(EVENT_ADAPTER.validate_python(data))
            except ValidationError as exc:
                raise StoreError(
                    f"{store.name}: event seq {data.get('seq')} of session {session_id!r} is "
                    f"not a valid {data.get('kind')!r} event ({exc.error_count()} error(s): "
                    f"{exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}); the stored data is "
                    "damaged or was written by another version of hermes-fsm") from exc
    finally:
        await store.close()
    orchestrator = build_orchestrator(config, mcp_servers=None)
    header = recording_header(orchestrator, session_id, record.user_id)
    lines = [header.model_dump_json(), *(e.model_dump_json() for e in events)]
    return "\n".join(lines) + "\n"


def run_record(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """Run ``record export``; returns the exit code."""
    text = asyncio.run(export_recording(config, args.session))
    if args.out is None:
        out.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        turns = len({line.split('"turn_id":"', 1)[1].split('"', 1)[0]
                     for line in text.splitlines()[1:] if '"turn_id":"' in line})
        out.write(f"wrote {args.out}: {len(text.splitlines()) - 1} events, {turns} turn(s)\n")
    return 0
