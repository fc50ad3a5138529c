"""Your own tools from configuration, without Python glue.

::

    tools:
      local: [myapp.tools:registry, myapp.more_tools]   # module:attribute, or a module
      demo: false                                        # the demo tools too? (default:
                                                         # only when no local tools)

Each entry names a :class:`~hermes_fsm.tools.registry.ToolRegistry`, a callable returning
one (``myapp.tools:build_registry``), or an iterable of tools; a bare module means its
``registry`` attribute. A module that is not importable is looked for beside the
configuration file too. The CLI (``run``, ``chat``, ``serve``, ``contracts``) and
``build_orchestrator`` use them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ConfigError
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["configured_registry", "load_tools"]


def configured_registry(local: list[str], demo: bool | None, source: str = "", *,
                        demo_factory: Callable[[], ToolRegistry] = build_demo_registry
                        ) -> ToolRegistry:
    """The registry of a configuration: the local tools, plus the demo tools when ``demo``
    is true (``None``: only when there are no local tools), made by ``demo_factory``.

    Raises:
        ConfigError: an entry cannot be imported, is not tools, or a name is taken twice.
    """
    registry = demo_factory() if (demo if demo is not None else not local) else \
        ToolRegistry()
    base = Path(source).resolve().parent if source and Path(source).is_file() else None
    for spec in local:
        for tool in load_tools(spec, base):
            if registry.find(tool.name) is not None:
                raise ConfigError(f"tools.local: {spec} registers {tool.name!r}, which another "
                                  "entry (or the demo tools) registers too; rename one, or "
                                  "set tools.demo: false")
            registry.add(tool)
    return registry


def load_tools(spec: str, base: Path | None = None) -> list[Tool]:
    """The tools ``spec`` (``module:attribute`` or ``module``) names.

    Raises:
        ConfigError: not importable, no such attribute, or not tools.
    """
    module_name, _, attribute = spec.partition(":")
    module = _import(spec, module_name.strip(), base)
    names = [attribute.strip()] if attribute else ["registry"]
    found = next((getattr(module, n) for n in names if hasattr(module, n)), None)
    if found is None:
        raise ConfigError(f"tools.local: {spec}: module {module_name!r} has no "
                          f"{names[0]!r}; name the registry as module:attribute")
    if callable(found) and not isinstance(found, ToolRegistry):
        try:
            found = found()
        except Exception as exc:  # not a factory of tools, or one that failed
            raise ConfigError(f"tools.local: {spec}: calling it raised {type(exc).__name__}: "
                              f"{exc}; name a ToolRegistry, or a function of no arguments "
                              "returning one") from None
    if isinstance(found, ToolRegistry):
        return found.tools()
    try:
        tools = list(found)
    except TypeError:
        tools = []
    if not tools or not all(isinstance(t, Tool) for t in tools):
        raise ConfigError(f"tools.local: {spec} is a {type(found).__name__}, not a "
                          "ToolRegistry (or a function returning one, or a list of tools)")
    return tools


def _import(spec: str, name: str, base: Path | None) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = name.split(".")[0]
        if exc.name != top or base is None or str(base) in sys.path:
            raise ConfigError(f"tools.local: {spec}: cannot import {name!r} ({exc}); install "
                              "it, or put it on PYTHONPATH or beside the config file") from None
        sys.path.insert(0, str(base))  # a module beside the configuration file
        return _import(spec, name, base)
    except Exception as exc:  # the module itself failed
        raise ConfigError(f"tools.local: {spec}: importing {name!r} raised "
                          f"{type(exc).__name__}: {exc}") from None
