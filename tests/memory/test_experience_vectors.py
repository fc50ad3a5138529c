"""The experience log's vector cache: rows of one matrix, gathered by index."""

from __future__ import annotations

import numpy as np

from hermes_fsm.memory import experience
from hermes_fsm.memory.embedders import HashingEmbedder


def test_cached_vectors_are_the_embedders_own_across_growth_and_reset(monkeypatch):
    monkeypatch.setattr(experience, "_CACHE_LIMIT", 100)
    embedder = HashingEmbedder()
    texts = [f"how many A{n} are left in the east" for n in range(120)]
    kept = []
    for batch in (texts[:10], texts[:70], texts[50:], texts[::-1], texts[:5] * 3):
        got = experience._vectors(embedder, batch)  # grows past 64 rows, then resets
        want = np.asarray(embedder.embed(batch), dtype=np.float32)
        assert got.shape == want.shape and np.array_equal(got, want)
        kept.append(len(experience._VECTOR_CACHE[embedder].rows))
    assert kept == [10, 70, 70, 120, 120]  # over the limit: only the batch's texts stay
