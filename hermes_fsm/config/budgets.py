"""Turn and state budgets from configuration, over the graph file's.

A CPU box running a small local model needs longer budgets than the bundled graph's,
without a copied graph file::

    budgets:
      budget_s: 240              # the whole turn (the graph's budget_s)
      timeout_s: 90              # every state that has a timeout in the graph ...
      states: {RESPONSE: 150}    # ... and these states, by name (wins over timeout_s)

Unset values keep the graph's own. The graph's content hash stays that of its file: a
recording names the file it was made with, and budgets do not change what a replay does.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field

from hermes_fsm.errors import ConfigError
from hermes_fsm.graph.model import Graph

__all__ = ["BudgetsConfig", "apply_budgets", "apply_state_brains"]

_Seconds = Field(default=None, gt=0)


class BudgetsConfig(BaseModel):
    """``budgets:`` of the configuration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    budget_s: float | None = _Seconds
    timeout_s: float | None = _Seconds
    states: dict[str, float] = {}

    def is_set(self) -> bool:
        """Whether any budget is configured (else the graph is used as it is)."""
        return self.budget_s is not None or self.timeout_s is not None or bool(self.states)


def apply_budgets(graph: Graph, budgets: BudgetsConfig) -> Graph:
    """``graph`` with the configured turn budget and state timeouts.

    Raises:
        ConfigError: a state named under ``budgets.states`` is not in the graph, or a
            timeout is not positive.
    """
    unknown = sorted(set(budgets.states) - set(graph.states))
    if unknown:
        raise ConfigError(f"budgets.states names {', '.join(unknown)}, not a state of graph "
                          f"{graph.name} ({', '.join(graph.states)}); fix the name")
    bad = sorted(name for name, seconds in budgets.states.items() if not seconds > 0)
    if bad:
        raise ConfigError(f"budgets.states: the timeout of {', '.join(bad)} must be a "
                          "positive number of seconds")
    states = {}
    for name, spec in graph.states.items():
        timeout = budgets.states.get(name)
        if timeout is None and budgets.timeout_s is not None and spec.timeout_s is not None:
            timeout = budgets.timeout_s
        states[name] = spec if timeout is None else replace(spec, timeout_s=timeout)
    budget = budgets.budget_s if budgets.budget_s is not None else graph.budget_s
    return replace(graph, states=states, budget_s=budget)


def apply_state_brains(graph: Graph, state_brains: dict[str, str],
                       fallback_brains: dict[str, str] | None = None) -> Graph:
    """``graph`` with the brains configuration assigns to states (``state_brains:
    {INTENT: rules, PLANNING: rules}``) and the brains that answer a state's last attempt
    after a refused one (``fallback_brains: {RESPONSE: rules}``), over the graph file's
    ``brain:`` and ``fallback_brain:``.

    Raises:
        ConfigError: a state named is not in the graph.
    """
    fallback_brains = fallback_brains or {}
    for what, names in (("state_brains", state_brains), ("fallback_brains", fallback_brains)):
        unknown = sorted(set(names) - set(graph.states))
        if unknown:
            raise ConfigError(f"{what} names {', '.join(unknown)}, not a state of graph "
                              f"{graph.name} ({', '.join(graph.states)}); fix the name")
    states = {}
    for name, spec in graph.states.items():
        if name in state_brains:
            spec = replace(spec, brain=state_brains[name])
        if name in fallback_brains:
            spec = replace(spec, fallback_brain=fallback_brains[name])
        states[name] = spec
    return replace(graph, states=states)
