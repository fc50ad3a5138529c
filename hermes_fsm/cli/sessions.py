"""``hermes-fsm sessions archive --idle 30m`` and ``sessions list --user U``.

Registered from :mod:`hermes_fsm.cli.main`; works on the session store, brain and memory the
configuration describes (embedded: the data directory; or the services of
``HERMES_*_URL``). ``archive`` summarizes every session idle for longer than ``--idle``
into its user's long-term memory and marks it archived (see :mod:`hermes_fsm.engine.archive`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from dataclasses import asdict
from datetime import timedelta
from typing import Any, TextIO

from hermes_fsm.errors import UsageError

__all__ = ["add_sessions_parser", "parse_duration", "run_sessions"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``"30m"``, ``"2h"``, ``"1h30m"``, ``"7d"``, ``"45s"`` as a timedelta.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)

    Raises:
        UsageError: not a duration with units.
    """
    compact = text.strip().lower().replace(" ", "")
    pieces = _DURATION.findall(compact)
    if not compact or "".join(n + u for n, u in pieces) != compact:
        raise UsageError(f"--idle {text!r} is not a duration; write it with units, e.g. 45s, "
                         "30m, 2h, 1h30m or 7d")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in pieces))


def add_sessions_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``sessions`` command to the CLI's subparsers."""
    sessions = sub.add_parser("sessions", parents=[common],
                              help="stored sessions: archive idle ones, list a user's")
    sessions.add_argument("action", choices=["archive", "list"],
                          help="archive: summarize idle sessions into memory; "
                               "list: a user's sessions")
    sessions.add_argument("--idle", metavar="DURATION",
                          help="archive: sessions idle for longer than this (30m, 2h, 7d)")
    sessions.add_argument("--user", help="list: the user id")
    sessions.add_argument("--dry-run", action="store_true",
                          help="archive: only say which sessions would be archived")
    sessions.add_argument("--json", action="store_true", help="print JSON lines")


def run_sessions(args: argparse.Namespace, config: Any, out: TextIO) -> int:
    """Run ``sessions archive|list``; returns the exit code (1 when an archive failed)."""
    if args.action == "archive" and not args.idle:
        raise UsageError("sessions archive needs --idle, e.g. hermes-fsm sessions archive "
                         "--idle 30m")
    if args.action == "list" and not args.user:
        raise UsageError("sessions list needs --user, e.g. hermes-fsm sessions list --user "
                         "alice")
    if args.action == "archive":
        return asyncio.run(_archive(config, parse_duration(args.idle), args.dry_run,
                                    args.json, out))
    return asyncio.run(_list(config, args.user, args.json, out))


async def _archive(config: Any, idle: timedelta, dry_run: bool, as_json: bool,
                   out: TextIO) -> int:
    from hermes_fsm.config.build import build_orchestrator

    orchestrator = build_orchestrator(config, sinks=())
    try:
        if orchestrator.store is None:
            raise UsageError("the configuration keeps sessions in memory (sessions.store: "
                             "memory); there is nothing stored to archive")
        results = await orchestrator.archive_idle(idle, dry_run=dry_run)
    finally:
        await orchestrator.aclose()
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
        if as_json:
            out.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")
        elif r.status == "archived":
            where = (f" → {r.memory_items} memory item(s) {r.memory_key}.*" if r.memory_key
                     else " (empty: nothing to keep)")
            fallback = f"; brain summary failed: {r.summary_error}" if r.summary_error else ""
            out.write(f"archived {r.session_id} (user {r.user_id}): {r.messages} message(s) "
                      f"summarized by {r.summarizer}{where}{fallback}\n")
        elif r.status == "would_archive":
            out.write(f"would archive {r.session_id} (user {r.user_id}): {r.messages} "
                      "message(s)\n")
        else:
            out.write(f"{r.status} {r.session_id} (user {r.user_id}): {r.detail}\n")
    if not as_json:
        summary = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in
                            sorted(counts.items())) or "none"
        out.write(f"sessions idle for more than {idle}: {summary}\n")
    return 1 if counts.get("failed") else 0


async def _list(config: Any, user: str, as_json: bool, out: TextIO) -> int:
    from hermes_fsm.config.store import build_store

    store = build_store(config)
    await store.open()
    try:
        records = await store.sessions_of(user)
    finally:
        await store.close()
    for r in records:
        if as_json:
            out.write(json.dumps({"session_id": r.session_id, "user_id": r.user_id,
                                  "state": r.state, "seq": r.seq, "archived": r.archived,
                                  "summary": r.summary,
                                  "updated_at": r.updated_at.isoformat()},
                                 ensure_ascii=False) + "\n")
        else:
            flag = "archived" if r.archived else "active"
            out.write(f"{r.session_id}  {flag:<8}  last write {r.updated_at:%Y-%m-%d %H:%M}  "
                      f"{r.seq} event(s)\n")
    if not as_json:
        out.write(f"{len(records)} session(s) of user {user!r}\n")
    return 0
