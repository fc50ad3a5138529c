"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (stdlib HTTP only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence

from hermes_fsm.errors import MemoryStoreError

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    """Calls ``POST {base_url}/embeddings`` with ``{"model", "input": [...]}``.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server knows.
        dim: the vector size (asked of the server with one call when ``None``).
        api_key: sent as a bearer token when given.
        timeout_s: per request.
    """

    def __init__(self, base_url: str, model: str, *, dim: int | None = None,
                 api_key: str | None = None, timeout_s: float = 30.0) -> None:
        self.base_url, self.model = base_url.rstrip("/"), model
        self.name = f"openai:{model}"
        self._api_key, self._timeout = api_key, timeout_s
        self._dim = dim

    @property
    def dim(self) -> int:
        """The vector size (one request to find out, the first time)."""
        if self._dim is None:
            self._dim = len(self.embed(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            MemoryStoreError: the endpoint failed or answered something else.
        """
        if not texts:
            return []
        url = f"{self.base_url}/embeddings"
        body = json.dumps({"model": self.model, "input": list(texts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                data = json.loads(response.read())
            rows = sorted(data["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
            raise MemoryStoreError(f"embeddings endpoint {url} (model {self.model!r}) failed: "
                                   f"{exc}; check memory.embedder.url and that it serves "
                                   "/embeddings") from exc
        if len(vectors) != len(texts):
            raise MemoryStoreError(f"embeddings endpoint {url} returned {len(vectors)} vectors "
                                   f"for {len(texts)} texts")
        if self._dim is not None and any(len(v) != self._dim for v in vectors):
            raise MemoryStoreError(f"embeddings endpoint {url} returned vectors of size "
                                   f"{len(vectors[0])}, expected {self._dim}")
        return vectors
