"""The brain: what decides a state's output.

- :mod:`~hermes_fsm.brain.protocol`: the :class:`Brain` protocol and its request/reply;
- :mod:`~hermes_fsm.brain.prompt`: chat prompts built from a request;
- :mod:`~hermes_fsm.brain.rules`: :class:`RulesBrain`, the offline default (English and Chinese);
- :mod:`~hermes_fsm.brain.openai`: :class:`OpenAIBrain`, any ``/v1/chat/completions`` server;
- :mod:`~hermes_fsm.brain.tokens`, :mod:`~hermes_fsm.brain.summary`: token counting and
  extractive summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.brain.openai import OpenAIBrain
    from hermes_fsm.brain.protocol import (
        Brain,
        BrainReply,
        BrainRequest,
        Repair,
        RepairError,
        Summarizer,
        SummaryRequest,
        ToolDescription,
    )
    from hermes_fsm.brain.rules import RuleBook, RulesBrain

__all__ = ["Brain", "BrainReply", "BrainRequest", "OpenAIBrain", "Repair", "RepairError",
           "RuleBook", "RulesBrain", "Summarizer", "SummaryRequest", "ToolDescription"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Brain": "hermes_fsm.brain.protocol",
    "BrainReply": "hermes_fsm.brain.protocol",
    "BrainRequest": "hermes_fsm.brain.protocol",
    "OpenAIBrain": "hermes_fsm.brain.openai",
    "Repair": "hermes_fsm.brain.protocol",
    "RepairError": "hermes_fsm.brain.protocol",
    "RuleBook": "hermes_fsm.brain.rules",
    "RulesBrain": "hermes_fsm.brain.rules",
    "Summarizer": "hermes_fsm.brain.protocol",
    "SummaryRequest": "hermes_fsm.brain.protocol",
    "ToolDescription": "hermes_fsm.brain.protocol",
})
