"""bench/profile_turn.py: its children, how it reads and groups py-spy's stacks, its
refusals, and one real profile when py-spy is installed (the test extra has it).

The benchmark is run by hand, never timed in CI; these keep it from rotting when the
engine's functions or engine_overhead.py's helpers change.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "profile_turn.py"
ORCHESTRATOR = Path(__file__).resolve().parents[1] / "hermes_fsm" / "engine" / "orchestrator.py"


def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profile_turn", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(path: Path, text: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


@pytest.mark.parametrize(("peer", "mode"), [
    ("hermes", "sequential"), ("hermes_nolog", "concurrent"), ("hand", "sequential"),
    ("tool", "sequential")])
def test_each_child_runs_its_turns(peer: str, mode: str) -> None:
    proc = run("--child", peer, mode, "0.05")
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = re.search(r"per CPU-second under the profiler; the garbage collector "
                     r"(\d+\.\d) % of that CPU time \((\d+) collections\)", proc.stderr)
    assert said is not None, proc.stderr[-2000:]
    assert 0 <= float(said.group(1)) < 100
    if mode == "concurrent":  # 1,000 turns in flight: their objects outlive young passes
        assert int(said.group(2)) > 0


def test_the_collector_is_timed_only_while_on() -> None:
    profile = load()
    collector = profile.Collector()
    try:
        gc.collect()
        assert collector.collections == 0 and collector.seconds == 0.0
        kept = [[i] for i in range(200_000)]  # something for a full pass to walk
        collector.on = True
        gc.collect()
        gc.collect()
        assert collector.collections == 2 and collector.seconds > 0
        assert collector.says(collector.seconds * 4) == (
            "the garbage collector 25.0 % of that CPU time (2 collections)")
        collector.on = False
        gc.collect()
        assert collector.collections == 2
        del kept
    finally:
        gc.callbacks.remove(collector._observe)


def test_samples_go_to_the_innermost_part_a_rule_names() -> None:
    profile = load()
    validate = line_of(ORCHESTRATOR, "output = fast(raw, context=context)")
    loop = line_of(ORCHESTRATOR, "raw = handler(turn)")
    root = "_hermes_turn.<locals>.turn (bench/engine_overhead.py:303)"
    raw = [
        f"<module> (x.py:1);{root};Orchestrator.run_turn ({ORCHESTRATOR}:360);"
        f"Orchestrator._run_state ({ORCHESTRATOR}:{validate}) 6",
        f"<module> (x.py:1);{root};Orchestrator._run_state ({ORCHESTRATOR}:{loop});"
        "h_intent (bench/engine_overhead.py:130) 3",
        f"<module> (x.py:1);{root};Orchestrator._run_state ({ORCHESTRATOR}:{loop}) 1",
        f"<module> (x.py:1);{root};GraphMachine.fire (machine.py:111);"
        "TurnContext.on_transition (turn.py:300) 2",
        f"<module> (x.py:1);{root};something_else (y.py:4) 2",
        "<module> (x.py:1);_hermes_orchestrator (bench/engine_overhead.py:280) 50",
        "not a stack line",
    ]
    stacks = profile.read_raw(raw)
    assert len(stacks) == 6
    text = profile.report(stacks, "_hermes_turn.<locals>.turn")
    assert text.startswith("14 samples inside _hermes_turn.<locals>.turn"), text
    assert "50 outside it" in text
    assert "| contract validation (the workload's) | 42.9 % |" in text
    assert "| handlers (the workload's) | 21.4 % |" in text
    assert "| transitions: guard, exit and entry events | 14.3 % |" in text
    assert "| the state loop (handler calls, plan, checks) | 7.1 % |" in text
    assert "| other | 14.3 % |" in text
    # the hottest line of the function is named with its source
    assert f"orchestrator.py:{validate} `output = fast(raw, context=context)`" in text


def test_a_profile_without_turn_samples_says_so() -> None:
    profile = load()
    text = profile.report(profile.read_raw(["<module> (x.py:1) 5"]), "_hand_turn")
    assert text == "no sample inside _hand_turn (of 5): was the profile too short?"


def test_a_py_spy_path_that_is_no_executable_is_refused(tmp_path: Path) -> None:
    proc = run("--py-spy", str(tmp_path / "py-spy"), "--seconds", "1")
    assert proc.returncode != 0
    assert "not an executable file" in proc.stderr


def test_no_py_spy_anywhere_is_refused_with_how_to_install(tmp_path: Path) -> None:
    # the base interpreter (not the venv's, which has py-spy beside it) and an empty PATH;
    # the script needs only the standard library until it has found py-spy
    python = Path(getattr(sys, "_base_executable", sys.executable))
    if (python.parent / "py-spy").is_file():
        pytest.skip(f"py-spy is installed beside {python}")
    proc = subprocess.run([str(python), str(SCRIPT), "--seconds", "1"], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert proc.returncode != 0
    assert "py-spy is not installed: .venv/bin/pip install py-spy" in proc.stderr


def test_wrong_arguments_are_refused() -> None:
    proc = run("--peer", "langgraph")
    assert proc.returncode == 2 and "invalid choice: 'langgraph'" in proc.stderr
    proc = run("--seconds", "0", "--py-spy", sys.executable)
    assert proc.returncode != 0 and "--seconds and --rate must be above 0" in proc.stderr


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


@pytest.mark.skipif(_py_spy() is None, reason="py-spy is not installed (the test and bench "
                                              "extras install it)")
def test_a_real_profile_of_the_turn_names_its_parts(tmp_path: Path) -> None:
    raw = tmp_path / "stacks.raw"
    proc = run("--seconds", "2", "--rate", "500", "--raw", str(raw))
    if proc.returncode != 0 and "Permission denied" in proc.stderr:
        pytest.skip("py-spy may not read another process here (ptrace is not allowed)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "turns per CPU-second under the profiler" in out
    for part in ("contract validation (the workload's)", "session log: the turn's JSON, kept",
                 "transitions: guard, exit and entry events", "handlers (the workload's)"):
        assert f"| {part} | " in out, out
    assert raw.stat().st_size > 0


@pytest.mark.skipif(_py_spy() is None, reason="py-spy is not installed (the test and bench "
                                              "extras install it)")
def test_a_real_profile_of_a_tool_call_names_its_parts() -> None:
    proc = run("--peer", "tool", "--seconds", "1", "--rate", "500")
    if proc.returncode != 0 and "Permission denied" in proc.stderr:
        pytest.skip("py-spy may not read another process here (ptrace is not allowed)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for part in ("the arguments' check (the tool's schema)",
                 "events: the turn's, the outputs', the tool calls'",
                 "the executor (lookup, permission, breaker, outcome)"):
        assert f"| {part} | " in proc.stdout, proc.stdout


def test_a_child_that_fails_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "py-spy"  # runs the command after "--" as py-spy would, exits 0
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done; shift\n'
                    '"$@" --peer-that-does-not-exist 2>/dev/null; : > "$RAW"; exit 0\n')
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--py-spy", str(fake), "--seconds",
                           "1", "--raw", str(tmp_path / "raw")], capture_output=True,
                          text=True, timeout=240, check=False,
                          env={**os.environ, "RAW": str(tmp_path / "raw")})
    assert proc.returncode != 0
    assert "the profiled child failed" in proc.stderr
