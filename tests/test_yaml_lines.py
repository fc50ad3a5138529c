"""The YAML loader's two parsers read every file alike.

``load_yaml_text`` parses with libyaml where it can and falls back to PyYAML's Python
parser for anything libyaml rejects or that nests too deep, so a file's values, the line
of every key and item, and every error message must not depend on which one read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm._internal import yaml_lines
from hermes_fsm._internal.yaml_lines import LineDict, LineList, YamlProblem, load_yaml_text

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for d in ("states", "contracts", "hermes_fsm", "examples", "tests")
               for p in (ROOT / d).rglob("*.yaml"))


def python_load(text: str) -> Any:
    """What the Python loader alone makes of ``text``, or the problem it reports."""
    try:
        return yaml.load(text, Loader=yaml_lines._Loader)  # a SafeLoader
    except YamlProblem as exc:
        return ("problem", exc.line, exc.problem)
    except yaml.YAMLError as exc:
        return ("yaml-error", str(exc))


def shape(value: Any) -> Any:
    """``value`` with the lines it carries, for comparing two loads."""
    if isinstance(value, LineDict):
        return ("map", value.line, [(k, value.line_of(k), shape(v)) for k, v in value.items()])
    if isinstance(value, LineList):
        return ("seq", value.line, [(value.line_of(i), shape(v)) for i, v in enumerate(value)])
    return value


def fast_or_problem(text: str) -> Any:
    try:
        return load_yaml_text(text)
    except YamlProblem as exc:
        return ("problem", exc.line, exc.problem)


def test_the_repository_has_yaml_files_to_compare() -> None:
    assert len(FILES) > 20


@pytest.mark.skipif(yaml_lines._CSafeLoader is None, reason="PyYAML built without libyaml")
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_libyaml_reads_each_file_as_the_python_loader_does(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast = yaml_lines._fast_load(text)
    if fast is yaml_lines._NO_DOCUMENT:  # a deliberately bad file: the fallback reads it
        assert isinstance(python_load(text), tuple), path
        return
    assert shape(fast) == shape(python_load(text))


AWKWARD = {
    "anchors": "base: &b {x: 1, y: [1, 2]}\nother: *b\nmerged:\n  <<: *b\n  z: 3\n",
    "empty": "",
    "comment only": "# nothing\n",
    "scalars": "a: 1.5\nb: .nan\nc: ~\nd: 2026-12-03\ne: 'quoted: x'\nf: |\n  block\n  text\n",
    "unicode": "问: 答案\nemoji: \"\\U0001F600\"\n",
    "bom": "\ufeffa: 1\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "unhashable key": "? [1, 2]\n: x\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "unclosed quote": "a: 'open\nb: 2\n",
    "tab": "a:\n\tb: 1\n",
    "tag": "a: !!python/object:os.system x\n",
    "nul": "a: 1\x00\n",
    "control": "a: \x07\n",
    "lone surrogate": "a: \ud800\n",
    "flow deep": "a: " + "[" * 65 + "]" * 65 + "\n",
    "flow at the limit": "a: " + "[" * 63 + "]" * 63 + "\n",
    "block deep": "a:\n" + "".join(" " * i + " b:\n" for i in range(1, 70)),
    "libyaml's own limit": "[" * 20000 + "]" * 20000,
    "deep through an alias": "x: &a " + "[" * 40 + "]" * 40 + "\ny: " + "[" * 30 + "*a" + "]" * 30,
}


@pytest.mark.parametrize("text", AWKWARD.values(), ids=AWKWARD.keys())
def test_awkward_text_loads_or_fails_exactly_as_with_the_python_loader(text: str) -> None:
    expected = python_load(text)
    if isinstance(expected, tuple) and expected[0] == "yaml-error":
        with pytest.raises(YamlProblem):
            load_yaml_text(text)
        return
    assert shape(fast_or_problem(text)) == shape(expected)


@pytest.mark.skipif(yaml_lines._CSafeLoader is None, reason="PyYAML built without libyaml")
def test_plain_files_take_the_libyaml_path() -> None:
    """The fast path is the one taken for an ordinary file (else it silently stopped
    paying for itself)."""
    text = (ROOT / "states" / "agent_turn.yaml").read_text(encoding="utf-8")
    assert yaml_lines._fast_load(text) is not yaml_lines._NO_DOCUMENT
