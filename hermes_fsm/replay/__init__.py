"""Replay recorded sessions against today's contracts and graph (Temporal's replayer shape)."""

from __future__ import annotations

from hermes_fsm.replay.replayer import Divergence, Finding, Replayer, ReplayFailed, ReplayResult

__all__ = ["Divergence", "Finding", "ReplayFailed", "ReplayResult", "Replayer"]
