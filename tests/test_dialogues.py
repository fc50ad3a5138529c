"""Labelled multi-turn dialogues (tests/dialogues/*.yaml; the format is in its README.md).

Each dialogue runs on one in-process session with the rules brain and a fixed clock
(``tests/dialogue_runner.py``); every label of every turn must hold: intent, the
canonical values of its entities (from the conversation graph), the exact tool calls,
facts in the answer, the turn's status and the nodes deprecated by a correction.
Dialogues listed in a file's ``xfail`` map expose a known gap of the rules brain: they
are scored by ``bench/dialogues.py`` and expected to fail here, strictly: one that starts
passing fails the run until its entry is taken out of the map.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.dialogue_runner import DIALOGUES, load_dialogues, run_dialogue

ALL = load_dialogues()


def known_gaps() -> dict[str, str]:
    """Dialogue id -> why it is expected to fail (the files' top-level ``xfail`` maps)."""
    gaps: dict[str, str] = {}
    for path in sorted(DIALOGUES.glob("*.yaml")):
        gaps.update(yaml.safe_load(path.read_text(encoding="utf-8")).get("xfail") or {})
    return gaps


GAPS = known_gaps()


def test_dialogue_ids_are_unique_and_labelled() -> None:
    ids = [d["id"] for d in ALL]
    assert len(ids) == len(set(ids))
    assert set(GAPS) <= set(ids), sorted(set(GAPS) - set(ids))
    for dialogue in ALL:
        assert dialogue["lang"] in ("zh", "en"), dialogue["id"]
        assert all("say" in t and "intent" in t for t in dialogue["turns"]), dialogue["id"]


def _param(dialogue: dict[str, Any]) -> Any:
    marks = ([pytest.mark.xfail(strict=True, reason=GAPS[dialogue["id"]])]
             if dialogue["id"] in GAPS else [])
    return pytest.param(dialogue, id=dialogue["id"], marks=marks)


@pytest.mark.parametrize("dialogue", [_param(d) for d in ALL])
async def test_dialogue(dialogue: dict[str, Any]) -> None:
    scores, problems = await run_dialogue(dialogue)
    for score in scores:
        problems.extend(score.problems)
    assert not problems, "\n".join(problems)


# The dialogues that run on the embedded defaults' brain and tools (setup ``demo``), one
# ``hermes-fsm run`` process a turn on one session: the conversation graph survives the
# process boundary (each process rebuilds the session from the SQLite store).
CLI_SAMPLE = [d for d in ALL if d.get("setup", "demo") == "demo" and d["id"] not in GAPS
              and all("after" not in t and "session" not in t for t in d["turns"])]


@pytest.mark.parametrize("dialogue", [pytest.param(d, id=d["id"]) for d in CLI_SAMPLE[:2]])
def test_a_sample_of_dialogues_as_separate_cli_processes(dialogue: dict[str, Any],
                                                         tmp_path: Any) -> None:
    from tests.conversation_support import cli_turns

    turns = dialogue["turns"]
    answers = cli_turns(tmp_path, f"cli-{dialogue['id']}", [t["say"] for t in turns],
                        user=dialogue.get("user") or "alice")
    problems = []
    for n, (turn, answer) in enumerate(zip(turns, answers, strict=True), 1):
        problems += [f"turn {n} ({turn['say']!r}): answer lacks {fact!r}: {answer!r}"
                     for fact in turn.get("answer_has", ()) if str(fact) not in answer]
        problems += [f"turn {n} ({turn['say']!r}): answer has {fact!r}: {answer!r}"
                     for fact in turn.get("answer_lacks", ()) if str(fact) in answer]
    assert not problems, "\n".join(problems)


def test_the_cli_sample_holds_follow_ups_in_both_languages() -> None:
    sample = CLI_SAMPLE[:2]
    assert {d["lang"] for d in sample} == {"zh", "en"}
    assert all(len(d["turns"]) >= 4 for d in sample)
