"""``hermes-fsm memory search|list|forget --user U``: look into and clear a user's memory.

Registered from :mod:`hermes_fsm.cli.main`; uses the memory the configuration describes
(embedded: the data dir; or the services of ``HERMES_*_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any, TextIO

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.memory import build_memory
from hermes_fsm.errors import UsageError

__all__ = ["add_memory_parser", "run_memory"]


def add_memory_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``memory`` command to the CLI's subparsers."""
    memory = sub.add_parser("memory", parents=[common],
                            help="a user's memory: search, list, forget")
    memory.add_argument("action", choices=["search", "list", "forget"])
    memory.add_argument("query", nargs="?", default="", help="search: the text to recall for")
    memory.add_argument("--user", required=True, help="the user id")
    memory.add_argument("-k", type=int, default=5, help="search: how many items (default 5)")
    memory.add_argument("--all", action="store_true",
                        help="list: include superseded and deleted items")
    memory.add_argument("--json", action="store_true", help="print JSON lines")


def run_memory(args: argparse.Namespace, config: Any, out: TextIO) -> int:
    """Run ``memory search|list|forget``; returns the exit code."""
    if args.action == "search" and not args.query.strip():
        raise UsageError("memory search needs a query: hermes-fsm memory search 'TEXT' --user U")
    if args.action == "forget":
        return asyncio.run(_forget(config, args.user, args.json, out))
    memory = build_memory(config.memory)

    async def act() -> int:
        try:
            if args.action == "search":
                items = await memory.recall(args.user, args.query, args.k)
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
                    out.write(f"[{item.created_at:%Y-%m-%d}] {item.status:<10} {item.key}: "
                              f"{item.value} (confidence {item.confidence:.2f}){score}\n")
            if not args.json:
                out.write(f"{len(items)} item(s) for user {args.user!r}\n")
            return 0
        finally:
            await memory.close()

    return asyncio.run(act())


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
