"""Memory domains on the embedded store: recall and commit stay inside a domain, and a
domain with a key is encrypted at rest (no plaintext of it in the store's files)."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.errors import ConfigError
from hermes_fsm.memory import HashingEmbedder, InProcessWorkingMemory, TieredMemory
from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
from hermes_fsm.memory.sealing import Sealer, keys_from_env
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

NOW = datetime(2026, 3, 1, tzinfo=UTC)
KEY = bytes(range(32))
SECRETS = ("卡号尾号9876", "my card ends in 9876", "GoldPlusCard", "goldpluscard", "card_tier")


def memory_at(path: Path, sealer: Sealer | None) -> TieredMemory:
    embedder = HashingEmbedder(64)
    return TieredMemory(working=InProcessWorkingMemory(), embedder=embedder,
                        semantic=EdgeSemanticStore(64, path / "edge", sealer=sealer),
                        experience=SQLiteExperienceLog(path / "exp.sqlite", embedder),
                        sealed_domains=sealer.domains if sealer else frozenset())


async def commit(memory: TieredMemory, user: str, turn: str, key: str, value: str,
                 text: str, domain: str | None, at: datetime = NOW, kind: str = "create"
                 ) -> None:
    await memory.apply(user, turn, [MemoryUpdate(key=key, update_type=kind,  # type: ignore[arg-type]
                                                 value=value, evidence_source="user_message")],
                       at, text=text, domain=domain)


def files_hold(root: Path, text: str) -> bool:
    needle = text.encode()
    return any(needle in p.read_bytes() for p in root.rglob("*") if p.is_file())


async def test_a_sealed_domain_leaves_no_plaintext_in_the_files_and_needs_its_key(
        tmp_path: Path) -> None:
    memory = memory_at(tmp_path, Sealer({"credit_card": KEY}))
    await commit(memory, "u1", "t1", "profile.card_tier.goldpluscard", "GoldPlusCard",
                 "my card ends in 9876 卡号尾号9876", "credit_card")
    await commit(memory, "u1", "t2", "preference.contact_channel", "PlainEmailValue",
                 "contact me by email", None)
    found = await memory.recall("u1", "card ends in 9876", domain="credit_card")
    assert found[0].value == "GoldPlusCard" and "9876" in found[0].text
    await memory.close()
    for secret in SECRETS:  # neither the shard nor the experience log holds any
        assert not files_hold(tmp_path, secret), secret
    assert files_hold(tmp_path / "edge", "PlainEmailValue")  # the search itself works
    assert files_hold(tmp_path, "contact me by email")
    keyless = memory_at(tmp_path, Sealer({}, sealed_domains=frozenset({"credit_card"})))
    try:
        assert [i.value for i in await keyless.items("u1")] == ["PlainEmailValue"]
        assert all(i.domain is None for i in await keyless.recall("u1", "card 9876"))
        with pytest.raises(ConfigError, match="key is absent"):
            await commit(keyless, "u1", "t3", "profile.x", "y", "z", "credit_card")
    finally:
        await keyless.close()


async def test_supersession_works_inside_a_sealed_domain_and_stays_in_it(
        tmp_path: Path) -> None:
    memory = memory_at(tmp_path, Sealer({"wealth": KEY, "credit_card": bytes(32)}))
    try:
        for n, user in enumerate(("u1", "u2", "u3")):
            await commit(memory, user, f"a{n}", "profile.risk", "low", "low risk", "wealth")
            await commit(memory, user, f"b{n}", "profile.risk", "card-low", "card risk low",
                         "credit_card")
            await commit(memory, user, f"c{n}", "profile.risk", "high", "high risk now",
                         "wealth", NOW + timedelta(hours=1), "modify")
        for user in ("u1", "u2", "u3"):
            items = {(i.domain, i.value): i.status for i in await memory.items(user)}
            assert items == {("wealth", "low"): "superseded", ("wealth", "high"): "active",
                             ("credit_card", "card-low"): "active"}
            wealth = await memory.recall(user, "risk", domain="wealth")
            assert {i.domain for i in wealth} == {"wealth"}
            assert "card-low" not in [i.value for i in wealth]
            card = await memory.recall(user, "risk", domain="credit_card")
            assert [i.value for i in card] == ["card-low"]
    finally:
        await memory.close()


def test_domain_keys_come_from_the_environment_and_bad_ones_are_refused() -> None:
    good = base64.b64encode(os.urandom(32)).decode()
    assert len(keys_from_env({"wealth": "K"}, {"K": good})["wealth"]) == 32
    assert keys_from_env({"wealth": "K"}, {}) == {}
    with pytest.raises(ConfigError, match="not base64"):
        keys_from_env({"wealth": "K"}, {"K": "not base64!"})
    with pytest.raises(ConfigError, match="needs 32"):
        keys_from_env({"wealth": "K"}, {"K": base64.b64encode(b"short").decode()})


def test_domain_keys_with_a_qdrant_server_are_refused() -> None:
    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.settings import MemoryConfig

    with pytest.raises(ConfigError, match="needs the embedded Qdrant Edge store"):
        build_memory(MemoryConfig(qdrant_url="http://127.0.0.1:6333",
                                  domain_keys={"wealth": "HERMES_KEY_WEALTH"}))


async def test_a_domain_view_writes_in_its_domain_and_recalls_only_it(tmp_path) -> None:
    """Sessions of a domain get ``memory.in_domain(d)``: over many users and domains, a
    commit through one domain's view is never recalled through another's; ``shared=True``
    adds the items of no domain, never another domain's."""
    memory = memory_at(tmp_path, None)
    domains = ("credit_card", "wealth", "loans")
    users = [f"user-{n}" for n in range(6)]
    try:
        for u, user in enumerate(users):
            for d, domain in enumerate(domains):
                view = memory.in_domain(domain)
                await view.apply(user, f"t-{u}-{d}", [MemoryUpdate(
                    key="preference.contact_channel", update_type="create",
                    value=f"{domain}-{user}", evidence_source="user_message")],
                    NOW + timedelta(minutes=d), text=f"contact me about {domain} by email",
                    domain=domain)
            await commit(memory, user, f"t-{u}-none", "profile.city", "Berlin",
                         "I live in Berlin", None)
        for user in users:
            for domain in domains:
                only = await memory.in_domain(domain).recall(user, "how to contact me", 10)
                assert only and {(i.domain, i.value) for i in only} == {
                    (domain, f"{domain}-{user}")}
                shared = await memory.in_domain(domain, shared=True).recall(
                    user, "how to contact me, where do I live", 10)
                assert {i.domain for i in shared} == {domain, None}
                assert all(i.user_id == user for i in shared)
                listed = await memory.in_domain(domain).items(user)
                assert [i.value for i in listed] == [f"{domain}-{user}"]
        # each domain keeps its own current value: no supersession across domains
        everything = await memory.items(users[0])
        assert sum(i.status == "active" for i in everything) == len(domains) + 1
        with pytest.raises(ValueError, match="needs a name"):
            memory.in_domain(" ")
    finally:
        await memory.close()


async def test_an_orchestrator_given_a_domain_view_commits_and_recalls_inside_it() -> None:
    """The engine takes a domain's view as its memory: the rules brain's stored preference
    lands in the domain, and a later turn of that domain recalls it; another domain's
    orchestrator over the same tiers does not."""
    from hermes_fsm.config.build import build_orchestrator
    from hermes_fsm.memory import InProcessMemory

    tiers = InProcessMemory()
    wealth = build_orchestrator(memory=tiers.in_domain("wealth"))
    cards = build_orchestrator(memory=tiers.in_domain("credit_card"))
    try:
        await wealth.run_turn(None, "Please contact me by email", user_id="alice")
        (item,) = [i for i in await tiers.items("alice") if i.status == "active"]
        assert (item.key, item.value, item.domain) == ("preference.contact_channel",
                                                       "email", "wealth")
        assert await tiers.in_domain("wealth").recall("alice", "how should I be contacted")
        assert await tiers.in_domain("credit_card").recall("alice", "contact email") == []
        result = await cards.run_turn(None, "how should I be contacted?", user_id="alice")
        recalled = [e for e in result.events if e.kind == "memory_recalled"]
        assert recalled == []  # nothing of the wealth domain reached the card session
    finally:
        await wealth.aclose()
        await cards.aclose()
