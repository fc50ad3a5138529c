"""The ``memory:`` section of the configuration (see :mod:`hermes_fsm.config.settings`).

::

    memory:
      data_dir: ~/.local/share/hermes-fsm   # embedded stores (Qdrant local mode, SQLite)
      redis_url: redis://127.0.0.1:6379/0     # working memory on Redis (else in-process)
      postgres_url: postgresql://postgres@127.0.0.1:5432/test   # experience (else SQLite)
      qdrant_url: http://127.0.0.1:6333       # semantic on a server (else embedded)
      embedded_semantic: edge                 # Qdrant Edge (default) or qdrant_local (old)
      embedder: {kind: auto}                  # use, hashing, minilm, openai (url, model)
      recall: {k: 5, threshold: 0.0, recency_band: 0.05, half_life_days: {progress: 7}}
      shared_domains: [wealth]                # these domains' sessions also see no-domain items

``HERMES_DATA_DIR``, ``HERMES_REDIS_URL``, ``HERMES_POSTGRES_URL``, ``HERMES_QDRANT_URL`` and
``HERMES_EMBEDDER`` (the kind)
override the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EmbedderConfig", "MemoryConfig", "RecallConfig", "default_data_dir"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbedderConfig(_Strict):
    """Which embedder: ``auto`` (the default: ``use`` when installed, else ``hashing``),
    ``use`` (USE multilingual v3, offline), ``hashing`` (no model), ``minilm`` (ONNX),
    ``openai`` (HTTP)."""

    kind: Literal["auto", "use", "hashing", "minilm", "openai"] = "auto"
    dim: int = Field(default=512, ge=8, le=8192, description="hashing: vector size")
    url: str | None = Field(default=None, description="openai: base URL (…/v1)")
    model: str | None = Field(default=None, description="openai: model name")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="openai: key variable")


class RecallConfig(_Strict):
    """How recall ranks and cuts."""

    k: int = Field(default=5, ge=0, le=100)
    threshold: float = Field(default=0.0, ge=-1.0, le=1.0, description=(
        "the lowest relevance recalled: 0 is the embedder's calibrated floor, 1 a clear match"))
    recency_band: float = Field(default=0.05, ge=0.0, le=1.0, description=(
        "the most recency adds to a relevance: a newer item outranks an older one only "
        "when their relevance is within the band"))
    half_life_days: dict[Literal["preference", "fact", "progress", "correction"], float] = {}
    ttl_days: dict[Literal["preference", "fact", "progress", "correction"], float] = Field(
        default={}, description="per memory type, the age after which an item is not "
        "recalled (merged over the defaults: progress 30 days; the profile never expires)")


class MemoryConfig(_Strict):
    """Where the three memory tiers live; every field has an embedded default."""

    data_dir: Path | None = None
    redis_url: str | None = None
    postgres_url: str | None = None
    postgres_schema: str = "hermes"
    qdrant_url: str | None = None
    qdrant_collection: str = "hermes_memory"
    embedded_semantic: Literal["edge", "qdrant_local"] = Field(
        default="edge", description="without qdrant_url: Qdrant Edge under data_dir/edge, or "
        "qdrant-client local mode under data_dir/qdrant (slow to open; kept for old stores)")
    working_ttl_s: float = Field(default=900.0, gt=0)
    domain_keys: dict[str, str] = Field(default={}, description=(
        "memory domain -> the environment variable holding its 32-byte key (base64): the "
        "embedded store keeps that domain's items encrypted at rest (AES-256-GCM)"))
    shared_domains: list[str] = Field(default=[], description=(
        "memory domains whose sessions also recall the user's items of no domain (her "
        "general profile); a session of any other domain recalls its domain's items only, "
        "and commits stay in the session's domain either way"))
    embedder: EmbedderConfig = EmbedderConfig()
    recall: RecallConfig = RecallConfig()


def default_data_dir() -> Path:
    """``$HERMES_DATA_DIR``, else ``$XDG_DATA_HOME/hermes-fsm``, else ``~/.local/share/…``."""
    if os.environ.get("HERMES_DATA_DIR"):
        return Path(os.environ["HERMES_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hermes-fsm"
