"""Sandboxed tool execution: a pool of child processes with resource limits.

Each call runs in a child of the pool (:mod:`hermes_fsm.tools.bus.child`), one call per
child at a time, so a sync tool blocks nothing but its own child. A child runs:

- under ``setrlimit`` limits: CPU seconds (``SIGXCPU`` ends it), address space (an
  allocation past it fails with ``MemoryError``), open files, and processes (``nproc``:
  for an unprivileged user only — root is exempt; the wall-clock kill below still ends a
  fork bomb's whole process group);
- in a session and process group of its own, killed as a group (``SIGKILL``) at the
  call's budget, and replaced;
- with a scrubbed environment (only ``PATH``, the locale, ``PYTHONPATH`` and the
  variables the configuration passes), ``HOME`` and working directory a fresh temporary
  directory of its own;
- optionally as another user (``user:``, when the worker runs as root).

A child that dies (killed, out of CPU time, crashed) is replaced before it takes another
call; the call it was running fails with a structured error.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

__all__ = ["InlineRunner", "SandboxLimits", "SandboxOutcome", "SandboxPool"]

_CHILD = "import sys; from hermes_fsm.tools.bus.child import main; sys.exit(main(sys.argv[1:]))"
_READ_LIMIT = 64 * 1024 * 1024  # an answer's line; the executor bounds outputs further
_READ_CHUNK = 64 * 1024
_DRAIN_S = 1.0  # how long a killed child's stdout is read for its end


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """The limits of one child (``None``: not limited)."""

    cpu_s: int | None = 30
    as_bytes: int | None = 1024 * 1024 * 1024
    nofile: int | None = 256
    nproc: int | None = None
    user: str | None = None
    env: tuple[str, ...] = ()
    """Names of environment variables the tools may see (beyond PATH and the locale)."""


@dataclass(slots=True)
class SandboxOutcome:
    """What one sandboxed call came to: ``ok`` with ``output``, or a structured error."""

    ok: bool
    output: Any = None
    code: str = ""
    message: str = ""
    retryable: bool | None = False
    """``None``: the tool's contract decides (it raised ``ToolCallFailed`` without saying)."""
    duration_ms: float = 0.0


@dataclass(slots=True, eq=False)
class _Child:
    process: asyncio.subprocess.Process
    workdir: str
    calls: int = 0
    started: float = field(default_factory=time.monotonic)


class SandboxPool:
    """Children that run tools of the registry ``target`` names, ``size`` calls at a time.

    Args:
        target: ``module:attribute`` of a :class:`~hermes_fsm.tools.registry.ToolRegistry`
            (or of a callable returning one), imported in each child.
        size: children (calls that may run at once).
        limits: each child's limits.
        python: the interpreter of the children (default: this one).
    """

    def __init__(self, target: str, size: int = 2, limits: SandboxLimits | None = None,
                 python: str | None = None) -> None:
        self.target = target
        self.size = size
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self._idle: asyncio.Queue[_Child] = asyncio.Queue()
        self._children: set[_Child] = set()
        self.replaced = 0
        self._started = False
        self._replacing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start the children (idempotent)."""
        if self._started:
            return
        self._started = True
        children = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for child in children:
            self._idle.put_nowait(child)

    def _env(self, workdir: str) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", *self.limits.env)
        env = {k: os.environ[k] for k in keep if k in os.environ}
        # the worker's imports, and its working directory (where a user's tools live)
        paths = [os.path.abspath(p or ".") for p in (*sys.path, os.getcwd())]
        paths = list(dict.fromkeys(p for p in paths if os.path.isdir(p)))
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["HOME"] = workdir
        env["TMPDIR"] = workdir
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        limits: dict[str, Any] = {"cpu_s": self.limits.cpu_s, "as_bytes": self.limits.as_bytes,
                                  "nofile": self.limits.nofile, "nproc": self.limits.nproc}
        if self.limits.user is not None and os.geteuid() == 0:
            account = pwd.getpwnam(self.limits.user)
            limits.update(uid=account.pw_uid, gid=account.pw_gid)
        env["HERMES_SANDBOX_LIMITS"] = json.dumps(limits)
        return env

    async def _spawn(self) -> _Child:
        workdir = tempfile.mkdtemp(prefix="hermes-tool-")
        if self.limits.user is not None and os.geteuid() == 0:
            account = pwd.getpwnam(self.limits.user)
            os.chown(workdir, account.pw_uid, account.pw_gid)
        process = await asyncio.create_subprocess_exec(
            self.python, "-c", _CHILD, self.target,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=None, cwd=workdir, env=self._env(workdir), start_new_session=True,
            limit=_READ_LIMIT)
        child = _Child(process, workdir)
        assert process.stdout is not None
        try:
            line = await process.stdout.readline()
        except BaseException:  # cancelled (the pool closes): no child is left behind
            await self._kill(child)
            raise
        if not line.startswith(b'{"ready"'):
            await self._kill(child)
            raise RuntimeError(f"a sandbox child for {self.target!r} did not start (exit "
                               f"{process.returncode}); run 'python -m "
                               f"hermes_fsm.tools.bus.child {self.target}' to see why")
        self._children.add(child)
        return child

    async def _kill(self, child: _Child) -> None:
        process = child.process
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()  # its transport closes with the process, not after the loop
        for _ in range(3):  # again: a fork bomb may have forked while the group was killed
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                break
            await asyncio.sleep(0.005)
        try:
            process.kill()
        except ProcessLookupError:
            pass
        await process.wait()
        # wait() returns at the exit; the stdout pipe may still be open (not yet read to
        # its end, or held by a process that left the group). Read it to its end, briefly,
        # so that the transport closes now and not after its event loop has (a warning from
        # BaseSubprocessTransport.__del__ at interpreter or test teardown).
        if process.stdout is not None:
            try:
                async with asyncio.timeout(_DRAIN_S):
                    while await process.stdout.read(_READ_CHUNK):
                        pass
            except (TimeoutError, OSError, ValueError):
                pass  # held open past the wait: the transport closes when it ends
        self._children.discard(child)
        shutil.rmtree(child.workdir, ignore_errors=True)

    async def _replace(self, child: _Child) -> None:
        await self._kill(child)
        self.replaced += 1
        while True:
            try:
                self._idle.put_nowait(await self._spawn())
                return
            except Exception:  # cannot start one now (fork limits, memory): try again
                await asyncio.sleep(0.5)

    def _replace_later(self, child: _Child) -> None:
        task = asyncio.get_running_loop().create_task(self._replace(child))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def run(self, tool: str, arguments: dict[str, Any], budget_s: float
                  ) -> SandboxOutcome:
        """Run one call in an idle child; killed (and replaced) at ``budget_s``."""
        await self.start()
        started = time.perf_counter()
        try:  # the wait for a free child counts against the budget too
            async with asyncio.timeout(budget_s):
                child = await self._idle.get()
        except TimeoutError:
            return SandboxOutcome(False, code="SERVER_UNAVAILABLE", retryable=True,
                                  message=f"no sandbox of the pool was free within {tool}'s "
                                  f"budget of {budget_s:g}s; it was not started",
                                  duration_ms=(time.perf_counter() - started) * 1000)
        budget_s = max(0.001, budget_s - (time.perf_counter() - started))
        process = child.process
        assert process.stdin is not None and process.stdout is not None
        line = json.dumps({"tool": tool, "arguments": arguments}).encode() + b"\n"
        try:
            async with asyncio.timeout(budget_s):
                process.stdin.write(line)
                await process.stdin.drain()
                answer = await process.stdout.readline()
        except TimeoutError:
            self._replace_later(child)
            return SandboxOutcome(False, code="TIMEOUT", retryable=False,
                                  message=f"{tool} did not answer within its budget of "
                                  f"{budget_s:g}s; its process was killed",
                                  duration_ms=(time.perf_counter() - started) * 1000)
        except (ConnectionError, BrokenPipeError, asyncio.CancelledError) as exc:
            self._replace_later(child)
            if isinstance(exc, asyncio.CancelledError):
                raise
            answer = b""
        elapsed = (time.perf_counter() - started) * 1000
        if not answer:  # the child died under the call
            code = await process.wait()
            self._replace_later(child)
            why = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                   else f"exited with {code}")
            limit = " (its CPU time limit)" if code == -signal.SIGXCPU else ""
            return SandboxOutcome(False, code="RESOURCE_LIMIT" if limit else "TOOL_CRASHED",
                                  message=f"{tool}'s process {why}{limit}", retryable=False,
                                  duration_ms=elapsed)
        child.calls += 1
        self._idle.put_nowait(child)
        try:
            doc = from_json(answer)
        except ValueError:
            return SandboxOutcome(False, code="TOOL_EXCEPTION", duration_ms=elapsed,
                                  message=f"{tool}'s process answered what is not JSON")
        if doc.get("ok"):
            return SandboxOutcome(True, output=doc.get("output"), duration_ms=elapsed)
        return SandboxOutcome(False, code=str(doc.get("code", "TOOL_EXCEPTION")),
                              message=str(doc.get("message", "")),
                              retryable=doc.get("retryable"), duration_ms=elapsed)

    async def aclose(self) -> None:
        """Kill every child (idempotent)."""
        for task in list(self._replacing):
            task.cancel()
        if self._replacing:
            await asyncio.gather(*self._replacing, return_exceptions=True)
        for child in list(self._children):
            await self._kill(child)
        self._idle = asyncio.Queue()
        self._started = False


class InlineRunner:
    """Runs calls of a registry's tools in the worker's own process: no isolation.

    For the embedded worker and tests: an async tool on the event loop, a sync one in a
    thread, each under its budget (a sync tool cannot be stopped: it runs on in its
    thread). Use :class:`SandboxPool` to contain tools.
    """

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    async def run(self, tool: str, arguments: dict[str, Any], budget_s: float
                  ) -> SandboxOutcome:
        """One call under ``budget_s``."""
        from hermes_fsm.errors import ToolCallFailed

        started = time.perf_counter()
        found = self.registry.find(tool)

        def took() -> float:
            return (time.perf_counter() - started) * 1000

        if found is None:
            return SandboxOutcome(False, code="UNKNOWN_TOOL", message=f"no tool {tool!r}")
        try:
            async with asyncio.timeout(budget_s):
                if found.blocking:
                    result = await asyncio.to_thread(found.invoke, arguments)
                else:
                    result = found.invoke(arguments)
                if hasattr(result, "__await__"):
                    result = await result
        except TimeoutError:
            return SandboxOutcome(False, code="TIMEOUT", duration_ms=took(),
                                  message=f"{tool} did not answer within {budget_s:g}s")
        except ToolCallFailed as exc:
            return SandboxOutcome(False, code=exc.code, message=exc.message,
                                  retryable=exc.retryable, duration_ms=took())
        except Exception as exc:
            return SandboxOutcome(False, code="TOOL_EXCEPTION", duration_ms=took(),
                                  message=f"{type(exc).__name__}: {exc}")
        return SandboxOutcome(True, output=result, duration_ms=took())
