"""``hermes-fsm memory search|list|forget --user U``: look into and clear a user's memory.

Registered from :mod:`hermes_fsm.cli.main`; uses the memory the configuration describes
(embedded: the data dir; or the services of ``HERMES_*_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.memory import build_memory
from hermes_fsm.errors import UsageError

__all__ = ["add_memory_parser", "run_memory"]


def add_memory_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``memory`` command to the CLI's subparsers."""
    memory = sub.add_parser("memory", parents=[common],
                            help="a user's memory: search, list, forget")
    memory.add_argument("action", choices=["search", "list", "forget"],
                        help="search: the items recalled for QUERY; list: every active item; "
                             "forget: erase the items that mention QUERY, or the whole user "
                             "with --all")
    memory.add_argument("query", nargs="?", default="",
                        help="search: the text to recall for; forget: the text the items "
                             "to erase mention (key, value or message)")
    memory.add_argument("--user", required=True, help="the user id")
    memory.add_argument("-k", type=int, default=5, help="search: how many items (default 5)")
    memory.add_argument("--all", action="store_true",
                        help="list: include superseded and deleted items; forget: the whole "
                             "user, in memory and in the session store")
    memory.add_argument("--yes", action="store_true",
                        help="forget: do not ask for confirmation")
    memory.add_argument("--json", action="store_true", help="print JSON lines")


def run_memory(args: argparse.Namespace, config: Any, out: TextIO,
               stdin: TextIO | None = None) -> int:
    """Run ``memory search|list|forget``; returns the exit code.

    ``forget`` asks on ``stdin`` (default: the process's) unless ``--yes`` is given; an
    answer other than ``y``/``yes``, or no answer at all, forgets nothing and returns 1.
    """
    if args.action == "search" and not args.query.strip():
        raise UsageError("memory search needs a query: hermes-fsm memory search 'TEXT' --user U")
    if args.action == "list" and args.query:
        raise UsageError(f"memory list takes no query (got {args.query!r}); use "
                         "'hermes-fsm memory search QUERY --user U' to search")
    if args.action != "forget" and args.yes:
        raise UsageError("--yes only applies to 'memory forget'")
    if args.action == "forget":
        if args.all and args.query:
            raise UsageError(f"memory forget takes a query or --all, not both (got "
                             f"{args.query!r} and --all)")
        if not args.all and not args.query.strip():
            raise UsageError("memory forget needs what to forget: 'hermes-fsm memory forget "
                             "TEXT --user U' erases the items mentioning TEXT, 'hermes-fsm "
                             "memory forget --all --user U' the whole user")
        if args.all:
            if not _confirmed(args, f"forget everything about user {args.user!r} (memory, "
                                    "sessions, experience log)?", stdin, out):
                return 1
            return asyncio.run(_forget(config, args.user, args.json, out))
        return asyncio.run(_forget_matching(config, args, out, stdin))
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


def _confirmed(args: argparse.Namespace, question: str, stdin: TextIO | None,
               out: TextIO) -> bool:
    """``--yes``, or a ``y``/``yes`` typed on stdin; anything else (EOF too) says no."""
    if args.yes:
        return True
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = (stdin or sys.stdin).readline().strip().lower()
    if answer in ("y", "yes"):
        return True
    sys.stderr.write("\nnothing forgotten" + (" (no answer on stdin; pass --yes to forget "
                                              "without asking)" if not answer else "") + "\n")
    return False


async def _forget_matching(config: Any, args: argparse.Namespace, out: TextIO,
                           stdin: TextIO | None) -> int:
    """Erase the items of ``args.user`` mentioning ``args.query`` (after confirmation)."""
    memory = build_memory(config.memory)
    try:
        matching = await memory.matching(args.user, args.query)
        if not matching:
            out.write(f"no item of user {args.user!r} mentions {args.query!r}; nothing "
                      "forgotten\n")
            return 0
        if not args.json:
            for item in matching:
                out.write(f"  {item.status:<10} {item.key}: {item.value}\n")
        if not _confirmed(args, f"forget these {len(matching)} item(s) of user "
                                f"{args.user!r}?", stdin, out):
            return 1
        erased = await memory.forget_matching(args.user, args.query)
        if args.json:
            out.write(json.dumps({"user_id": args.user, "query": args.query,
                                  "forgotten": [i.item_id for i in erased]},
                                 ensure_ascii=False) + "\n")
        else:
            out.write(f"forgot {len(erased)} item(s) of user {args.user!r} mentioning "
                      f"{args.query!r}\n")
        return 0
    finally:
        await memory.close()


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
