"""``hermes-fsm memory search|list|show|forget|rollback|archive|restore --user U``: look
into, clear, roll back and archive a user's memory (``show --as-of TIME``: the profile as it
was; ``archive``: stale items to cold storage, ``restore``: back). ``memory optimize``
builds the embedded store's search index (maintenance, at a quiet moment).

Registered from :mod:`hermes_fsm.cli.main`; uses the memory the configuration describes
(embedded: the data dir; or the services of ``HERMES_*_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from hermes_fsm.errors import UsageError

__all__ = ["add_memory_parser", "run_memory"]


def add_memory_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``memory`` command to the CLI's subparsers."""
    memory = sub.add_parser("memory", parents=[common],
                            help="a user's memory: search, list, forget")
    memory.add_argument("action", choices=["search", "list", "show", "forget", "rollback",
                                           "archive", "restore", "migrate", "optimize"],
                        help="search: the items recalled for QUERY; list: every active item; "
                             "show: the profile (with --as-of, as it was then); forget: erase "
                             "the items that mention QUERY, or the whole user with --all; "
                             "rollback: make the profile what it was at --as-of; archive: "
                             "move stale items (superseded or deleted over --stale-days ago, "
                             "or past their type's TTL) to the archive; restore: put archived "
                             "item ITEM_ID (or --all) back, or list the archive; migrate: move "
                             "an old embedded store (data_dir/qdrant, qdrant-client local "
                             "mode) into the Qdrant Edge store (no --user); optimize: build "
                             "the embedded Edge store's HNSW index, so recall of a user with "
                             "many items stays fast (blocking, seconds to minutes: run it "
                             "while no server holds the store; no --user)")
    memory.add_argument("query", nargs="?", default="",
                        help="search: the text to recall for; forget: the text the items "
                             "to erase mention (key, value or message); restore: an "
                             "archived item's id")
    memory.add_argument("--user", default=None,
                        help="the user id (every action but migrate needs it)")
    memory.add_argument("-k", type=int, default=5, help="search: how many items (default 5)")
    memory.add_argument("--all", action="store_true",
                        help="list: include superseded and deleted items; forget: the whole "
                             "user, in memory and in the session store")
    memory.add_argument("--yes", action="store_true",
                        help="forget: do not ask for confirmation")
    memory.add_argument("--json", action="store_true", help="print JSON lines")
    memory.add_argument("--stale-days", dest="stale_days", type=float, default=90.0,
                        metavar="DAYS", help="archive: how long ago an item must have been "
                        "superseded or deleted (default 90)")
    memory.add_argument("--as-of", dest="as_of", metavar="TIME", default=None,
                        help="show: the profile as it was at TIME (ISO 8601, UTC unless it "
                        "says); rollback: make the profile what it was at TIME")


def run_memory(args: argparse.Namespace, config: Any, out: TextIO,
               stdin: TextIO | None = None) -> int:
    """Run ``memory search|list|forget``; returns the exit code.

    ``forget`` asks on ``stdin`` (default: the process's) unless ``--yes`` is given; an
    answer other than ``y``/``yes``, or no answer at all, forgets nothing and returns 1.
    """
    if args.action in ("migrate", "optimize"):
        if args.user or args.query:
            raise UsageError(f"memory {args.action} works on the whole store: it takes no "
                             "--user and no query")
        return asyncio.run(_migrate(config, out) if args.action == "migrate"
                           else _optimize(config, args.json, out))
    if not args.user:
        raise UsageError(f"memory {args.action} needs --user U: hermes-fsm memory "
                         f"{args.action} --user alice")
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
    as_of = _time(getattr(args, "as_of", None))
    if args.action == "rollback" and as_of is None:
        raise UsageError("memory rollback needs --as-of TIME: hermes-fsm memory rollback "
                         "--user U --as-of 2026-03-01T12:00")
    if args.action == "archive" and args.query:
        raise UsageError(f"memory archive takes no query (got {args.query!r}): it moves "
                         "every stale item of the user; see --stale-days")
    if args.action == "restore" and args.all and args.query:
        raise UsageError(f"memory restore takes an item id or --all, not both (got "
                         f"{args.query!r} and --all)")
    from hermes_fsm.config.memory import build_archive, build_memory
    from hermes_fsm.memory.profile import profile_as_of

    memory = build_memory(config.memory)

    async def act() -> int:
        try:
            if args.action in ("archive", "restore"):
                return await _archive(memory, build_archive(config.memory), args, out)
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
            def line(item: Any) -> str:
                score = f"  score {item.score:.3f}" if item.score is not None else ""
                said = f"  said: {item.text!r}" if args.action == "show" and item.text else ""
                return (f"[{item.created_at:%Y-%m-%d}] {item.status:<10} {item.key}: "
                        f"{item.value} (confidence {item.confidence:.2f}){score}{said}")

            _write_items(out, items, args, "", lambda item: {**item.to_payload(),
                                                             "score": item.score}, line)
            return 0
        finally:
            await memory.close()

    return asyncio.run(act())


async def _migrate(config: Any, out: TextIO) -> int:
    """``memory migrate``: the old ``data_dir/qdrant`` into ``data_dir/edge``."""
    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
    from hermes_fsm.memory.migrate import migrate_qdrant_local

    memory = build_memory(config.memory)
    try:
        if not isinstance(memory.semantic, EdgeSemanticStore):
            raise UsageError("memory migrate moves an old store into the embedded Qdrant "
                             "Edge store, and the configuration uses another "
                             "(memory.qdrant_url or memory.embedded_semantic is set)")
        moved = await migrate_qdrant_local(memory.semantic.path.parent, memory.semantic,
                                           collection=config.memory.qdrant_collection)
        old = memory.semantic.path.parent / "qdrant"
        out.write(f"moved {moved} item(s) from {old} into {memory.semantic.path} (the old "
                  f"store is kept at {old.with_name('qdrant.migrated')})\n")
        return 0
    finally:
        await memory.close()


async def _optimize(config: Any, as_json: bool, out: TextIO) -> int:
    """``memory optimize``: Edge's optimizers (HNSW build) on the embedded store."""
    import time

    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.edge_semantic import EdgeSemanticStore

    memory = build_memory(config.memory)
    try:
        store = memory.semantic
        if not isinstance(store, EdgeSemanticStore):
            raise UsageError("memory optimize builds the embedded Qdrant Edge store's index, "
                             "and the configuration uses another (memory.qdrant_url or "
                             "memory.embedded_semantic is set): a Qdrant server indexes "
                             "by itself")
        before = await store.index_status()
        started = time.perf_counter()
        changed = await store.optimize()
        seconds = time.perf_counter() - started
        after = await store.index_status()
        if as_json:
            out.write(json.dumps({"before": before, "after": after, "changed": changed,
                                  "seconds": round(seconds, 3)}) + "\n")
        else:
            out.write(f"{store.path}: {after['points']} point(s), {after['indexed']} indexed "
                      f"in {after['segments']} segment(s) (before: {before['indexed']} in "
                      f"{before['segments']}); {seconds:.1f} s\n")
        return 0
    finally:
        await memory.close()


async def _archive(memory: Any, archive: Any, args: argparse.Namespace, out: TextIO) -> int:
    """``memory archive``: move the user's stale items; ``memory restore``: put archived
    items back (by id, or ``--all``), or list the archive (neither)."""
    try:
        if args.action == "archive":
            items = await memory.archive_stale(args.user, archive,
                                               stale_after_days=args.stale_days)
            verb = "archived"
        else:
            archived = await archive.items(args.user)
            if not args.all and not args.query:
                items, verb = archived, "in the archive"
            else:
                wanted = [i.item_id for i in archived] if args.all else [args.query]
                if args.query and args.query not in {i.item_id for i in archived}:
                    raise UsageError(f"no archived item {args.query!r} for user {args.user!r}: "
                                     f"'hermes-fsm memory restore --user {args.user}' lists "
                                     "the archive")
                items = await memory.restore(args.user, archive, wanted)
                verb = "restored"
        _write_items(out, items, args, f" {verb}",
                     lambda item: {**item.to_payload(), "action": verb},
                     lambda item: (f"{item.item_id}  [{item.created_at:%Y-%m-%d}] "
                                   f"{item.status:<10} {item.key}: {item.value}"))
        return 0
    finally:
        await archive.close()


def _write_items(out: TextIO, items: list[Any], args: argparse.Namespace, verb: str,
                 payload: Callable[[Any], dict[str, Any]], line: Callable[[Any], str]) -> None:
    """Memory items a line each (``--json``: an object each), then the count (not with --json)."""
    for item in items:
        out.write((json.dumps(payload(item), ensure_ascii=False) if args.json else line(item))
                  + "\n")
    if not args.json:
        out.write(f"{len(items)} item(s){verb} for user {args.user!r}\n")


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
    from hermes_fsm.config.memory import build_memory

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
    from hermes_fsm.memory.profile import rollback_updates

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
    from hermes_fsm.config.build import build_orchestrator

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
