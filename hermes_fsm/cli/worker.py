"""``hermes-fsm worker [--group G] [--concurrency N]`` and ``hermes-fsm workers list``.

Registered from :mod:`hermes_fsm.cli.main`. A worker serves the tools of ``bus.registry``
(all of them, or ``bus.tools``) for one tool group of the Redis bus (``HERMES_BUS_URL``),
each call sandboxed (``bus.sandbox``), fenced by the session store's effects journal
(``HERMES_POSTGRES_URL`` in real use). ``SIGTERM``/``SIGINT`` stop it after its running
calls; a worker killed outright leaves them to be reclaimed by another.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from typing import TYPE_CHECKING, Any, TextIO

from hermes_fsm.errors import ConfigError

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["add_worker_parsers", "run_worker", "run_workers"]


def add_worker_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``worker`` and ``workers`` commands to the CLI's subparsers."""
    worker = sub.add_parser("worker", parents=[common],
                            help="serve tool calls from the Redis bus, sandboxed")
    worker.add_argument("--group", help="the tool group to serve (default: bus.group)")
    worker.add_argument("--concurrency", type=int, metavar="N",
                        help="calls at once (default: bus.concurrency)")
    worker.add_argument("--id", dest="worker_id", help="the worker's name (default: host-pid)")
    workers = sub.add_parser("workers", parents=[common],
                             help="the live workers of the Redis bus")
    workers.add_argument("action", choices=["list"], help="list: each live worker, its tools, "
                         "in-flight calls and last heartbeat")
    workers.add_argument("--json", action="store_true", help="one JSON document")


def run_worker(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """Serve until interrupted."""
    from hermes_fsm.config.bus import build_worker

    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigError(f"--concurrency {args.concurrency}: give at least 1")
    setup = build_worker(config, group=args.group, concurrency=args.concurrency,
                         worker_id=args.worker_id)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        w = setup.worker
        out.write(f"worker {w.worker_id} serving group {w.group!r} on {setup.bus.name}: "
                  f"{', '.join(sorted(w.tools))} ({w.concurrency} at once)\n")
        out.flush()
        await setup.run(stop)

    asyncio.run(serve())
    return 0


def run_workers(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """List the workers whose heartbeat is live."""
    from hermes_fsm.config.bus import build_bus

    if config.bus.kind != "redis":
        raise ConfigError("workers list reads the Redis bus: set HERMES_BUS_URL (or bus: "
                          "{kind: redis} in the config file)")
    bus = build_bus(config)
    assert bus is not None

    async def survey() -> list[Any]:
        try:
            return await bus.workers()
        finally:
            await bus.aclose()

    workers = asyncio.run(survey())
    if args.json:
        out.write(json.dumps({"workers": [w.as_dict() for w in workers]}, indent=2) + "\n")
        return 0
    if not workers:
        out.write("no live workers\n")
        return 0
    now = time.time()
    for w in workers:
        out.write(f"{w.worker_id}  group={w.group}  in_flight={w.in_flight}/{w.concurrency}  "
                  f"served={w.served}  heartbeat={now - w.last_heartbeat:.1f}s ago  "
                  f"tools={','.join(w.tools)}\n")
    return 0
