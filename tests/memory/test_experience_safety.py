"""The experience log holds what the session stores hold for U+0000 and non-finite
numbers (see hermes_fsm._internal.json_safe): U+0000 becomes U+FFFD, NaN / Infinity
become the strings "NaN" / "Infinity" — on SQLite and PostgreSQL alike (issue 16, a known
gap: PostgreSQL refused the whole batch, SQLite read back something else)."""

from __future__ import annotations

from datetime import UTC, datetime

from hermes_fsm.memory.experience import Experience

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def awkward(n: int) -> Experience:
    return Experience(entry_id=f"turn-{n}:call-{n}", kind="tool_call", user_id="u1",
                      session_id="s1", turn_id=f"turn-{n}", at=T0, ok=False,
                      tool="lookup", request="how many\x00 left?",
                      arguments={"q": "a\x00b", "x": float("nan")},
                      error_code="OUTPUT_\x00INVALID",
                      detail={"output": ["c\x00", float("inf"), float("-inf")]},
                      duration_ms=1.5, caused_by=f"call-{n}")


async def test_nul_and_non_finite_numbers_are_stored_as_the_session_stores_store_them(
        experience):
    assert await experience.record([awkward(1), awkward(2)]) == 2
    got = sorted(await experience.entries("u1"), key=lambda e: e.entry_id)
    assert [e.entry_id for e in got] == ["turn-1:call-1", "turn-2:call-2"]
    entry = got[0]
    assert entry.request == "how many\ufffd left?"
    assert entry.arguments == {"q": "a\ufffdb", "x": "NaN"}
    assert entry.error_code == "OUTPUT_\ufffdINVALID"
    assert entry.detail == {"output": ["c\ufffd", "Infinity", "-Infinity"]}


async def test_one_awkward_entry_does_not_keep_the_others_of_its_batch_out(experience):
    from dataclasses import replace

    plain = replace(awkward(3), request="plain", arguments={}, detail=None, error_code=None)
    assert await experience.record([plain, awkward(4)]) == 2
    assert {e.entry_id for e in await experience.entries("u1")} == {"turn-3:call-3",
                                                                    "turn-4:call-4"}
