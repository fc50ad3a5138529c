"""The recalled-memory block a prompt gets: what a brain reads of memory."""

from __future__ import annotations

from datetime import UTC, datetime

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory import InProcessMemory, format_recall

NOW = datetime(2026, 3, 1, tzinfo=UTC)


async def test_an_item_without_a_value_is_recalled_but_not_shown_to_a_brain() -> None:
    # SmolLM2's MEMORY_COMMIT created key "A1002" with value null; the block then said
    # "A1002: None (confidence 0.80)", and SmolLM2 wrote that as its answer in 4 turns
    memory = InProcessMemory()
    await memory.apply("u1", "turn-1", [
        MemoryUpdate(key="A1002", update_type="create", value=None,
                     evidence_source="user_message"),
        MemoryUpdate(key="preference.contact", update_type="create", value="email",
                     evidence_source="user_message")], NOW)

    items = await memory.recall("u1", "A1002 contact email", now=NOW)
    block = format_recall(items)

    assert {item.key for item in items} == {"A1002", "preference.contact"}  # both kept
    assert "preference.contact: email" in block
    assert "A1002" not in block and "None" not in block
