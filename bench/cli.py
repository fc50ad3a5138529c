"""Whole-process wall time of the ``hermes-fsm`` command (issue 19, "a CLI that starts fast").

Run on demand (never in CI, no timed assertions)::

    .venv/bin/python bench/cli.py                       # this checkout, median of 10
    .venv/bin/python bench/cli.py --base ../base-tree   # and a base checkout, interleaved
    .venv/bin/python bench/cli.py --importtime          # and the -X importtime top entries

Each command runs as the installed script does (``hermes_fsm.cli.main:entry``, or ``main``
in a tree that has no ``entry``), in a fresh interpreter, on embedded defaults (the rules
brain, SQLite, Qdrant Edge, the USE embedder, the demo MCP server), with a data directory
of its own per tree. Both trees run on this interpreter and venv (``PYTHONPATH`` points at
the tree), so they differ in hermes-fsm's code only. One untimed warm-up run per command
and tree first (it creates the data directory), then ``--runs`` timed runs, alternating
between the trees, so drift in the machine's speed affects both alike. Each figure is
from ``time.perf_counter`` around ``subprocess.run`` (the process's whole life, start to
exit). For ``run`` it also prints the turn's own ``completed in … ms`` line and how long
loading the embedder takes in a process of its own.

Each tree's ``hermes_fsm`` is compiled to bytecode first (``compileall``), as ``pip install``
does for an installed package: where ``PYTHONDONTWRITEBYTECODE`` is set (it is on the
machines this was measured on) an editable tree would otherwise be compiled from source at
every run — 130 modules, ~0.2 s of ``run``'s time that no installed copy pays.
``--no-compile`` times the trees as they are.

``--store-items N`` (issue 17's first-turn figure) first writes N memory items into each
tree's embedded store (``bench/memory.py --seed-store``, with the embedded default
embedder, users ``user-0`` … ``user-99``: written once, by this tree, and copied for the
base), and ``run`` and ``memory search`` then act as ``user-1``, who owns 1 % of them::

    .venv/bin/python bench/cli.py --base ../base-tree --runs 5 --store-items 10000 \
        --commands run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http`: drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = _HERE.parent
COMMANDS: dict[str, list[str]] = {
    "run": ["run", "How many A1001 are left in the east warehouse?"],
    "--help": ["--help"],
    "graph": ["graph"],
    "memory search": ["memory", "search", "A1001", "--user", "cli-user"],
}
# run in the tree with it on PYTHONPATH: its hermes_fsm comes before the venv's install
LAUNCH = ("import sys, hermes_fsm.cli.main as m; f = getattr(m, 'entry', None); "
          "sys.exit(f() if f is not None else m.main())")
EMBEDDER_LOAD = ("import time; from hermes_fsm.memory.use_embedder import USEEmbedder; "
                 "t = time.perf_counter(); USEEmbedder().load(); "
                 "print(time.perf_counter() - t)")
TURN_MS = re.compile(r"completed in ([0-9.]+) ms")


def env_for(tree: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(PYTHONPATH=str(tree), HERMES_DATA_DIR=str(data))
    return env


def once(tree: Path, data: Path, args: list[str]) -> tuple[float, str, float]:
    """One run: wall seconds, its stdout, and the CPU seconds (user + system) of the
    process and the children it waited for (the demo MCP server), which a loaded machine
    inflates far less than the wall time."""
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCH, *args], cwd=tree, env=env_for(tree, data),
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"{tree}: hermes-fsm {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stderr[-2000:]}")
    cpu = (after.children_user + after.children_system
           - before.children_user - before.children_system)
    return elapsed, done.stdout, cpu


def compile_tree(tree: Path) -> int:
    """Compile ``tree``'s hermes_fsm to bytecode (``__pycache__``, git-ignored), as ``pip
    install`` does; returns how many modules it has."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "hermes_fsm")],
                   check=True)
    return sum(1 for _ in (tree / "hermes_fsm").rglob("*.py"))


def importtime(tree: Path, data: Path, args: list[str], top: int) -> list[str]:
    """Where one run's import time goes: the self time of every module imported, summed by
    top-level package (``numpy``, ``mcp``, ``hermes_fsm`` …), largest first."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCH, *args], cwd=tree,
                          env=env_for(tree, data), capture_output=True, text=True, check=False)
    by_package: dict[str, int] = {}
    modules = 0
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        own = parts[0].removeprefix("import time:").strip()
        if not own.isdigit():
            continue
        package = parts[2].strip().split(".")[0]
        by_package[package] = by_package.get(package, 0) + int(own)
        modules += 1
    total = sum(by_package.values())
    ranked = sorted(by_package.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [f"{us / 1000:8.1f} ms  {name}" for name, us in ranked] + [
        f"{total / 1000:8.1f} ms  all {modules} modules"]


def seed(data: Path, items: int) -> float:
    """Write ``items`` memory items into the embedded store under ``data`` (this tree's
    ``bench/memory.py --seed-store``, the embedded default embedder); seconds it took."""
    kind = subprocess.run([sys.executable, "-c", "from hermes_fsm.memory.settings import "
                           "EmbedderConfig; print(EmbedderConfig().kind)"], cwd=REPO,
                          env=env_for(REPO, data), capture_output=True, text=True,
                          check=True).stdout.strip()
    started = time.perf_counter()
    subprocess.run([sys.executable, str(_HERE / "memory.py"), "--seed-store", str(data), kind,
                    "--store-items", str(items)], cwd=REPO, env=env_for(REPO, data),
                   check=True)
    return time.perf_counter() - started


def _table(figures: dict[tuple[str, str], list[float]], chosen: list[str],
           trees: dict[str, Path]) -> None:
    """One row per command: each tree's median (min–max), and this/base with a base."""
    print(f"{'command':<16}" + "".join(f"{name:>22}" for name in trees)
          + ("   this/base" if "base" in trees else ""))
    for command in chosen:
        row = f"{command:<16}"
        medians = {}
        for name in trees:
            values = figures[(command, name)]
            medians[name] = statistics.median(values)
            row += f"{medians[name]:>9.3f} ({min(values):.2f}–{max(values):.2f})"
        if "base" in trees:
            row += f"   {medians['this'] / medians['base']:9.2f}"
        print(row)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, help="a base checkout to time beside this one")
    p.add_argument("--runs", type=int, default=10, help="timed runs per command (default 10)")
    p.add_argument("--commands", default=",".join(COMMANDS),
                   help=f"comma-separated, of: {', '.join(COMMANDS)}")
    p.add_argument("--importtime", action="store_true",
                   help="also print the -X importtime top entries of each command")
    p.add_argument("--store-items", type=int, default=0, metavar="N",
                   help="seed each tree's embedded memory store with N items first; run and "
                        "memory search act as user-1 (default 0: an empty store, cli-user)")
    p.add_argument("--optimize", action="store_true",
                   help="with --store-items: build the seeded store's HNSW index first "
                        "('hermes-fsm memory optimize', the maintenance step for a big store)")
    p.add_argument("--no-compile", action="store_true",
                   help="time the trees as they are, without compiling their bytecode first")
    args = p.parse_args()
    trees = {"this": REPO} | ({"base": args.base.resolve()} if args.base else {})
    chosen = [c.strip() for c in args.commands.split(",")]
    unknown = [c for c in chosen if c not in COMMANDS]
    if unknown:
        p.error(f"unknown command(s) {unknown}; choose from {list(COMMANDS)}")
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.1f}; "
          f"trees: " + ", ".join(f"{k}={v}" for k, v in trees.items()))
    if not args.no_compile:
        for name, tree in trees.items():
            print(f"{name}: {compile_tree(tree)} modules of hermes_fsm compiled to bytecode "
                  f"(PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    commands = dict(COMMANDS)
    if args.store_items:
        commands = {name: [*argv, "--user", "user-1"] if name in ("run", "memory search")
                    else argv for name, argv in COMMANDS.items()}
        commands["memory search"] = ["memory", "search", "fact", "--user", "user-1"]
    with tempfile.TemporaryDirectory(prefix="hermes-bench-cli-") as scratch:
        data = {name: Path(scratch) / name for name in trees}
        if args.store_items:
            seeded = seed(data["this"], args.store_items)
            if args.optimize:
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "hermes_fsm.cli.main", "memory",
                                "optimize"], cwd=REPO, env=env_for(REPO, data["this"]),
                               check=True, stdout=subprocess.DEVNULL)
                print(f"memory optimize: {time.perf_counter() - started:.1f} s")
            for name in trees:
                if name != "this":
                    shutil.copytree(data["this"], data[name])
            print(f"embedded store seeded with {args.store_items} items in {seeded:.1f} s "
                  f"(load {os.getloadavg()[0]:.1f})")
        times: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        turn_ms: dict[str, list[float]] = {name: [] for name in trees}
        for command in chosen:
            for name, tree in trees.items():
                once(tree, data[name], commands[command])  # warm-up: data dir, caches
            for _ in range(args.runs):
                for name, tree in trees.items():
                    elapsed, out, cpu = once(tree, data[name], commands[command])
                    times.setdefault((command, name), []).append(elapsed)
                    cpus.setdefault((command, name), []).append(cpu)
                    if command == "run" and (m := TURN_MS.search(out)):
                        turn_ms[name].append(float(m.group(1)))
        print(f"\nwhole-process wall time, median of {args.runs} (min–max), seconds")
        _table(times, chosen, trees)
        print(f"\nCPU seconds (user + system, with the children it waited for), median of "
              f"{args.runs}")
        _table(cpus, chosen, trees)
        if "run" in chosen:
            for name in trees:
                if turn_ms[name]:
                    print(f"'run' turn as printed (completed in … ms), {name}: median "
                          f"{statistics.median(turn_ms[name]):.1f} ms")
            loads = []
            for _ in range(3):
                done = subprocess.run([sys.executable, "-c", EMBEDDER_LOAD], cwd=REPO,
                                      env=env_for(REPO, data["this"]), capture_output=True,
                                      text=True, check=False)
                if done.returncode == 0:
                    loads.append(float(done.stdout.strip()))
            if loads:
                print(f"USE embedder load (USEEmbedder().load(), own process), median of "
                      f"{len(loads)}: {statistics.median(loads):.3f} s")
        if args.importtime:
            for command in chosen:
                for name, tree in trees.items():
                    print(f"\n-X importtime, hermes-fsm {' '.join(commands[command])} ({name}):")
                    for line in importtime(tree, data[name], commands[command], 8):
                        print("  " + line)
    print(f"\nload at the end {os.getloadavg()[0]:.1f} (at the start {load:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
