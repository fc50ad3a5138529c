"""What a state's brain request is given from memory comes from its ``recall:`` in the graph
file, not from the state's name."""

from __future__ import annotations

from datetime import UTC, datetime

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.graph.loader import default_graph_path, parse_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.testing import ScriptedBrain
from tests.support import PLAN_EMPTY, PLAN_LOOKUP, graph_with, happy_script

NOW = datetime(2026, 3, 1, tzinfo=UTC)
ASK = "How many A1001 are left in the east?"
ASK_EMAIL = "how should you contact me, by email?"  # recalls the email preference
PAST = "Past outcomes of similar requests:"


def renamed_planning(recall: str | None) -> Graph:
    """The bundled graph with PLANNING named PLAN; its recall line replaced (None: removed)."""
    text = default_graph_path().read_text(encoding="utf-8").replace("PLANNING", "PLAN")
    line = "    recall: [memory, past_outcomes]\n"
    assert text.count(line) == 1
    text = text.replace(line, "" if recall is None else f"    recall: {recall}\n")
    return parse_graph(text.replace("backoff_s: 0.05", "backoff_s: 0"), "renamed.yaml")


async def second_turn(make_orchestrator, graph: Graph, memory: InProcessMemory | None = None,
                      text: str = ASK, domains: tuple[str | None, str | None] = (None, None)
                      ) -> ScriptedBrain:
    """Two tool-using turns of u1 asking ``text`` (in sessions of ``domains``: the same
    session when they are equal); the brain of the second one (the first left its tool
    outcomes in the experience log)."""
    memory = memory if memory is not None else InProcessMemory()
    orchestrator = make_orchestrator(graph, brain=ScriptedBrain(happy_script()), memory=memory)
    await orchestrator.run_turn(f"s-{domains[0]}", text, user_id="u1", domain=domains[0])
    brain = ScriptedBrain(happy_script(plan=[PLAN_LOOKUP, PLAN_EMPTY]))
    orchestrator.services.brain = brain
    await orchestrator.run_turn(f"s-{domains[1]}", text, user_id="u1", domain=domains[1])
    return brain


class UnlayeredMemory(InProcessMemory):
    """A memory with an experience log but no layered ``walk`` (a user's own memory may
    implement only ``recall``): past outcomes come from the log itself."""

    walk = None  # type: ignore[assignment]


async def test_a_domain_session_without_walk_gets_its_domains_past_outcomes(
        make_orchestrator):
    brain = await second_turn(make_orchestrator, graph_with(), UnlayeredMemory(),
                              domains=("retail", "retail"))
    (plan,) = brain.requests_for("PLANNING")
    assert PAST in plan.memory and "inventory_lookup" in plan.memory


async def test_a_domain_session_without_walk_gets_no_other_domains_past_outcomes(
        make_orchestrator):
    brain = await second_turn(make_orchestrator, graph_with(), UnlayeredMemory(),
                              domains=("retail", "wealth"))
    (plan,) = brain.requests_for("PLANNING")
    assert PAST not in plan.memory


async def test_the_default_graph_gives_past_outcomes_to_planning_only(make_orchestrator):
    brain = await second_turn(make_orchestrator, graph_with())
    (plan,) = brain.requests_for("PLANNING")
    assert PAST in plan.memory and "inventory_lookup" in plan.memory
    others = [r for r in brain.requests if r.state != "PLANNING"]
    assert others and not any(PAST in r.memory for r in others)


async def test_a_planning_state_named_otherwise_gets_the_same_recall(make_orchestrator):
    default = await second_turn(make_orchestrator, graph_with())
    renamed = await second_turn(make_orchestrator,
                                renamed_planning("[memory, past_outcomes]"))
    plans = [r.memory for r in renamed.requests_for("PLAN")]
    assert PAST in plans[0]
    assert plans == [r.memory for r in default.requests_for("PLANNING")]


async def test_a_state_without_past_outcomes_in_its_recall_gets_none(make_orchestrator):
    brain = await second_turn(make_orchestrator, renamed_planning(None))
    assert not any(PAST in r.memory for r in brain.requests_for("PLAN"))


async def test_past_outcomes_alone_leave_the_memories_out(make_orchestrator):
    memory = InProcessMemory()
    await memory.apply("u1", "t0", [MemoryUpdate(key="preference.contact", update_type="create",
                                                 value="email", evidence_source="user_message")],
                       NOW, text="please email me")
    brain = await second_turn(make_orchestrator, renamed_planning("[past_outcomes]"), memory,
                              ASK_EMAIL)
    intent, plan = brain.requests_for("INTENT")[0], brain.requests_for("PLAN")[0]
    assert "preference.contact: email" in intent.memory
    assert PAST in plan.memory and "preference.contact" not in plan.memory


async def test_an_empty_recall_recalls_nothing_and_the_first_state_listing_memory_reports_it(
        make_orchestrator):
    memory = InProcessMemory()
    await memory.apply("u1", "t0", [MemoryUpdate(key="preference.contact", update_type="create",
                                                 value="email", evidence_source="user_message")],
                       NOW, text="please email me")
    graph = graph_with({"INTENT": {"recall": []}})
    brain = ScriptedBrain(happy_script())
    result = await make_orchestrator(graph, brain=brain, memory=memory).run_turn(
        "s1", ASK_EMAIL, user_id="u1")
    assert brain.requests_for("INTENT")[0].memory == ""
    assert "preference.contact: email" in brain.requests_for("PLANNING")[0].memory
    (recalled,) = [e for e in result.events if e.kind == "memory_recalled"]
    assert recalled.state == "PLANNING"
