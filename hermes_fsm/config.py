"""Configuration: a YAML file plus ``HERMES_*`` environment variables; none means embedded.

::

    graph: states/agent_turn.yaml     # the graph file (default: the bundled seven-state turn)
    brain:
      kind: rules                     # the offline rules brain
      rules_file: my_rules.yaml       # optional: your own rules (default: the bundled ones)
    busy_policy: refuse               # or queue
    history_window: 20                # messages kept per session
    log: {format: console, level: info}

Relative paths are read relative to the config file. The file is found by ``--config``
or ``HERMES_CONFIG``; ``HERMES_GRAPH`` overrides ``graph``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .yaml_lines import LineDict, YamlProblem, line_at, load_yaml_file

__all__ = ["BrainConfig", "HermesConfig", "LogConfig", "load_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BrainConfig(_Strict):
    """Which brain decides state outputs."""

    kind: Literal["rules"] = "rules"
    rules_file: Path | None = None


class LogConfig(_Strict):
    """How events are logged through structlog (the CLI prints them regardless)."""

    format: Literal["console", "json", "off"] = "off"
    level: Literal["debug", "info", "warning", "error"] = "info"


class HermesConfig(_Strict):
    """The whole configuration; every field has an embedded default."""

    graph: Path | None = None
    brain: BrainConfig = BrainConfig()
    busy_policy: Literal["refuse", "queue"] = "refuse"
    history_window: int = Field(default=20, ge=1, le=10_000)
    log: LogConfig = LogConfig()
    source: str = Field(default="embedded defaults", exclude=True)


def load_config(path: str | Path | None = None,
                environ: Mapping[str, str] | None = None) -> HermesConfig:
    """Load the configuration from ``path``, else ``HERMES_CONFIG``, else embedded defaults.

    Raises:
        ConfigError: unreadable or malformed file (with file and line), or a wrong variable.
    """
    env = os.environ if environ is None else environ
    if path is None:
        path = env.get("HERMES_CONFIG") or None
    if path is None:
        config = HermesConfig()
    else:
        config = _from_file(Path(path))
    graph = env.get("HERMES_GRAPH")
    if graph:
        if not Path(graph).is_file():
            raise ConfigError(f"HERMES_GRAPH={graph!r} is not a file; point it at a graph YAML "
                              "or unset it to use the bundled graph")
        config = config.model_copy(update={"graph": Path(graph)})
    return config


def _from_file(path: Path) -> HermesConfig:
    try:
        doc: Any = load_yaml_file(path)
    except YamlProblem as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise ConfigError(f"{where}: {exc.problem}") from None
    if doc is None:
        doc = LineDict()
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a config file must be a mapping (see hermes_fsm.config)")
    try:
        config = HermesConfig.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = line_at(doc, loc)
        field = ".".join(str(p) for p in loc)
        what = ("unknown field; remove it or check its spelling" if err["type"] == "extra_forbidden"
                else err["msg"])
        raise ConfigError(f"{path}:{line}: {field}: {what}") from None
    base = path.resolve().parent
    updates: dict[str, Any] = {"source": str(path)}
    if config.graph is not None and not config.graph.is_absolute():
        updates["graph"] = base / config.graph
    if config.brain.rules_file is not None and not config.brain.rules_file.is_absolute():
        updates["brain"] = config.brain.model_copy(
            update={"rules_file": base / config.brain.rules_file})
    return config.model_copy(update=updates)
