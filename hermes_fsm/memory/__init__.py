"""Memory in three tiers: working (Redis / in-process), semantic (a Qdrant server / Qdrant
Edge embedded), experience (PostgreSQL / SQLite), behind protocols, composed by
:class:`TieredMemory`.

The engine's handlers see the :class:`Memory` protocol (``recall``, ``apply``,
``forget``). An ``Orchestrator`` given no memory uses :class:`InProcessMemory`;
``hermes_fsm.config.build_orchestrator`` builds what the ``memory:`` section says
(:func:`hermes_fsm.config.memory.build_memory`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.memory.background import BackgroundCommits
    from hermes_fsm.memory.embedders import Embedder, HashingEmbedder
    from hermes_fsm.memory.experience import Experience, ExperienceLog, ToolOutcomes
    from hermes_fsm.memory.items import MemoryItem, WriteOutcome, item_id
    from hermes_fsm.memory.recall import RecallPolicy, estimate_tokens, format_recall
    from hermes_fsm.memory.semantic import InProcessSemanticStore, SemanticStore
    from hermes_fsm.memory.tiered import (
        DomainMemory,
        InProcessMemory,
        LayeredRecall,
        Memory,
        TieredMemory,
    )
    from hermes_fsm.memory.working import InProcessWorkingMemory, WorkingMemory

__all__ = [
    "BackgroundCommits",
    "DomainMemory",
    "Embedder",
    "Experience",
    "ExperienceLog",
    "HashingEmbedder",
    "InProcessMemory",
    "InProcessSemanticStore",
    "InProcessWorkingMemory",
    "LayeredRecall",
    "Memory",
    "MemoryItem",
    "RecallPolicy",
    "SemanticStore",
    "TieredMemory",
    "ToolOutcomes",
    "WorkingMemory",
    "WriteOutcome",
    "estimate_tokens",
    "format_recall",
    "item_id",
]

__getattr__, __dir__ = lazy_face(__name__, {
    "BackgroundCommits": "hermes_fsm.memory.background",
    "DomainMemory": "hermes_fsm.memory.tiered",
    "Embedder": "hermes_fsm.memory.embedders",
    "Experience": "hermes_fsm.memory.experience",
    "ExperienceLog": "hermes_fsm.memory.experience",
    "HashingEmbedder": "hermes_fsm.memory.embedders",
    "InProcessMemory": "hermes_fsm.memory.tiered",
    "InProcessSemanticStore": "hermes_fsm.memory.semantic",
    "InProcessWorkingMemory": "hermes_fsm.memory.working",
    "LayeredRecall": "hermes_fsm.memory.tiered",
    "Memory": "hermes_fsm.memory.tiered",
    "MemoryItem": "hermes_fsm.memory.items",
    "RecallPolicy": "hermes_fsm.memory.recall",
    "SemanticStore": "hermes_fsm.memory.semantic",
    "TieredMemory": "hermes_fsm.memory.tiered",
    "ToolOutcomes": "hermes_fsm.memory.experience",
    "WorkingMemory": "hermes_fsm.memory.working",
    "WriteOutcome": "hermes_fsm.memory.items",
    "estimate_tokens": "hermes_fsm.memory.recall",
    "format_recall": "hermes_fsm.memory.recall",
    "item_id": "hermes_fsm.memory.items",
})
