"""``hermes-fsm explain SESSION [--turn N] [--json]``: the evidence chain of a turn.

``SESSION`` is a recording (a ``.jsonl`` file from ``run --record``) or the id of a
session in the configured session store (SQLite in the data dir, or PostgreSQL). For each
turn (or turn ``N``, counted from 1) it prints ``[user message] → [intent node] → [tool
call] → [tool result] → [facts] → [answer]`` with the ids that link them (see
:mod:`hermes_fsm.events.evidence`); ``--json`` prints the chains as one JSON document.

Registered from :mod:`hermes_fsm.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes_fsm.errors import UsageError

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["add_explain_parser", "run_explain"]


def add_explain_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``explain`` command to the CLI's subparsers."""
    explain = sub.add_parser("explain", parents=[common],
                             help="the evidence chain of a session's turns (message → intent "
                                  "→ tool call → result → facts → answer)")
    explain.add_argument("session",
                         help="a recording (.jsonl from run --record) or a stored session's id")
    explain.add_argument("--turn", type=int, metavar="N",
                         help="only turn N (1 is the session's first)")
    explain.add_argument("--json", action="store_true", help="print the chains as JSON")


def run_explain(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """Run ``explain``; returns the exit code."""
    from hermes_fsm.events.evidence import chain_text, evidence_chains

    events = _events(args.session, config)
    chains = evidence_chains(events)
    if not chains:
        raise UsageError(f"session {args.session!r} has no turns to explain")
    if args.turn is not None:
        if not 1 <= args.turn <= len(chains):
            raise UsageError(f"--turn {args.turn}: session {args.session!r} has "
                             f"{len(chains)} turn(s); give 1 to {len(chains)}")
        chains = [chains[args.turn - 1]]
    if args.json:
        out.write(json.dumps({"session": args.session, "turns": chains}, ensure_ascii=False,
                             indent=2, default=str) + "\n")
        return 0
    out.write("\n".join(chain_text(c) for c in chains))
    return 0


def _events(session: str, config: HermesConfig) -> list[dict[str, Any]]:
    from hermes_fsm.config.store import build_store
    from hermes_fsm.events.recording import load_recording

    path = Path(session)
    if path.suffix == ".jsonl" or path.is_file():
        if not path.is_file():
            raise UsageError(f"no recording at {session}; give a .jsonl file from "
                             "'hermes-fsm run --record DIR' or a stored session's id")
        return list(load_recording(path).raw)

    async def stored() -> list[dict[str, Any]]:
        store = build_store(config)
        await store.open()
        try:
            return await store.events_after(session, 0)
        finally:
            await store.close()

    events = asyncio.run(stored())
    if not events:
        where = config.sessions.store
        raise UsageError(f"no session {session!r} in the session store ({where}); give a "
                         "recording (.jsonl) or the id of a stored session (see "
                         "'hermes-fsm sessions list --user U')")
    return events
