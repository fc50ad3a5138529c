"""The sandboxed child of a worker's pool: ``python -m hermes_fsm.tools.bus.child TARGET``.

It loads the tool registry ``TARGET`` names (``module:attribute``, a
:class:`~hermes_fsm.tools.registry.ToolRegistry` or a callable returning one), applies the
resource limits it is given in ``HERMES_SANDBOX_LIMITS`` (JSON: ``cpu_s``, ``as_bytes``,
``nofile``, ``nproc``, ``uid``, ``gid``), then serves one call at a time: a JSON line
``{"tool", "arguments"}`` on stdin, a JSON line ``{"ok": true, "output"}`` or
``{"ok": false, "code", "message", "retryable"}`` on its stdout. The CPU limit is per
call: before each one the soft ``RLIMIT_CPU`` is set ``cpu_s`` seconds past what the
child has used. What a tool prints goes
to stderr (the answers' channel is a private copy of stdout).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import resource
import sys
from typing import Any

from pydantic_core import to_json


def load_registry(target: str) -> Any:
    """The registry ``module:attribute`` (or ``module.attribute``) names, called if callable."""
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    value = getattr(importlib.import_module(module_name), attr)
    return value() if callable(value) and not hasattr(value, "find") else value


def _limit(which: int, value: int | None) -> None:
    if value is None:
        return
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY and value > hard:
        value = hard
    resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))


def apply_limits(limits: dict[str, Any]) -> None:
    """Set this process's resource limits and, when asked (and root), drop privileges."""
    if limits.get("gid") is not None:
        os.setgid(int(limits["gid"]))
    if limits.get("uid") is not None:
        os.setuid(int(limits["uid"]))
    _limit(resource.RLIMIT_NOFILE, limits.get("nofile"))
    _limit(resource.RLIMIT_NPROC, limits.get("nproc"))
    _limit(resource.RLIMIT_AS, limits.get("as_bytes"))


def cpu_budget(seconds: int | None) -> None:
    """Allow the next call ``seconds`` of CPU time from now (``SIGXCPU`` past it).

    Only the soft limit moves (the hard one stays), so the budget is per call, not the
    child's lifetime; a process may set its soft limit anywhere up to the hard one.
    """
    if seconds is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + seconds
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _answer(registry: Any, loop: asyncio.AbstractEventLoop, line: bytes,
            cpu_s: int | None) -> dict[str, Any]:
    from hermes_fsm.errors import ToolCallFailed

    cpu_budget(cpu_s)
    try:
        call = json.loads(line)
        tool = registry.find(call["tool"])
        if tool is None:
            return {"ok": False, "code": "UNKNOWN_TOOL", "retryable": False,
                    "message": f"this worker's registry has no tool {call['tool']!r}"}
        result = tool.invoke(call["arguments"])
        if hasattr(result, "__await__"):
            result = loop.run_until_complete(result)
        return {"ok": True, "output": result}
    except ToolCallFailed as exc:
        return {"ok": False, "code": exc.code, "message": exc.message,
                "retryable": exc.retryable}
    except MemoryError:
        return {"ok": False, "code": "RESOURCE_LIMIT", "retryable": False,
                "message": "the tool ran out of its memory limit (address space)"}
    except BlockingIOError as exc:
        return {"ok": False, "code": "RESOURCE_LIMIT", "retryable": False,
                "message": f"the tool hit its process limit: {exc}"}
    except OSError as exc:
        return {"ok": False, "code": "TOOL_EXCEPTION", "retryable": False,
                "message": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # the tool's own failure is an answer, not a dead child
        return {"ok": False, "code": "TOOL_EXCEPTION", "retryable": False,
                "message": f"{type(exc).__name__}: {exc}"}


def die_with_parent() -> None:
    """Ask Linux to kill this process when the worker that started it dies (a call of a
    dead worker must not finish unseen after another worker took it over)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child ends when its stdin closes
        pass


def main(argv: list[str]) -> int:
    """Serve calls until stdin closes."""
    die_with_parent()
    registry = load_registry(argv[0])
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # the tool's prints go to stderr, never into the answers
    limits = json.loads(os.environ.get("HERMES_SANDBOX_LIMITS", "{}"))
    apply_limits(limits)
    loop = asyncio.new_event_loop()
    answers.write(b'{"ready": true}\n')
    for line in sys.stdin.buffer:
        answer = _answer(registry, loop, line, limits.get("cpu_s"))
        try:
            blob = to_json(answer, serialize_unknown=True)
        except Exception as exc:
            blob = to_json({"ok": False, "code": "TOOL_EXCEPTION", "retryable": False,
                            "message": f"the output cannot be written as JSON: {exc}"})
        answers.write(blob + b"\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a child process
    raise SystemExit(main(sys.argv[1:]))
