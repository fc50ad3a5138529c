"""The brain: what decides a state's output.

- :mod:`~hermes_fsm.brain.protocol`: the :class:`Brain` protocol and its request/reply;
- :mod:`~hermes_fsm.brain.prompt`: chat prompts built from a request;
- :mod:`~hermes_fsm.brain.rules`: :class:`RulesBrain`, the offline default (English and Chinese);
- :mod:`~hermes_fsm.brain.openai`: :class:`OpenAIBrain`, any ``/v1/chat/completions`` server;
- :mod:`~hermes_fsm.brain.tokens`, :mod:`~hermes_fsm.brain.summary`: token counting and
  extractive summaries.
"""

from __future__ import annotations

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
