"""bench/instructions.py runs: its children (without valgrind) and its refusals.

The benchmark itself runs for minutes under valgrind and is never run in CI; these keep
what it runs from rotting when engine_overhead.py's helpers change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "instructions.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=240, check=False)


@pytest.mark.parametrize(("peer", "mode"), [
    ("hand", "sequential"), ("hand", "concurrent"), ("hermes", "sequential"),
    ("hermes_nolog", "concurrent"), ("default_on", "sequential"),
    ("default_log", "sequential")])
def test_each_child_runs_its_turns(peer: str, mode: str) -> None:
    proc = run("--child", peer, mode, "1", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_an_unknown_peer_is_refused_with_the_known_ones() -> None:
    proc = run("--peers", "hermes,langgraph")
    assert proc.returncode != 0
    assert "unknown peer or mode 'langgraph'" in proc.stderr
    assert "hermes_nolog" in proc.stderr


def test_compare_needs_a_checkout(tmp_path: Path) -> None:
    proc = run("--compare", str(tmp_path))
    assert proc.returncode != 0
    assert "no hermes_fsm package there" in proc.stderr
