"""Leaving the ``hermes-fsm`` process without the interpreter's slow teardown.

By the time a command returns, everything durable is written and closed (the
orchestrator's ``aclose``: MCP servers, memory tiers and their background commits, the
session store and lease; the recording sink). What the interpreter would still do is tear
down ~1,000 modules and collect their objects: 0.35–0.75 s of a CLI run (issue 19),
nothing anyone reads. :func:`leave` flushes what is buffered — spans, logging handlers,
stdout and stderr — and ends the process with ``os._exit``; when a thread or a child
process is still alive (something may still be writing), it exits the ordinary way, which
waits for them.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import NoReturn

__all__ = ["leave"]


def leave(code: int) -> NoReturn:
    """End the process with exit status ``code`` once buffered output is flushed."""
    telemetry = sys.modules.get("hermes_fsm.config.telemetry")
    if telemetry is not None:
        telemetry.flush_telemetry()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing left to write
            pass
    if _still_working():
        raise SystemExit(code)
    os._exit(code)


def _still_working() -> bool:
    """A non-daemon thread or a child process is alive: the ordinary exit waits for them."""
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return True
    multiprocessing = sys.modules.get("multiprocessing")
    return multiprocessing is not None and bool(multiprocessing.active_children())
