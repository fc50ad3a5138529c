"""Build the memory tiers a :class:`~.settings.MemoryConfig` asks for.

Nothing is opened here: every backend connects (or opens its files) on first use.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_fsm.errors import ConfigError
from hermes_fsm.memory.archive import SQLiteArchive
from hermes_fsm.memory.embedders import Embedder, HashingEmbedder
from hermes_fsm.memory.experience import ExperienceLog
from hermes_fsm.memory.openai_embedder import OpenAIEmbedder
from hermes_fsm.memory.recall import DEFAULT_HALF_LIFE_DAYS, DEFAULT_TTL_DAYS, RecallPolicy
from hermes_fsm.memory.semantic import SemanticStore
from hermes_fsm.memory.settings import EmbedderConfig, MemoryConfig, default_data_dir
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.tiered import TieredMemory
from hermes_fsm.memory.use_embedder import USEEmbedder, use_available
from hermes_fsm.memory.working import InProcessWorkingMemory, WorkingMemory

__all__ = ["build_archive", "build_embedder", "build_memory"]


def build_archive(config: MemoryConfig | None = None) -> SQLiteArchive:
    """The cold storage of stale items: ``data_dir/archive.sqlite`` (opened on first use)."""
    config = config or MemoryConfig()
    return SQLiteArchive(Path(config.data_dir or default_data_dir()).expanduser()
                         / "archive.sqlite")


def build_embedder(config: EmbedderConfig) -> Embedder:
    """The embedder of the configuration (``auto``: USE multilingual when installed, else
    the hashing embedder). Nothing is loaded here: USE loads on its first embed."""
    if config.kind == "use" or (config.kind == "auto" and use_available()):
        return USEEmbedder()
    if config.kind == "minilm":
        from hermes_fsm.memory.onnx_embedder import MiniLMEmbedder

        return MiniLMEmbedder()
    if config.kind == "openai":
        return OpenAIEmbedder(config.url or "https://api.openai.com/v1",
                              config.model or "text-embedding-3-small",
                              api_key=os.environ.get(config.api_key_env))
    return HashingEmbedder(config.dim)


def build_experience_log(config: MemoryConfig | None = None,
                         embedder: Embedder | None = None) -> ExperienceLog:
    """The experience log alone (PostgreSQL when ``postgres_url``, else SQLite at
    ``data_dir/experience.sqlite``): what a command that only reads tool outcomes opens
    (``tools list``: canary rates and rollbacks). ``embedder`` ranks similar requests
    (default: the hashing one, which loads no model)."""
    config = config or MemoryConfig()
    embedder = embedder or HashingEmbedder()
    if config.postgres_url:
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog

        return PostgresExperienceLog(config.postgres_url, schema=config.postgres_schema,
                                     embedder=embedder)
    data_dir = Path(config.data_dir or default_data_dir()).expanduser()
    return SQLiteExperienceLog(data_dir / "experience.sqlite", embedder)


def build_memory(config: MemoryConfig | None = None) -> TieredMemory:
    """Three tiers from the configuration: real services where URLs are given, else embedded.

    Embedded means in-process working memory, a Qdrant Edge shard under ``data_dir/edge``
    (or qdrant-client local mode under ``data_dir/qdrant`` when
    ``embedded_semantic: qdrant_local``) and SQLite at ``data_dir/experience.sqlite``.
    """
    config = config or MemoryConfig()
    data_dir = Path(config.data_dir or default_data_dir()).expanduser()
    embedder = build_embedder(config.embedder)
    working: WorkingMemory
    if config.redis_url:
        from hermes_fsm.memory.redis_working import RedisWorkingMemory

        working = RedisWorkingMemory(config.redis_url, ttl_s=config.working_ttl_s)
    else:
        working = InProcessWorkingMemory(ttl_s=config.working_ttl_s)
    semantic: SemanticStore
    if config.domain_keys and (config.qdrant_url or config.embedded_semantic != "edge"):
        raise ConfigError("memory.domain_keys (encryption at rest per domain) needs the "
                          "embedded Qdrant Edge store: unset memory.qdrant_url and "
                          "memory.embedded_semantic, or drop memory.domain_keys")
    if config.qdrant_url or config.embedded_semantic == "qdrant_local":
        # qdrant-client takes about a second to import: only a process that uses it pays it
        from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore

        semantic = (QdrantSemanticStore(embedder.dim, url=config.qdrant_url,
                                        collection=config.qdrant_collection)
                    if config.qdrant_url else
                    QdrantSemanticStore(embedder.dim, path=str(data_dir / "qdrant"),
                                        collection=config.qdrant_collection))
    else:
        from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
        from hermes_fsm.memory.sealing import Sealer, keys_from_env

        sealer = (Sealer(keys_from_env(config.domain_keys),
                         sealed_domains=frozenset(config.domain_keys))
                  if config.domain_keys else None)
        semantic = EdgeSemanticStore(embedder.dim, data_dir / "edge", embedder=embedder.name,
                                     sealer=sealer)
    experience = build_experience_log(config, embedder)
    policy = RecallPolicy(k=config.recall.k, threshold=config.recall.threshold,
                          recency_band=config.recall.recency_band,
                          ttl_days={**DEFAULT_TTL_DAYS,
                                    **{str(k): v for k, v in config.recall.ttl_days.items()}},
                          half_life_days={**DEFAULT_HALF_LIFE_DAYS,
                                          **{str(k): v for k, v in
                                             config.recall.half_life_days.items()}})
    return TieredMemory(working=working, semantic=semantic, experience=experience,
                        embedder=embedder, policy=policy,
                        sealed_domains=frozenset(config.domain_keys),
                        shared_domains=frozenset(config.shared_domains))
