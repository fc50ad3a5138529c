"""``hermes-fsm memory search|list|show|forget|rollback --user U``: look into, clear and roll
back a user's memory (``show --as-of TIME``: the profile as it was).

Registered from :mod:`hermes_fsm.cli.main`; uses the memory the configuration describes
(embedded: the data dir; or the services of ``HERMES_*_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any, TextIO

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.memory import build_memory
from hermes_fsm.errors import UsageError
from hermes_fsm.memory.profile import profile_as_of, rollback_updates

__all__ = ["add_memory_parser", "run_memory"]


def add_memory_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``memory`` command to the CLI's subparsers."""
    memory = sub.add_parser("memory", parents=[common],
                            help="a user's memory: search, list, forget")
    memory.add_argument("action", choices=["search", "list", "show", "forget", "rollback"])
    memory.add_argument("query", nargs="?", default="", help="search: the text to recall for")
    memory.add_argument("--user", required=True, help="the user id")
    memory.add_argument("-k", type=int, default=5, help="search: how many items (default 5)")
    memory.add_argument("--all", action="store_true",
                        help="list: include superseded and deleted items")
    memory.add_argument("--json", action="store_true", help="print JSON lines")
    memory.add_argument("--as-of", dest="as_of", metavar="TIME", default=None,
                        help="show: the profile as it was at TIME (ISO 8601, UTC unless it "
                        "says); rollback: make the profile what it was at TIME")


def run_memory(args: argparse.Namespace, config: Any, out: TextIO) -> int:
    """Run ``memory search|list|forget``; returns the exit code."""
    if args.action == "search" and not args.query.strip():
        raise UsageError("memory search needs a query: hermes-fsm memory search 'TEXT' --user U")
    if args.action == "forget":
        return asyncio.run(_forget(config, args.user, args.json, out))
    as_of = _time(getattr(args, "as_of", None))
    if args.action == "rollback" and as_of is None:
        raise UsageError("memory rollback needs --as-of TIME: hermes-fsm memory rollback "
                         "--user U --as-of 2026-03-01T12:00")
    memory = build_memory(config.memory)

    async def act() -> int:
        try:
            if args.action == "rollback":
                assert as_of is not None
                return await _rollback(memory, args.user, as_of, args.json, out)
            if args.action == "search":
                items = await memory.recall(args.user, args.query, args.k)
            elif args.action == "show":
                items = await memory.items(args.user)
                items = (profile_as_of(items, as_of) if as_of is not None
                         else [i for i in items if i.status == "active"])
            else:
                items = await memory.items(args.user)
                if not args.all:
                    items = [i for i in items if i.status == "active"]
            for item in items:
                if args.json:
                    payload = item.to_payload()
                    payload["score"] = item.score
                    out.write(json.dumps(payload, ensure_ascii=False) + "\n")
                else:
                    score = f"  score {item.score:.3f}" if item.score is not None else ""
                    said = f"  said: {item.text!r}" if args.action == "show" and item.text else ""
                    out.write(f"[{item.created_at:%Y-%m-%d}] {item.status:<10} {item.key}: "
                              f"{item.value} (confidence {item.confidence:.2f}){score}{said}\n")
            if not args.json:
                out.write(f"{len(items)} item(s) for user {args.user!r}\n")
            return 0
        finally:
            await memory.close()

    return asyncio.run(act())


def _time(text: str | None) -> datetime | None:
    """An ``--as-of`` time (ISO 8601; UTC when it names no zone)."""
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"--as-of {text!r} is not a time: use ISO 8601, e.g. "
                         "2026-03-01T12:00 or 2026-03-01T12:00+08:00") from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def _rollback(memory: Any, user: str, as_of: datetime, as_json: bool,
                    out: TextIO) -> int:
    """Make ``user``'s profile what it was at ``as_of`` (new versions; nothing erased)."""
    items = await memory.items(user)
    updates = rollback_updates(items, as_of)
    now = datetime.now(UTC)
    outcomes = await memory.apply(user, f"rollback:{as_of.isoformat()}:{now.isoformat()}",
                                  updates, now, text=f"rollback to {as_of.isoformat()}")
    for outcome in outcomes:
        if as_json:
            out.write(json.dumps({"key": outcome.key, "update_type": outcome.update_type,
                                  "status": outcome.status}, ensure_ascii=False) + "\n")
        else:
            out.write(f"{outcome.update_type:<9} {outcome.key}: {outcome.status}\n")
    if not as_json:
        out.write(f"rolled user {user!r} back to {as_of.isoformat()}: "
                  f"{len(outcomes)} change(s)\n")
    return 0


async def _forget(config: Any, user: str, as_json: bool, out: TextIO) -> int:
    """Forget ``user`` in memory and in the session store (``Orchestrator.forget_user``)."""
    orchestrator = build_orchestrator(config, sinks=())
    try:
        report = await orchestrator.forget_user(user)
    finally:
        await orchestrator.aclose()
    if as_json:
        out.write(json.dumps({"user_id": user, **report}, ensure_ascii=False) + "\n")
        return 0
    tiers = ", ".join(f"{n} {tier.replace('_', ' ')}" for tier, n in report["memory"].items())
    store = orchestrator.store.name if orchestrator.store is not None else "no session store"
    out.write(f"forgot user {user!r}:\n"
              f"  session store ({store}): {report['sessions']} session(s), "
              f"{report['messages']} message(s), {report['events']} event(s), "
              f"{report['checkpoints']} checkpoint(s), {report['effects']} journalled "
              "call(s)\n"
              f"  memory: {tiers}\n"
              f"  experience log: {report['experience']} entry(ies)\n")
    return 0
