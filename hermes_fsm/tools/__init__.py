"""Tools: one registry for local Python tools and MCP tools, and the executor pipeline
(validate, permit, time out, retry, check output, audit).

- :mod:`~hermes_fsm.tools.registry`: :class:`Tool`, :class:`ToolRegistry`;
- :mod:`~hermes_fsm.tools.executor`: :class:`ToolExecutor`;
- :mod:`~hermes_fsm.tools.permissions`, :mod:`~hermes_fsm.tools.breaker`: who may call what,
  and circuit breaking;
- :mod:`hermes_fsm.tools.mcp`: MCP servers as tool sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.tools.executor import ToolExecutor
    from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["Tool", "ToolExecutor", "ToolRegistry"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Tool": "hermes_fsm.tools.registry",
    "ToolExecutor": "hermes_fsm.tools.executor",
    "ToolRegistry": "hermes_fsm.tools.registry",
})
