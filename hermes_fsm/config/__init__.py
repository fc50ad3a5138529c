"""Configuration and the composition root: the one place that picks concrete backends.

- :mod:`~hermes_fsm.config.settings`: :class:`HermesConfig` (YAML file + ``HERMES_*``
  environment variables) and :func:`load_config`;
- :mod:`~hermes_fsm.config.build`: :func:`build_orchestrator`, an orchestrator as the
  configuration says (every concrete backend is picked there);
- :mod:`~hermes_fsm.config.memory`, :mod:`~hermes_fsm.config.store`,
  :mod:`~hermes_fsm.config.toolbox`: the memory tiers, session store and lease, tools and MCP
  servers a configuration asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.config.build import build_orchestrator
    from hermes_fsm.config.settings import HermesConfig, load_config

__all__ = ["HermesConfig", "build_orchestrator", "load_config"]

__getattr__, __dir__ = lazy_face(__name__, {
    "HermesConfig": "hermes_fsm.config.settings",
    "build_orchestrator": "hermes_fsm.config.build",
    "load_config": "hermes_fsm.config.settings",
})
