"""Retry policies: how often a step is attempted and how long to wait between attempts.

Shared by graph states, tool contracts and MCP calls, so it sits with the contracts, below
everything that uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["RetryPolicy"]


class RetryPolicy(BaseModel):
    """How often a state is attempted, and how long to wait between attempts.

    ``max_attempts`` counts the first try: 3 means one try and two retries. The wait
    before retry *n* is ``min(backoff_s * multiplier**(n-1), max_backoff_s)``, spread by
    up to ``jitter`` (a fraction) when set.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_attempts: int = Field(default=1, ge=1, le=100)
    backoff_s: float = Field(default=0.0, ge=0.0, le=600.0)
    multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    max_backoff_s: float = Field(default=10.0, ge=0.0, le=3600.0)
    jitter: float = Field(default=0.0, ge=0.0, le=1.0)

    def delay(self, retry_number: int, random: Callable[[], float] | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1 for the first retry)."""
        base = min(self.backoff_s * self.multiplier ** (retry_number - 1), self.max_backoff_s)
        if self.jitter and random is not None:
            base *= 1.0 - self.jitter + 2.0 * self.jitter * random()
        return base

    @field_validator("backoff_s", "max_backoff_s", "jitter", "multiplier", mode="before")
    @classmethod
    def _int_is_a_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
