"""Replay recorded sessions against today's contracts and graph (Temporal's replayer shape).

- :mod:`~hermes_fsm.replay.replayer`: the :class:`Replayer` (validate, rerun; one, many).
- :mod:`~hermes_fsm.replay.fakes`: what a rerun runs with — a brain, an executor and a
  memory answering from the recording, and the offline tool catalogue.
- :mod:`~hermes_fsm.replay.compare`: a rerun turn's events against its recording (the
  first :class:`Divergence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.errors import ReplayFailed
    from hermes_fsm.replay.compare import Divergence
    from hermes_fsm.replay.fakes import ReplayBrain, ReplayExecutor, ReplayMemory, offline_catalog
    from hermes_fsm.replay.replayer import Finding, Replayer, ReplayResult

__all__ = ["Divergence", "Finding", "ReplayBrain", "ReplayExecutor", "ReplayFailed",
           "ReplayMemory", "ReplayResult", "Replayer", "offline_catalog"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Divergence": "hermes_fsm.replay.compare",
    "Finding": "hermes_fsm.replay.replayer",
    "ReplayBrain": "hermes_fsm.replay.fakes",
    "ReplayExecutor": "hermes_fsm.replay.fakes",
    "ReplayFailed": "hermes_fsm.errors",
    "ReplayMemory": "hermes_fsm.replay.fakes",
    "ReplayResult": "hermes_fsm.replay.replayer",
    "Replayer": "hermes_fsm.replay.replayer",
    "offline_catalog": "hermes_fsm.replay.fakes",
})
