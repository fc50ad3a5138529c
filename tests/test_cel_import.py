"""cel's compiled core without the cel package's CLI (issue 19): the conditions compile and
run on it, and a later ``import cel`` (a user's tool, say) gets the same extension rather
than initialising it twice. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from hermes_fsm._internal.cel_import import cel_core
core = cel_core()
value = core.compile("args.n + 1 == 3").execute(core.Context({"args": {"n": 2}}))
light = sorted(m for m in ("cel", "cel.cli", "prompt_toolkit", "typer") if m in sys.modules)
import cel
print(json.dumps({"value": value, "light": light, "core": core.__name__,
                  "same": cel.compile is core.compile and cel.Context is core.Context}))
"""


def test_the_core_compiles_without_the_package_and_a_later_import_shares_it() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"value": True, "light": [], "core": "cel.cel", "same": True}


def test_with_cel_already_imported_it_is_that_package() -> None:
    code = ("import cel; from hermes_fsm._internal.cel_import import cel_core; "
            "print(cel_core() is cel)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
