"""The conversation graph: merge, correction, decay, the fold, contracts that reference it,
durability through a store, and what a model is shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pydantic
import pytest

from hermes_fsm.brain.prompt import chat_messages
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.contracts.states import Intent, MemoryUpdate, Plan
from hermes_fsm.conversation.graph import (
    Conversation,
    ConversationPolicy,
    GraphEdit,
    apply_ops,
    merge_key,
)
from hermes_fsm.conversation.slots import question, required_slots, slot_problems
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.sources import FixedClock
from hermes_fsm.store.sqlite import SQLiteStore

AT = "2026-06-12T08:00:00+00:00"


def test_a_re_mention_merges_and_a_different_product_does_not() -> None:
    conv = Conversation()
    edit = GraphEdit(conv, AT, "m1")
    first = edit.mention("Location", "杭州西湖区")
    assert edit.mention("Location", "杭州市西湖区") == first
    assert edit.mention("Product", "iPhone 15") != edit.mention("Product", "iPhone 15 Pro")
    assert conv.entities[first].sources == ["m1"]
    assert merge_key("iPhone 15") != merge_key("iPhone 15 Pro")


def test_a_correction_deprecates_keeps_and_versions() -> None:
    conv = Conversation()
    edit = GraphEdit(conv, AT, "m1")
    old = edit.mention("Location", "杭州西湖区", confidence=0.92)
    new = edit.correct(old, "Location", "深圳南山区")
    assert conv.entities[old].deprecated_at == AT and conv.entities[old].confidence == 0.92
    assert (conv.entities[new].version, conv.entities[new].active) == (2, True)
    assert ("replaces", new, old) in [(e.kind, e.src, e.dst) for e in conv.edges]
    assert conv.latest("Location").id == new  # type: ignore[union-attr]


def test_confidence_decays_so_a_day_old_node_needs_confirming() -> None:
    conv = Conversation()
    node = conv.entities[GraphEdit(conv, AT, "m1").mention("Location", "杭州西湖区",
                                                         confidence=0.95)]
    now = datetime.fromisoformat(AT)
    policy = ConversationPolicy()
    assert conv.confidence_at(node, now, policy.decay_per_hour) == 0.95
    day_later = conv.confidence_at(node, now + timedelta(hours=24), policy.decay_per_hour)
    assert day_later == pytest.approx(0.47) and day_later < policy.confirm_below


def test_the_fold_of_the_ops_rebuilds_the_same_graph() -> None:
    conv = Conversation()
    edit = GraphEdit(conv, AT, "m1")
    a = edit.mention("Product", "A1001")
    b = edit.mention("Warehouse", "east")
    edit.intent("inventory_query", {"sku": a, "warehouse": b}, {"lang": "zh"}, "t1")
    edit.correct(b, "Warehouse", "south")
    rebuilt = apply_ops(Conversation(), edit.ops)
    assert rebuilt.to_data() == conv.to_data()
    assert Conversation.from_data(conv.to_data()).to_data() == conv.to_data()


def graph_with_a_correction() -> tuple[Conversation, str, str]:
    conv = Conversation()
    edit = GraphEdit(conv, AT, "m1")
    old = edit.mention("Warehouse", "east")
    return conv, old, edit.correct(old, "Warehouse", "south")


def plan_citing(node_id: str) -> dict[str, object]:
    return {"tool_calls": [{"tool_name": "inventory_lookup", "arguments": {"sku": "A1001"},
                            "reasoning_trace": f"Based on {node_id} from the graph"}]}


def test_the_plan_contract_refuses_a_deprecated_or_unknown_cited_node() -> None:
    conv, old, new = graph_with_a_correction()
    assert Plan.validate_output(plan_citing(new), {"conversation": conv})
    with pytest.raises(pydantic.ValidationError, match="is deprecated"):
        Plan.validate_output(plan_citing(old), {"conversation": conv})
    with pytest.raises(pydantic.ValidationError, match="names no node"):
        Plan.validate_output(plan_citing("ent_99"), {"conversation": conv})
    with pytest.raises(pydantic.ValidationError, match="names no node"):
        Plan.validate_output({"tool_calls": [{"tool_name": "t", "arguments": {},
                                              "reasoning_trace": "x", "cites": ["int_7"]}]},
                             {"conversation": conv})


def test_the_intent_contract_checks_the_nodes_it_references() -> None:
    conv, old, new = graph_with_a_correction()
    ref = {"slot": "warehouse", "type": "Warehouse", "value": "south", "node_id": new}
    good = {"intent_type": "q", "parameters": {}, "confidence": 0.9, "entities": [ref]}
    assert Intent.validate_output(good, {"conversation": conv})
    bad = {**good, "entities": [{**ref, "node_id": old}]}
    with pytest.raises(pydantic.ValidationError, match="deprecated"):
        Intent.validate_output(bad, {"conversation": conv})


def test_memory_updates_carry_a_target_node_and_an_evidence_source_in_the_seed_form() -> None:
    conv, old, _ = graph_with_a_correction()
    update = MemoryUpdate.validate_output(
        {"key": "inventory.hz_xh_001.IP15-128", "update_type": "create", "value": 8,
         "target_node_id": old, "evidence_source": "tool:get_inventory:hz_xh_001:IP15-128"},
        {"conversation": conv})
    assert update.target_node_id == old  # type: ignore[attr-defined]
    with pytest.raises(pydantic.ValidationError, match="evidence_source"):
        MemoryUpdate.validate_output({"key": "k", "update_type": "create",
                                      "evidence_source": "I just know"})
    with pytest.raises(pydantic.ValidationError, match="names no node"):
        MemoryUpdate.validate_output({"key": "k", "update_type": "create",
                                      "evidence_source": "user_message",
                                      "target_node_id": "ent_42"}, {"conversation": conv})


def test_slots_come_from_the_contract_and_the_question_names_the_format() -> None:
    schema = {"type": "object", "required": ["order_id"],
              "properties": {"order_id": {"type": "string", "pattern": r"^ORD-\d{8}$"}}}
    slot = required_slots(schema, {"order_id": {"ask": "请问您的订单号是多少?"}})[0]
    assert question(slot, "zh") == "请问您的订单号是多少?格式类似 ORD-12345678。"
    assert slot_problems(schema, {}) and slot_problems(schema, {"order_id": "ORD-12345678"}) == []


async def test_the_graph_is_durable_and_a_new_process_rebuilds_it(tmp_path: Path) -> None:
    """The graph is the fold of graph_updated events: a second orchestrator on the same
    store (another process, as far as the session knows) continues the conversation."""
    path = tmp_path / "s.db"
    first = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                         store=SQLiteStore(path))
    assert "342" in (await first.run_turn("s1", "A1001 在华东仓还有多少", "u1")).answer
    graph = first.sessions()["s1"].conversation.to_data()  # type: ignore[union-attr]
    await first.aclose()
    second = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                          store=SQLiteStore(path))
    result = await second.run_turn("s1", "那华南仓呢?", "u1")
    assert "华南" in result.answer and "0 件" in result.answer
    rebuilt = second.sessions()["s1"].conversation
    assert rebuilt is not None
    assert [n["id"] for n in graph["entities"]] == [n.id for n in rebuilt.entities.values()][:2]
    await second.aclose()


async def test_the_graph_off_keeps_turns_standalone() -> None:
    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                                conversation=ConversationPolicy(enabled=False))
    await orchestrator.run_turn("s1", "A1001 在华东仓还有多少")
    result = await orchestrator.run_turn("s1", "那华南仓呢?")
    assert "抱歉" in result.answer
    assert not any(e.kind == "graph_updated" for e in result.events)


async def test_a_model_is_shown_the_graph_and_the_pending_task() -> None:
    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                                clock=FixedClock(datetime(2026, 6, 12, tzinfo=UTC)))
    await orchestrator.run_turn("s1", "A1001 在华东仓还有多少")
    conv = orchestrator.sessions()["s1"].conversation
    request = BrainRequest("INTENT", "intent", {}, "那华南仓呢?", "u1", conversation=conv)
    prompt = chat_messages(request)[1]["content"]
    assert "ent_1 Product: A1001" in prompt and "ent_2 Warehouse: east" in prompt
    assert "Last task: int_3 inventory_query(sku=ent_1, warehouse=ent_2)" in prompt


async def test_an_answer_with_facts_is_not_shown_the_graph() -> None:
    # SmolLM2 answered "B2002 (canonical B2002, confidence 0.90) has a count of 31 units."
    # in 6 of 40 turns of bench/real_model.py: the graph's lines, copied
    from hermes_fsm.contracts.states import Response, ResultReport

    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                                clock=FixedClock(datetime(2026, 6, 12, tzinfo=UTC)))
    await orchestrator.run_turn("s1", "A1001 在华东仓还有多少")
    conv = orchestrator.sessions()["s1"].conversation
    report = ResultReport.model_validate({"facts": [{
        "id": "fact-1", "source": "t1-s3-c1", "content": {"tool": "inventory_lookup",
                                                         "output": {"quantity": 342}}}],
        "violations": [], "needs_more_tools": False})
    answer = BrainRequest("RESPONSE", "response", Response.json_schema(), "那华南仓呢?", "u1",
                          conversation=conv, outputs={"result_report": report})
    prompt = chat_messages(answer)[1]["content"]
    assert "{f1.quantity} = 342" in prompt and "canonical" not in prompt
    assert "ent_1 Product: A1001" in chat_messages(  # an answer without facts still is
        BrainRequest("RESPONSE", "response", Response.json_schema(), "hi", "u1",
                     conversation=conv))[1]["content"]


async def test_an_approval_over_http_carries_the_calls_and_the_client_answers_it() -> None:
    import httpx

    from hermes_fsm.server import create_app
    from tests.conversation_support import BODY, SUBJECT, slot_registry, slot_rules
    from tests.http_support import served

    sent: list[dict[str, object]] = []
    orchestrator = Orchestrator(brain=RulesBrain(slot_rules()), tools=slot_registry(sent))
    app = create_app(orchestrator, tokens={"t": "alice"})
    auth = {"Authorization": "Bearer t"}
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        asked = (await http.post("/v1/sessions/s1/turns", headers=auth,
                                 json={"text": "send the report to li@example.com"})).json()
        assert asked["status"] == "awaiting_approval"
        pending = asked["pending"]
        assert pending["kind"] == "approval" and [
            (c["tool_name"], c["arguments"]) for c in pending["calls"]] == [
            ("send_email", {"to": "li@example.com", "subject": SUBJECT, "body": BODY})]
        assert sent == []
        done = (await http.post("/v1/sessions/s1/turns", headers=auth,
                                json={"text": "yes"})).json()
        assert done["status"] == "completed" and done["pending"] is None
        assert sent == [{"to": "li@example.com"}]


def test_the_configuration_sets_the_conversation_policy(tmp_path: Path) -> None:
    from hermes_fsm.config import build_orchestrator
    from hermes_fsm.config.settings import load_config

    path = tmp_path / "hermes.yaml"
    path.write_text("conversation: {pending_ttl_s: 60, max_slot_failures: 1}\n"
                    "mcp_servers: {}\nsessions: {store: memory}\n", encoding="utf-8")
    orchestrator = build_orchestrator(load_config(path, environ={}))
    assert orchestrator.services.conversation == ConversationPolicy(pending_ttl_s=60,
                                                                    max_slot_failures=1)
    path.write_text("conversation: {pending_ttl_s: -1}\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"hermes.yaml:1.*pending_ttl_s"):
        load_config(path, environ={})


async def test_view_draws_each_turns_intents_and_entities_with_corrections_struck() -> None:
    from hermes_fsm.events.recording import parse_recording, recording_text
    from hermes_fsm.viz.view import render_view

    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
    for text in ("A1001 在华东仓还有多少", "那华南仓呢?", "不对,我说的是华北仓"):
        await orchestrator.run_turn("s1", text, "u1")
    recording = parse_recording(recording_text(orchestrator, "s1"), "<test>")
    page = render_view(recording, orchestrator.graph)
    table = page[page.index('<table class="conversation">'):]
    table = table[:table.index("</table>")]
    assert "int_3 inventory_query(sku=ent_1 A1001, warehouse=ent_2 east)" in table
    assert "<s>ent_4 Warehouse south → south v1 (0.90)</s>" in table
    assert "ent_4_v2 Warehouse north → north v2 (0.98)" in table


PRODUCT_RULES = """
aliases:
  product: {IP15: [iphone 15], IP15P: [iphone 15 pro]}
intents:
  - name: stock
    confidence: 0.9
    needs_tools: true
    patterns: ['库存|\\bstock\\b']
    extract: ['(?P<sku>iphone 15(?: pro)?)', '(?P<store>杭州西湖区|深圳南山区|上海徐汇区)']
    normalize: {sku: product}
plans:
  stock:
    - tool: stock
      arguments: {sku: '{sku}', store: '{store?}'}
      reasoning: Stock of {sku}.
answers:
  tools: {stock: [{en: '{sku}: {count}', zh: '{sku}: {count}'}]}
  replies: {unknown: [{en: '?', zh: '?'}]}
  generic: [{en: '{tool}: {output}', zh: '{tool}: {output}'}]
  failure: [{en: 'failed: {message}', zh: '失败: {message}'}]
  no_facts: [{en: none, zh: 无}]
  unavailable: [{en: unavailable, zh: 不可用}]
"""


async def test_a_variant_of_the_product_and_a_store_correction_reuse_the_last_task() -> None:
    from hermes_fsm.brain.rulebook import RuleBook
    from hermes_fsm.tools.registry import ToolRegistry

    registry = ToolRegistry()
    calls: list[dict[str, object]] = []

    @registry.tool(inline=True)
    def stock(sku: str, store: str | None = None) -> dict[str, object]:
        """Stock of a product in a store."""
        calls.append({"sku": sku, "store": store})
        return {"sku": sku, "count": 8}

    orchestrator = Orchestrator(brain=RulesBrain(RuleBook.from_yaml(PRODUCT_RULES)),
                                tools=registry)
    for text in ("帮我查iPhone 15在杭州西湖区门店的库存", "那上海徐汇区呢", "不对,深圳南山区",
                 "Pro 呢"):
        await orchestrator.run_turn("s1", text, "u1")
    assert calls == [{"sku": "IP15", "store": "杭州西湖区"},
                     {"sku": "IP15", "store": "上海徐汇区"},
                     {"sku": "IP15", "store": "深圳南山区"},
                     {"sku": "IP15P", "store": "深圳南山区"}]
    conv = orchestrator.sessions()["s1"].conversation
    assert conv is not None
    assert {n.canonical for n in conv.entities.values() if not n.active} == {"上海徐汇区"}


# --- pruning: the graph stays bounded, and the pruning is in the diff ---------------------------


def test_prune_bounds_deprecated_nodes_intents_and_entities_and_folds_the_same() -> None:
    conv, ops = Conversation(), []
    policy = ConversationPolicy(max_entities=6, max_deprecated=2, max_intents=3)
    node = None
    for n in range(8):
        edit = GraphEdit(conv, f"2026-06-12T08:{n:02d}:00+00:00", f"m{n}")
        node = edit.mention("Warehouse", f"w{n}") if node is None else \
            edit.correct(node, "Warehouse", f"w{n}")  # every turn corrects the last one
        edit.intent("inventory_query", {"warehouse": node}, {})
        edit.mention("Product", f"p{n}")
        edit.prune(datetime(2026, 6, 12, 8, n, tzinfo=UTC), policy)
        ops += edit.ops
    assert sum(1 for e in conv.entities.values() if not e.active) <= 2
    assert len(conv.entities) <= 6 and len(conv.intents) == 3
    assert node in conv.entities  # the latest intent's node is never pruned
    assert all(e.src in conv.entities or e.src in conv.intents for e in conv.edges)
    assert any(op["op"] == "prune" for op in ops)
    assert apply_ops(Conversation(), ops).to_data() == conv.to_data()


# A session's times can carry different UTC offsets (a daylight-saving change, a new
# configured time zone): 15:00+08:00 is 07:00Z, an hour before 08:00+00:00, though it sorts
# after it as text. The graph orders by instant.
EARLY_AT, LATE_AT = "2026-06-12T15:00:00+08:00", "2026-06-12T08:00:00+00:00"


def test_the_latest_mention_is_the_latest_instant_whatever_its_offset() -> None:
    conv = Conversation()
    early = GraphEdit(conv, EARLY_AT, "m1").mention("Warehouse", "east")
    late = GraphEdit(conv, LATE_AT, "m2").mention("Warehouse", "west")
    assert conv.latest("Warehouse").id == late  # type: ignore[union-attr]
    assert [n.id for n in conv.active("Warehouse")] == [early, late]


def test_over_its_cap_the_graph_drops_the_least_recently_seen_instant() -> None:
    conv = Conversation()
    early = GraphEdit(conv, EARLY_AT, "m1").mention("Product", "A1001")
    late = GraphEdit(conv, LATE_AT, "m2").mention("Product", "A1002")
    edit = GraphEdit(conv, "2026-06-12T08:30:00+00:00", "m3")
    edit.intent("inventory_query", {"warehouse": edit.mention("Warehouse", "east")}, {})
    edit.prune(datetime(2026, 6, 12, 8, 30, tzinfo=UTC), ConversationPolicy(max_entities=2))
    assert early not in conv.entities and late in conv.entities


def test_of_deprecated_nodes_over_their_cap_the_earliest_corrected_go() -> None:
    conv = Conversation()
    first = GraphEdit(conv, "2026-06-12T06:00:00+00:00", "m0").mention("Location", "a")
    second = GraphEdit(conv, EARLY_AT, "m1").correct(first, "Location", "b")  # first: 07:00Z
    third = GraphEdit(conv, LATE_AT, "m2").correct(second, "Location", "c")  # second: 08:00Z
    edit = GraphEdit(conv, "2026-06-12T08:30:00+00:00", "m3")
    edit.prune(datetime(2026, 6, 12, 8, 30, tzinfo=UTC), ConversationPolicy(max_deprecated=1))
    assert first not in conv.entities and second in conv.entities and third in conv.entities


def test_a_node_decayed_to_nothing_is_pruned_unless_a_kept_intent_points_at_it() -> None:
    conv = Conversation()
    edit = GraphEdit(conv, AT, "m1")
    held = edit.mention("Warehouse", "east")
    edit.intent("inventory_query", {"warehouse": held}, {})
    loose = edit.mention("Product", "A1001")
    edit.prune(datetime(2026, 6, 12, 20, tzinfo=UTC), ConversationPolicy())  # 12 h: kept
    assert loose in conv.entities
    edit.prune(datetime(2026, 6, 15, 8, tzinfo=UTC), ConversationPolicy())  # 72 h: 0.9 → 0
    assert loose not in conv.entities and held in conv.entities


async def test_a_long_session_keeps_its_graph_under_the_cap_and_rebuilds_it(
        tmp_path: Path) -> None:
    """Twenty turns with a cap of 8 nodes: the graph never grows past it (but for the
    turn's own nodes), the prune ops
    are in the graph_updated events, and a new process folds the same graph."""
    path = tmp_path / "s.db"
    policy = ConversationPolicy(max_entities=8, max_deprecated=2, max_intents=4)
    first = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                         store=SQLiteStore(path), conversation=policy)
    pruned, ops = 0, []
    skus = ["A1001", "A1002", "B2001", "B2002", "C3001"]
    places = ["华东", "华北", "华南", "西南"]
    for n in range(20):
        result = await first.run_turn("s1", f"{skus[n % 5]} 在{places[n % 4]}仓还有多少", "u1")
        ops += [op for e in result.events if e.kind == "graph_updated" for op in e.ops]
        pruned += sum(1 for e in result.events if e.kind == "graph_updated"
                      for op in e.ops if op["op"] == "prune")
        conv = first.sessions()["s1"].conversation
        # pruned as each turn starts: this turn's own nodes (two, one intent) come on top
        assert conv is not None and len(conv.entities) <= 8 + 2 and len(conv.intents) <= 4 + 1
    assert pruned > 0 and conv is not None
    graph = conv.to_data()
    assert apply_ops(Conversation(), ops).to_data() == graph  # what replay folds
    await first.aclose()
    second = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(),
                          store=SQLiteStore(path), conversation=policy)
    result = await second.run_turn("s1", "那华南仓呢", "u1")  # the session, from its events
    assert "华南" in result.answer  # the last task (C3001 在西南仓) goes on
    rebuilt = second.sessions()["s1"].conversation
    assert rebuilt is not None and len(rebuilt.entities) <= 8 + 2
    assert {n["id"] for n in graph["entities"]} >= {  # the rest came with the old graph
        n.id for n in rebuilt.entities.values() if n.sources != [result.turn_id]}
    await second.aclose()


async def test_a_store_stock_result_is_remembered_with_tool_evidence_about_its_node() -> None:
    """The seed's memory update: the stock the tool returned (retail.yaml: 8 iPhone 15 at
    the Hangzhou Xihu store), evidence tool:store_stock:hz_xh_001:IP15-128, about the
    product's graph node; a turn whose call failed remembers nothing of it."""
    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
    result = await orchestrator.run_turn("s1", "帮我查iPhone 15在杭州西湖区门店的库存", "u1")
    commit = next(e.output for e in result.events
                  if e.kind == "state_output" and e.state == "MEMORY_COMMIT")
    update = next(u for u in commit["memory_updates"] if u["key"].startswith("fact.stock."))
    assert update["evidence_source"] == "tool:store_stock:hz_xh_001:IP15-128"
    assert (update["key"], update["value"]) == ("fact.stock.hz_xh_001.IP15-128", "8")
    conv = orchestrator.sessions()["s1"].conversation
    assert conv is not None and conv.entities[update["target_node_id"]].canonical == "IP15-128"
    assert any(e.kind == "memory_write" and e.key == update["key"] and e.status == "applied"
               for e in result.events)
    failed = await orchestrator.run_turn("s1", "C3001 在徐汇滨江店有货吗", "u1")
    commits = [e.output for e in failed.events
               if e.kind == "state_output" and e.state == "MEMORY_COMMIT"]
    assert not any(u["key"].startswith("fact.stock.") for c in commits
                   for u in c["memory_updates"])


async def test_a_model_that_says_the_pending_request_again_resumes_its_task() -> None:
    """While a reminder waits for its time, a brain that classifies "tomorrow at 4pm" as
    the same intent (with only the time) answers the task: its other slots are kept and
    the output names the task, so the clarification ends."""
    from hermes_fsm.testing import ScriptedBrain

    def plan(request: BrainRequest) -> dict[str, object]:
        params = getattr(request.outputs["intent"], "parameters", {})
        if "due" not in params:
            return {"tool_calls": [], "missing_slots": [
                {"tool": "create_reminder", "slot": "due", "reason": "missing"}]}
        return {"tool_calls": [{"tool_name": "create_reminder", "reasoning_trace": "asked",
                                "arguments": {"text": params["text"], "due": params["due"]}}]}

    brain = ScriptedBrain({
        "INTENT": [{"intent_type": "create_reminder", "parameters": {"text": "stretch"},
                    "confidence": 0.9, "needs_tools": True},
                   {"intent_type": "create_reminder",
                    "parameters": {"due": "2026-06-13T16:00:00+00:00"},
                    "confidence": 0.9, "needs_tools": True}],
        "PLANNING": [plan], "RESPONSE": [{"text": "done", "evidence": []}],
        "MEMORY_COMMIT": [{"memory_updates": []}]})
    clock = FixedClock(datetime(2026, 6, 12, 8, 0, tzinfo=UTC))
    orchestrator = Orchestrator(brain=brain, tools=build_demo_registry(clock=clock),
                                clock=clock)
    first = await orchestrator.run_turn("s1", "remind me to stretch", "alice")
    assert first.status == "awaiting_input"
    second = await orchestrator.run_turn("s1", "tomorrow at 4pm", "alice")
    intent = next(e.output for e in second.events
                  if e.kind == "state_output" and e.state == "INTENT")
    assert intent["parameters"]["text"] == "stretch" and intent["task"]
    assert [(e.tool, e.arguments) for e in second.events if e.kind == "tool_call_started"] == [
        ("create_reminder", {"text": "stretch", "due": "2026-06-13T16:00:00+00:00"})]
    conv = orchestrator.sessions()["s1"].conversation
    assert conv is not None and not conv.tasks  # the clarification is over
