"""Contracts: what guards every state's output and every tool call.

- :mod:`~hermes_fsm.contracts.base`: :class:`Contract`, the strict, named, versioned
  pydantic base, and :class:`ContractRegistry`;
- :mod:`~hermes_fsm.contracts.states`: the seven-state turn's contracts;
- :mod:`~hermes_fsm.contracts.tools`: tool contracts (one YAML file per tool);
- :mod:`~hermes_fsm.contracts.schema_diff`, :mod:`~hermes_fsm.contracts.check`: breaking-change
  detection against the committed JSON Schemas (``hermes-fsm contracts check``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.contracts.base import Contract, ContractRegistry

__all__ = ["Contract", "ContractRegistry"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Contract": "hermes_fsm.contracts.base",
    "ContractRegistry": "hermes_fsm.contracts.base",
})
