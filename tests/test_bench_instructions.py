"""bench/instructions.py runs: its children (without valgrind) and its refusals.

The benchmark itself runs for minutes under valgrind and is never run in CI; these keep
what it runs from rotting when engine_overhead.py's helpers change.
"""

from __future__ import annotations

import re
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


@pytest.mark.parametrize(("peer", "mode", "in_flight"), [
    ("hermes", "sequential", 1), ("hermes", "at_once", 1), ("hand", "at_once", 1),
    ("hermes", "concurrent", 20), ("hermes", "no_gc", 20), ("hand", "no_gc", 20)])
def test_each_mode_runs_as_many_turns_at_once_as_it_says(peer: str, mode: str,
                                                          in_flight: int) -> None:
    """at_once starts its turns together but none suspends (one in flight at a time);
    concurrent and no_gc hold every turn of a batch in flight; only no_gc stops the
    collector."""
    proc = run("--child", peer, mode, "1", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = re.search(r"at most (\d+) of 20 turns in flight at once; (\d+) collections",
                     proc.stderr)
    assert said is not None, proc.stderr[-2000:]
    assert int(said.group(1)) == in_flight
    collections = int(said.group(2))
    assert collections == 0 if mode == "no_gc" else mode == "sequential" or collections > 0


def test_an_unknown_peer_is_refused_with_the_known_ones() -> None:
    proc = run("--peers", "hermes,langgraph")
    assert proc.returncode != 0
    assert "unknown peer or mode 'langgraph'" in proc.stderr
    assert "hermes_nolog" in proc.stderr


def test_an_unknown_mode_is_refused_with_the_known_ones() -> None:
    proc = run("--modes", "concurrent,parallel")
    assert proc.returncode != 0
    assert "unknown peer or mode 'parallel'" in proc.stderr
    assert "at_once, no_gc" in proc.stderr


def test_compare_needs_a_checkout(tmp_path: Path) -> None:
    proc = run("--compare", str(tmp_path))
    assert proc.returncode != 0
    assert "no hermes_fsm package there" in proc.stderr
