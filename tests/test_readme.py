"""Every code block of README.md runs as written (issue 18): shell blocks in bash, Python
blocks in a fresh interpreter, YAML blocks loaded as what they are (a config file, or a
graph file with the ``myapp`` modules it names).

What the test takes as given, and nothing else:
- ``.venv/bin/`` is the environment running this test (its ``bin`` directory), and a
  leading ``python3 -m venv .venv && .venv/bin/pip install -e X &&`` is that environment
  already installed;
- blocks without a language are printed output or layouts, not code;
- a block preceded by ``<!-- readme-test: skip (why) -->`` is not run (only a model, or
  the test suite itself, or a benchmark that runs for minutes, or a block that another
  test runs with the files its section writes, is a reason);
  ``<!-- readme-test: exit N (why) -->`` runs every line and expects that exit status;
  ``<!-- readme-test: serve -->`` starts the block's first line in the background (on a
  free port instead of the written one) and runs the rest against it.
Each block runs in its own data directory; shell and Python blocks run from the
repository root unless they write files (the durable-sessions block runs in a temporary
directory).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from hermes_fsm.brain.rulebook import RuleBook
from hermes_fsm.config.settings import load_config
from hermes_fsm.contracts.tools import parse_tool_contract
from hermes_fsm.graph.loader import load_graph

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BIN = Path(sys.executable).parent
_INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install (?:-q )?-e \S+ && ")
_MARK = re.compile(r"<!--\s*readme-test:\s*(skip|exit|serve)\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    code: str
    mark: str = ""
    detail: str = ""


def readme_blocks() -> list[Block]:
    """The fenced blocks of README.md, with the line of their opening fence."""
    blocks: list[Block] = []
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i, fence.group(1)
        body: list[str] = []
        i += 1
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.search(before)
        blocks.append(Block(start + 1, lang, "\n".join(body) + "\n",
                            mark.group(1) if mark else "", mark.group(2) if mark else ""))
        i += 1
    return blocks


BLOCKS = [b for b in readme_blocks() if b.lang]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMES_CONFIG", "HERMES_GRAPH") and not k.startswith("HERMES_")}
    env["HERMES_DATA_DIR"] = str(tmp_path / "data")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def _shell(code: str) -> str:
    code = "\n".join(_INSTALL.sub("", line) for line in code.splitlines())
    return code.replace(".venv/bin/", f"{BIN}/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_shell(block: Block, tmp_path: Path) -> None:
    env = _env(tmp_path)
    code = _shell(block.code)
    if block.mark == "serve":
        first, _, rest = code.partition("\n")
        port = _free_port()
        written = re.search(r"--port (\d+)", first)
        assert written, "a serve block starts with a line that passes --port"
        first = first.replace(written.group(1), str(port))
        rest = rest.replace(f"localhost:{written.group(1)}", f"127.0.0.1:{port}")
        server = subprocess.Popen(["bash", "-c", f"exec env {first}"], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                time.sleep(0.2)
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", "set -x\n" + rest],
                                  cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=120, check=False)
        finally:
            server.terminate()
            server.wait(timeout=30)
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"answer"' in done.stdout and "event: result" in done.stdout, done.stdout
        return
    strict = ["-e", "-o", "pipefail"] if block.mark != "exit" else []
    done = subprocess.run(["bash", *strict, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    expected = int(block.detail.split()[0]) if block.mark == "exit" else 0
    assert done.returncode == expected, (
        f"README.md:{block.line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    assert "Traceback" not in done.stderr, done.stderr


def _run_python(block: Block, tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    writes_files = "sessions.sqlite3" in block.code
    done = subprocess.run([sys.executable, "-c", block.code], cwd=cwd if writes_files else REPO,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"README.md:{block.line}:\n{done.stdout}\n{done.stderr}"


_MYAPP = {
    "contracts.py": """
        from hermes_fsm import Contract

        class Ticket(Contract):
            contract_name = "ticket"
            contract_version = "1.0.0"
            summary: str
        """,
    "handlers.py": """
        async def ask_for_missing_slots(turn):
            return {"summary": "tell me more"}
        """,
}


def _run_yaml(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load(block.code)
    path = tmp_path / "block.yaml"
    path.write_text(block.code, encoding="utf-8")
    if isinstance(doc, dict) and "states" in doc:  # a graph file, with the modules it names
        package = tmp_path / "myapp"
        package.mkdir()
        (package / "__init__.py").write_text("", encoding="utf-8")
        for name, source in _MYAPP.items():
            (package / name).write_text(textwrap.dedent(source), encoding="utf-8")
        monkeypatch.syspath_prepend(str(tmp_path))
        graph = load_graph(path)
        assert graph.name == doc["name"]
        return
    if isinstance(doc, dict) and "preconditions" in doc:  # conditions of a tool contract:
        # the block under a minimal contract of a store lookup, compiled as a file would be
        contract = parse_tool_contract(yaml.safe_dump({**_STORE_TOOL, **doc}), str(path))
        assert [c.name for c in contract.preconditions] == \
            [c["name"] for c in doc["preconditions"]]
        return
    if isinstance(doc, dict) and "intents" in doc:  # a rules file of the rules brain
        assert [i["name"] for i in doc["intents"]] == \
            [i.name for i in RuleBook.from_file(path).intents]
        return
    config = load_config(path, environ={})
    assert config.source == str(path)


_STORE_TOOL = {
    "name": "store_lookup", "version": "1.0.0", "description": "Units of a SKU in a store.",
    "input_schema": {"type": "object", "required": ["sku", "store"],
                     "properties": {"sku": {"type": "string"}, "store": {"type": "string"}}},
    "output_schema": {"type": "object", "properties": {
        "units": {"type": "integer"}, "restock_date": {"type": ["string", "null"]}}},
}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}-{b.lang}" for b in BLOCKS])
def test_readme_block_runs_as_written(block: Block, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if block.mark == "skip":
        pytest.skip(f"README.md:{block.line}: {block.detail or 'marked skip'}")
    if block.lang == "sh":
        _run_shell(block, tmp_path)
    elif block.lang == "python":
        _run_python(block, tmp_path)
    elif block.lang == "yaml":
        _run_yaml(block, tmp_path, monkeypatch)
    else:
        pytest.fail(f"README.md:{block.line}: no runner for ```{block.lang} blocks")


def test_the_readme_has_blocks_of_each_kind() -> None:
    kinds = {b.lang for b in BLOCKS}
    assert {"sh", "python", "yaml"} <= kinds
    skipped = [b for b in BLOCKS if b.mark == "skip"]
    assert all(b.detail for b in skipped), "every skipped block says why"
