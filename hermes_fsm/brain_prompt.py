"""Chat messages for a model-backed brain: one state's request as a system + user prompt.

The system message names the state, hands over the contract's JSON Schema and asks for
exactly one JSON object; the user message carries the user's words, what earlier states
of the turn produced, the tools (for a contract that plans tool calls), recalled memory
and recent history. On a retry the refusal (the validation errors) is appended, so the
model can repair its output.

>>> from hermes_fsm.brain import BrainRequest
>>> request = BrainRequest(state="INTENT", contract_name="intent",
...                        schema={"type": "object"}, text="hi", user_id="u",
...                        repair="- confidence: must be <= 1")
>>> [m["role"] for m in chat_messages(request)]
['system', 'user', 'user']
"""

from __future__ import annotations

import json
import re
from typing import Any

from .brain import BrainRequest

__all__ = ["answer_field", "chat_messages", "strip_fences"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def chat_messages(request: BrainRequest, history_limit: int = 6) -> list[dict[str, str]]:
    """The messages asking a chat model for ``request``'s output."""
    schema = json.dumps(request.schema, ensure_ascii=False, separators=(",", ":"))
    system = (
        f"You are the {request.state} step of an agent that answers a user. "
        f"Reply with exactly one JSON object that satisfies this JSON Schema "
        f"(contract '{request.contract_name}'), and nothing else:\n{schema}"
    )
    if request.memory:
        system += f"\n\nBackground about the user:\n{request.memory}"
    parts: list[str] = []
    if request.history:
        recent = list(request.history)[-history_limit:]
        parts.append("Conversation so far:\n" + "\n".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" for m in recent))
    if request.outputs:
        done = {name: output.model_dump(mode="json") for name, output in request.outputs.items()}
        parts.append("Results of earlier steps of this turn:\n"
                     + json.dumps(done, ensure_ascii=False, separators=(",", ":")))
    properties = request.schema.get("properties", {})
    if request.tools and "tool_calls" in properties:
        tools = [{"name": t.name, "description": t.description,
                  "input_schema": t.input_schema} for t in request.tools]
        parts.append("Tools you may call (use these names and argument schemas exactly):\n"
                     + json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
    parts.append(f"User message:\n{request.text}")
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": "\n\n".join(parts)}]
    if request.repair:
        messages.append({"role": "user", "content": (
            f"Attempt {request.attempt}. {request.repair}\n"
            "Reply again with one corrected JSON object only.")})
    return messages


def strip_fences(content: str) -> str:
    """A model's reply without a Markdown code fence around it (models often add one)."""
    match = _FENCE.match(content)
    return match.group(1) if match else content


def answer_field(schema: Any, name: str = "text") -> bool:
    """Whether a contract schema has a top-level string field ``name`` (streamed as tokens)."""
    field = schema.get("properties", {}).get(name) if isinstance(schema, dict) else None
    return isinstance(field, dict) and field.get("type") == "string"
