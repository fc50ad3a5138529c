"""README's "Bring your own tools and MCP servers", followed as written (issue 18): its three
files written into one folder, its commands run there — a module of your own tools,
mcp-server-time over stdio, server-everything over stdio and over streamable HTTP, turns
from configuration alone, then the contracts exported and checked; and a server that
drifts from its pin fails the check.

Needs ``npx`` (server-everything comes from the npm registry); without it the test skips.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TITLE = "### Bring your own tools and MCP servers"

pytestmark = pytest.mark.skipif(shutil.which("npx") is None, reason="needs npx (node)")


def section_blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block of the README section, in order."""
    text = README_TEXT.split(TITLE, 1)[1]
    text = text.split("\n### ", 1)[0]
    return re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


README_TEXT = (REPO / "README.md").read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_DATA_DIR"] = str(tmp_path / "data")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONIOENCODING"] = "utf-8"
    env.setdefault("npm_config_cache", str(Path.home() / ".npm"))
    return env


def _bash(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``code``; whatever it left running (the HTTP server) is ended with it."""
    out, err = cwd / "script.out", cwd / "script.err"  # files: a leftover holds no pipe
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", code], cwd=cwd,
                                   env=env, stdout=stdout, stderr=stderr, text=True,
                                   start_new_session=True)
        try:
            process.wait(timeout=600)
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(process.args, process.returncode,
                                       out.read_text(encoding="utf-8"),
                                       err.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """The section's folder after its commands ran, their output, and the environment."""
    folder = tmp_path_factory.mktemp("byo")
    port = str(_free_port())
    blocks = section_blocks()
    assert [lang for lang, _ in blocks] == ["python", "yaml", "yaml", "sh"], blocks
    for _, code in blocks[:3]:
        name = code.splitlines()[0].lstrip("# ").split(":")[0].strip()
        (folder / name).write_text(code.replace("3001", port), encoding="utf-8")
    script = blocks[3][1].replace("3001", port).replace(".venv/bin/", f"{BIN}/")
    env = _env(folder)
    done = _bash(script, folder, env)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return folder, done.stdout, env


def test_the_files_are_what_the_section_says(followed) -> None:
    folder, _, _ = followed
    assert {p.name for p in folder.iterdir()} >= {"shop_tools.py", "hermes.yaml", "rules.yaml"}
    config = yaml.safe_load((folder / "hermes.yaml").read_text(encoding="utf-8"))
    assert set(config["mcp_servers"]) == {"time", "everything", "everything_http"}


def test_each_server_and_your_tool_answers_a_turn(followed) -> None:
    _, out, _ = followed
    assert "everything.get-sum returned: The sum of 3 and 4.5 is 7.5." in out  # stdio, typed
    assert re.search(r"time\.get_current_time returned: .*Asia/Tokyo.*\+09:00", out)
    assert "everything_http.echo returned: Echo: hello over http" in out  # streamable HTTP
    assert "Ticket T-1001 is open (Ana)." in out  # your own tool, your own template


def test_the_contracts_of_every_tool_are_pinned_and_checked(followed) -> None:
    folder, out, _ = followed
    pinned = {p.stem for p in (folder / "contracts" / "tools").glob("*.yaml")}
    assert pinned == {"ticket_status", "time.get_current_time", "time.convert_time",
                      "everything.get-sum", "everything.echo", "everything_http.get-sum",
                      "everything_http.echo"}
    assert "ok: 6 MCP tool contract(s) match what their servers advertise " \
           "(everything, everything_http, time)" in out


def test_a_server_that_drifted_from_its_pin_fails_the_check(followed, tmp_path) -> None:
    folder, _, env = followed
    shutil.copytree(folder / "contracts", tmp_path / "contracts")
    shutil.copy(folder / "shop_tools.py", tmp_path)
    (tmp_path / "rules.yaml").write_text((folder / "rules.yaml").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    config = yaml.safe_load((folder / "hermes.yaml").read_text(encoding="utf-8"))
    config["mcp_servers"] = {"time": config["mcp_servers"]["time"]}  # no npx needed here
    (tmp_path / "hermes.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    pin = tmp_path / "contracts" / "tools" / "time.get_current_time.yaml"
    contract = yaml.safe_load(pin.read_text(encoding="utf-8"))
    contract["input_schema"]["properties"]["timezone"]["type"] = "integer"  # what we pinned
    pin.write_text(yaml.safe_dump(contract, sort_keys=False), encoding="utf-8")
    check = [f"{BIN}/hermes-fsm", "--config", "hermes.yaml", "contracts", "check", "--dir",
             "contracts/states"]
    done = subprocess.run(check, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "time.get_current_time drifted from its pinned contract" in done.stderr
    assert "'hermes-fsm contracts export'" in done.stderr
    pin.unlink()  # no pin at all: said too
    done = subprocess.run(check, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1 and "tool time.get_current_time: no pinned contract" in \
        done.stderr, done.stdout + done.stderr
