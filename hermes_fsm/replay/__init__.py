"""Replay recorded sessions against today's contracts and graph (Temporal's replayer shape).

- :mod:`~hermes_fsm.replay.replayer`: the :class:`Replayer` (validate, rerun; one, many).
- :mod:`~hermes_fsm.replay.fakes`: what a rerun runs with — a brain, an executor and a
  memory answering from the recording, and the offline tool catalogue.
- :mod:`~hermes_fsm.replay.compare`: a rerun turn's events against its recording (the
  first :class:`Divergence`).
"""

from __future__ import annotations

from hermes_fsm.errors import ReplayFailed
from hermes_fsm.replay.compare import Divergence
from hermes_fsm.replay.fakes import ReplayBrain, ReplayExecutor, ReplayMemory, offline_catalog
from hermes_fsm.replay.replayer import Finding, Replayer, ReplayResult

__all__ = ["Divergence", "Finding", "ReplayBrain", "ReplayExecutor", "ReplayFailed",
           "ReplayMemory", "ReplayResult", "Replayer", "offline_catalog"]
