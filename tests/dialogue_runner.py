"""The runner of the labelled dialogues (tests/dialogues/*.yaml, format in its README.md),
shared by ``tests/test_dialogues.py`` (every label must hold) and ``bench/dialogues.py``
(the labels are scored per language and turn bucket).

Each dialogue runs on one in-process session with the rules brain and a fixed clock;
every turn is scored against its labels: intent, the canonical values of its entities
(from the conversation graph, per slot), the exact tool calls, facts in the answer, the
turn's status and the nodes deprecated by a correction.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.sources import FixedClock, SequentialIds
from tests.conversation_support import slot_registry, slot_rules

DIALOGUES = Path(__file__).parent / "dialogues"
START = datetime(2026, 6, 12, 8, 0, tzinfo=UTC)


def load_dialogues(directory: Path = DIALOGUES) -> list[dict[str, Any]]:
    """Every dialogue of every ``*.yaml`` file under ``directory``, with its file name."""
    found = []
    for path in sorted(directory.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for dialogue in doc["dialogues"]:
            found.append({**dialogue, "file": path.name})
    return found


def build(dialogue: dict[str, Any], data_dir: Path | None = None,
          ) -> tuple[Orchestrator, FixedClock, list[dict[str, Any]]]:
    """The orchestrator a dialogue runs on (its ``setup``), its clock, and the e-mails
    the approval-guarded tool really sent (setup ``slots``: the demo tools keep their
    reminders, reports and outbox under ``data_dir``)."""
    clock = FixedClock(START)
    sent: list[dict[str, Any]] = []
    if dialogue.get("setup", "demo") == "mcp":  # the embedded configuration: the demo MCP
        config = HermesConfig(timezone="UTC", sessions={"store": "memory"},  # server's
                              memory={"data_dir": str(data_dir)})        # calendar too
        demo = config.mcp_servers["demo"]
        config.mcp_servers["demo"] = demo.model_copy(update={"env": {
            **demo.env, "HERMES_DEMO_TODAY": START.date().isoformat()}})
        return build_orchestrator(config, clock=clock, ids=SequentialIds(),
                                  memory=InProcessMemory()), clock, sent
    if dialogue.get("setup", "demo") == "slots":
        brain = RulesBrain(slot_rules())
        tools = slot_registry(sent, clock=clock, data_dir=data_dir)
    else:
        brain, tools = RulesBrain(), build_demo_registry()
    return Orchestrator(brain=brain, tools=tools, clock=clock, ids=SequentialIds()), clock, sent


def duration(text: str) -> timedelta:
    """``"25h"``, ``"31m"``, ``"2d"``, ``"10s"`` as a timedelta."""
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    return timedelta(**{units[text[-1]]: float(text[:-1])})


@dataclass
class TurnScore:
    """One turn's labels, each held or not; ``problems`` says what went wrong."""

    where: str
    intent: bool = True
    entities_labelled: int = 0   # labelled slots (0: entities not labelled)
    entities_right: int = 0      # of them, with the labelled canonical value
    entities_exact: bool = True  # the set of slots and values equals the label
    calls: bool = True
    facts: bool = True
    other: bool = True           # status, deprecated nodes
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Task completion: every label of the turn holds."""
        return (self.intent and self.entities_exact and self.calls and self.facts
                and self.other)

    def fail(self, what: str) -> None:
        self.problems.append(f"{self.where}: {what}")


def score_turn(orchestrator: Orchestrator, session_id: str, result: Any,
               turn: dict[str, Any], where: str, data_dir: Path | None = None) -> TurnScore:
    """Every label of ``turn`` against the turn's result and the session's graph (a
    path under ``data_dir`` in a call's arguments or the answer reads ``{data}/…``)."""
    score = TurnScore(where)
    intents = [e.output for e in result.events if e.kind == "state_output"
               and e.state == "INTENT"]
    got_intent = intents[-1]["intent_type"] if intents else None
    if got_intent != turn["intent"]:
        score.intent = False
        score.fail(f"intent {got_intent!r}, expected {turn['intent']!r}")
    conv = orchestrator.sessions()[session_id].conversation
    if "entities" in turn:
        node = next((n for n in reversed(conv.intents.values())
                     if n.turn_id == result.turn_id), None) if conv else None
        got = {} if node is None or conv is None else {
            s: conv.entities[i].canonical for s, i in node.params.items()}
        want = turn["entities"]
        score.entities_labelled = max(len(want), 1)
        score.entities_right = (sum(1 for s, v in want.items() if got.get(s) == v) if want
                                else int(not got))
        if got != want:
            score.entities_exact = False
            score.fail(f"entities {got}, expected {want}")
    calls = [{"tool": e.tool, "args": e.arguments} for e in result.events
             if e.kind == "tool_call_started"]
    answer = result.answer or ""
    if data_dir is not None:
        root = json.dumps(str(data_dir))[1:-1]
        calls = json.loads(json.dumps(calls, ensure_ascii=False).replace(root, "{data}"))
        answer = answer.replace(str(data_dir), "{data}")
    if calls != turn.get("calls", []):
        score.calls = False
        score.fail(f"tool calls {calls}, expected {turn.get('calls', [])}")
    for fact in turn.get("answer_has", ()):
        if str(fact) not in answer:
            score.facts = False
            score.fail(f"answer lacks {fact!r}: {answer!r}")
    for fact in turn.get("answer_lacks", ()):
        if str(fact) in answer:
            score.facts = False
            score.fail(f"answer has {fact!r}: {answer!r}")
    if "status" in turn and result.status != turn["status"]:
        score.other = False
        score.fail(f"status {result.status!r}, expected {turn['status']!r}")
    if "sources" in turn:  # slot -> a source its entity node must have (memory:<key>)
        node = next((n for n in reversed(conv.intents.values())
                     if n.turn_id == result.turn_id), None) if conv else None
        for slot, source in turn["sources"].items():
            entity = conv.entities.get(node.params.get(slot, "")) if node and conv else None
            if entity is None or source not in entity.sources:
                score.other = False
                score.fail(f"the {slot} node's sources are "
                           f"{entity.sources if entity else None}, expected {source!r} among them")
    if "deprecated" in turn:
        gone = ({n.canonical for n in conv.entities.values() if not n.active}
                if conv is not None else set())
        if not set(turn["deprecated"]) <= gone:
            score.other = False
            score.fail(f"deprecated {sorted(gone)}, expected {turn['deprecated']}")
    return score


async def run_dialogue(dialogue: dict[str, Any]) -> tuple[list[TurnScore], list[str]]:
    """Run ``dialogue`` turn by turn; each turn's score, and the dialogue-level problems
    (what the approval-guarded tool really sent, when the dialogue says ``sent``)."""
    data_dir = Path(tempfile.mkdtemp(prefix="hermes-dialogue-"))
    try:
        orchestrator, clock, sent = build(dialogue, data_dir)
        await orchestrator.__aenter__()  # connects the MCP servers, if any
        scores = []
        for n, turn in enumerate(dialogue["turns"], 1):
            session_id = f"dialogue-{dialogue['id']}-{turn.get('session', 1)}"
            if "after" in turn:
                clock.advance(duration(turn["after"]))
            result = await orchestrator.run_turn(session_id, turn["say"],
                                                 dialogue.get("user", "u1"))
            scores.append(score_turn(orchestrator, session_id, result, turn,
                                     f"{dialogue['file']}:{dialogue['id']} turn {n} "
                                     f"({turn['say']!r})", data_dir))
        await orchestrator.aclose()  # the MCP servers' processes, if any
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    problems = []
    if "sent" in dialogue and sent != dialogue["sent"]:
        problems.append(f"{dialogue['id']}: sent {sent}, expected {dialogue['sent']}")
    return scores, problems
