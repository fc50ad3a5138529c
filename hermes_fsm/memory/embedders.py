"""Embedders: text to unit vectors. The default needs no model and no network.

:class:`HashingEmbedder` hashes word unigrams and bigrams, character trigrams of Latin
words, and character unigrams and bigrams of CJK text into a fixed number of signed
buckets, then L2-normalizes. It handles Chinese and English, is deterministic across
processes (blake2b, not Python's salted ``hash``), and costs tens of microseconds a text.

>>> e = HashingEmbedder(dim=64)
>>> [len(v) for v in e.embed(["I prefer email", "我喜欢邮件"])]
[64, 64]
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "HashingEmbedder", "cosine"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of ``dim`` floats (unit length)."""

    name: str

    @property
    def dim(self) -> int:
        """The vector size."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+|[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_STOP = frozenset(
    "a an the is are was were be been am i me my mine you your we our it its of to in on "
    "for at by with and or do does did what which who how please can could would should "
    "that this there here about from as so any".split()
)


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = blake2b(feature.encode("utf-8"), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    return number % dim, (1.0 if (number >> 63) & 1 else -1.0)


def _token_features(token: str) -> tuple[tuple[str, float], ...] | None:
    """A token's own features with their weights (``None`` for a stop word)."""
    if _CJK.match(token):
        return (*((f"c:{ch}", 1.0) for ch in token),
                *((f"c2:{token[i:i + 2]}", 1.5) for i in range(len(token) - 1)))
    if token in _STOP:
        return None
    padded = f"<{token}>"
    return (f"w:{token}", 2.0), *((f"t:{padded[i:i + 3]}", 0.5)
                                  for i in range(len(padded) - 2))


class HashingEmbedder:
    """The offline default: hashed word and character n-grams (Chinese and English).

    Args:
        dim: vector size (default 512).
    """

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"
        # per token, its features' buckets and signed weights; None for a stop word
        self._tokens: dict[str, tuple[list[int], list[float]] | None] = {}

    def _token(self, token: str) -> tuple[list[int], list[float]] | None:
        if token in self._tokens:
            return self._tokens[token]
        features = _token_features(token)
        if features is None:
            self._tokens[token] = None
            return None
        indices, weights = [], []
        for feature, weight in features:
            index, sign = _bucket(feature, self.dim)
            indices.append(index)
            weights.append(sign * weight)
        self._tokens[token] = (indices, weights)
        return indices, weights

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (all zeros for a text with no features).

        Every weight is a multiple of 0.5, so every sum and sum of squares here is exact:
        the order of the additions (numpy's) cannot change a bit of the result.
        """
        out = []
        dim = self.dim
        if len(self._tokens) > 100_000:
            self._tokens.clear()
        for text in texts:
            indices: list[int] = []
            weights: list[float] = []
            words = []
            for token in _TOKEN.findall(text.lower()):
                own = self._token(token)
                if own is not None:
                    words.append(token)
                    indices += own[0]
                    weights += own[1]
            for a, b in itertools.pairwise(words):
                index, sign = _bucket(f"b:{a} {b}", dim)
                indices.append(index)
                weights.append(sign)
            if not indices:
                out.append([0.0] * dim)
                continue
            vector = np.bincount(indices, weights, minlength=dim)
            norm = math.sqrt(float(vector @ vector))
            out.append((vector / norm).tolist() if norm else vector.tolist())
        return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
