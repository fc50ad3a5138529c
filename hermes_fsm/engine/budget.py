"""The token budget of brain requests: the ``context:`` configuration and what it resolves to.

:class:`ContextConfig` is the configuration (every field has a default);
:meth:`ContextConfig.budget` resolves it for a model into a :class:`ContextBudget` — the
window, the reserve for the answer, and each part's cap. How a request is fitted to the
budget is :mod:`hermes_fsm.engine.context`'s.

>>> budget = ContextConfig(max_context_tokens=4096, reserved_output_tokens=512).budget()
>>> budget.available, budget.caps["history"], budget.summary_cap
(3584, 1254, 501)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes_fsm.errors import ConfigError

__all__ = ["DEFAULT_SHARES", "PARTS", "ContextBudget", "ContextConfig", "Part"]

Part = Literal["memory", "tools", "history", "input"]
PARTS: tuple[Part, ...] = ("memory", "tools", "history", "input")
DEFAULT_SHARES: dict[Part, float] = {"memory": 0.15, "tools": 0.2, "history": 0.35,
                                     "input": 0.2}


class ContextConfig(BaseModel):
    """The ``context:`` section of the configuration (every field has a default).

    ::

        context:
          max_context_tokens: 8192        # the model's window
          models: {gpt-4o-mini: 128000}   # per model name (wins over max_context_tokens)
          reserved_output_tokens: 1024    # kept free for the answer
          shares: {memory: 0.15, tools: 0.2, history: 0.35, input: 0.2}  # of the budget
          caps: {tools: 1500}             # tokens; a cap wins over the part's share
          summary_share: 0.4              # of the history cap, for the rolling summary
          fold_target: 0.5                # fold history down to this fraction of its limits
          on_input_overflow: error        # or truncate
          summary_timeout_s: 20
          tokenizer: auto                 # heuristic | calibrated | path/to/tokenizer.json
    """

    model_config = ConfigDict(extra="forbid")

    max_context_tokens: int = Field(default=8192, ge=256)
    models: dict[str, int] = {}
    reserved_output_tokens: int = Field(default=1024, ge=0)
    shares: dict[Part, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES))
    caps: dict[Part, int] = {}
    summary_share: float = Field(default=0.4, gt=0.0, lt=1.0)
    fold_target: float = Field(default=0.5, gt=0.0, le=1.0)
    on_input_overflow: Literal["error", "truncate"] = "error"
    summary_timeout_s: float = Field(default=20.0, gt=0.0)
    tokenizer: str = "auto"

    @model_validator(mode="after")
    def _check(self) -> ContextConfig:
        shares = {**DEFAULT_SHARES, **self.shares}
        if bad := sorted(p for p, v in shares.items() if not 0.0 < v <= 1.0):
            raise ValueError(f"shares of {bad} must be in (0, 1]")
        if (total := sum(shares.values())) > 1.0 + 1e-9:
            raise ValueError(f"shares add up to {total:.2f}; they split one budget (with the "
                             "system prompt and the turn's outputs), keep their sum at most 1")
        self.shares = shares
        if bad := sorted(p for p, v in self.caps.items() if v < 1):
            raise ValueError(f"caps of {bad} must be at least 1 token")
        windows = {"max_context_tokens": self.max_context_tokens,
                   **{f"models.{m}": w for m, w in self.models.items()}}
        for where, window in windows.items():
            if window - self.reserved_output_tokens < 128:
                raise ValueError(f"reserved_output_tokens ({self.reserved_output_tokens}) "
                                 f"leaves less than 128 tokens of {where} ({window}); "
                                 "lower it or raise the window")
        return self

    def budget(self, model: str | None = None, max_output: int | None = None
               ) -> ContextBudget:
        """The budget for ``model`` (its ``models`` entry, else ``max_context_tokens``).

        ``max_output``: the brain's own answer limit (``brain.max_tokens``); it is the
        reserve unless ``reserved_output_tokens`` was set explicitly.

        Raises:
            ConfigError: ``max_output`` leaves less than 128 tokens of the window.
        """
        window = self.models.get(model, self.max_context_tokens) if model else \
            self.max_context_tokens
        reserved = self.reserved_output_tokens
        if max_output is not None and "reserved_output_tokens" not in self.model_fields_set:
            reserved = max_output
            if window - reserved < 128:
                raise ConfigError(f"brain.max_tokens ({max_output}) leaves less than 128 "
                                  f"tokens of the context window ({window}) for the prompt; "
                                  "lower it, or set context.max_context_tokens (or "
                                  "context.models) to the model's real window")
        available = window - reserved
        caps: dict[str, int] = {p: self.caps.get(p, int(self.shares[p] * available))
                                for p in PARTS}
        return ContextBudget(window, reserved, available, caps,
                             int(caps["history"] * self.summary_share))


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """A resolved budget: the window, the reserve, what a prompt may use, the part caps."""

    window: int
    reserved_output: int
    available: int
    caps: Mapping[str, int]
    summary_cap: int
