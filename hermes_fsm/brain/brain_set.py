"""Several named brains behind one: a state of the graph names its own.

A graph state may say ``brain: rules`` or ``brain: small`` (a name the configuration
defines under ``brains:``); a state without one asks the default brain. So INTENT and
PLANNING can run on the rules brain, or on a small grammar-constrained model, while
RESPONSE runs on a model that writes well::

    brain: {kind: openai, base_url: "http://127.0.0.1:8080/v1", model: smollm2}  # default
    brains:
      rules: {kind: rules}            # always there, even when not configured
      big: {kind: openai, base_url: "http://127.0.0.1:8081/v1", model: gemma3}

The engine picks the state's brain with :meth:`BrainSet.brain_for`; every ``brain_call``
event names the brain that answered (``rules``, ``openai:smollm2``), so a recording says
which brain answered each state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermes_fsm.brain.protocol import Brain, BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.errors import BrainError

__all__ = ["BrainSet", "choose_brain"]


class BrainSet:
    """A default brain and named others (see the module docstring).

    Args:
        default: answers every state that names no brain.
        brains: the named brains (``rules`` is added when missing).
    """

    def __init__(self, default: Brain, brains: Mapping[str, Brain]) -> None:
        self.default = default
        self.brains: dict[str, Brain] = dict(brains)
        self.brains.setdefault("rules", default if isinstance(default, RulesBrain)
                               else RulesBrain())
        self.name = default.name
        # the rolling summary is the default brain's to write (None: the extractive one)
        self.summarize: Any = getattr(default, "summarize", None)
        self.model: Any = getattr(default, "model", None)  # its window sizes the context
        self.max_tokens: Any = getattr(default, "max_tokens", None)

    def brain_for(self, name: str | None) -> Brain:
        """The brain called ``name`` (the default for ``None``).

        Raises:
            BrainError: no brain has that name.
        """
        if name is None:
            return self.default
        brain = self.brains.get(name)
        if brain is None:
            raise BrainError(f"the state asks for brain {name!r}, which is not configured "
                             f"(brains: {', '.join(sorted(self.brains))}); define it under "
                             "`brains:` in the configuration, or fix the graph's `brain:`")
        return brain

    async def decide(self, request: BrainRequest) -> Any:
        """The default brain's answer (the engine asks :meth:`brain_for` first)."""
        return await self.default.decide(request)

    async def check(self) -> dict[str, Any]:
        """Readiness of every brain that can say (``ready`` only when all are)."""
        report: dict[str, Any] = {"ready": True, "brains": {}}
        for name, brain in {"default": self.default, **self.brains}.items():
            check = getattr(brain, "check", None)
            if check is None:
                continue
            try:
                result = dict(await check())
            except Exception as exc:  # an unreachable server: not ready, and why
                result = {"ready": False, "error": f"{type(exc).__name__}: {exc}"}
            report["brains"][name] = result
            report["ready"] = report["ready"] and bool(result.get("ready", True))
        return report

    async def aclose(self) -> None:
        """Close every brain that holds something (each once)."""
        seen: set[int] = set()
        for brain in (self.default, *self.brains.values()):
            close = getattr(brain, "aclose", None)
            if close is not None and id(brain) not in seen:
                seen.add(id(brain))
                await close()


def choose_brain(brain: Brain, name: str | None) -> Brain:
    """The brain that answers a state naming ``name``: from a :class:`BrainSet`; for a
    single brain, itself — or a rules brain for ``rules``.

    Raises:
        BrainError: a state names another brain and only one is configured.
    """
    if isinstance(brain, BrainSet):
        return brain.brain_for(name)
    if name is None or name == getattr(brain, "name", None):
        return brain
    if name == "rules":
        return _rules_brain()
    raise BrainError(f"the state asks for brain {name!r}, but the orchestrator has one brain "
                     f"({getattr(brain, 'name', '?')}); give it a BrainSet, or configure "
                     "`brains:`")


_RULES: list[Brain] = []


def _rules_brain() -> Brain:
    if not _RULES:
        _RULES.append(RulesBrain())
    return _RULES[0]


def memory_keys(brain: Any) -> tuple[str, ...]:
    """The standing memory keys of ``brain`` (its ``memory_keys``; for a :class:`BrainSet`,
    those of all its brains), which the engine recalls by key whatever the message.

    >>> memory_keys(object())
    ()
    """
    brains = ([brain.default, *brain.brains.values()] if isinstance(brain, BrainSet)
              else [brain])
    keys = (k for b in brains for k in (getattr(b, "memory_keys", None) or ()))
    return tuple(dict.fromkeys(keys))
