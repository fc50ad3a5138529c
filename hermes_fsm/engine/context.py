"""Context building: what each brain request gets, within the model's token budget.

The budget is the model's context window (``max_context_tokens``, or its entry in
``models``) less the tokens reserved for the answer (``reserved_output_tokens``). It is
split across the parts of a request:

========== ======================================= ==========================================
part       what                                    when it is over
========== ======================================= ==========================================
system     the state's instructions and contract   never cut: measured, taken off the top
           JSON Schema
steps      this turn's earlier outputs (the facts  never cut (an answer must cite them)
           to cite) and a retry's refusal
graph      the conversation graph's block          never cut: bounded by pruning
                                                   (``ConversationPolicy.max_entities``)
input      the user's message                      over its cap: :class:`ContextOverflow`
                                                   before the turn (default), or cut to the
                                                   cap (``on_input_overflow: truncate``)
memory     the recalled-memory block               lines dropped from the bottom: past tool
                                                   outcomes, then the lowest-scored memories
resources  MCP resources the scenario reads        never cut: taken off the top (bounded
           (``tools.toolsets.<name>.resources``)   by configuration: which URIs a toolset
                                                   names); ``resources`` in the event names
                                                   them with their tokens
tools      tool schemas (planning contracts only)  the tools least related to the message
                                                   dropped first (later ones among equals)
history    rolling summary + recent messages       oldest messages first, then the summary
========== ======================================= ==========================================

Each capped part has a cap in tokens (``caps``) or a share of the budget (``shares``).
When the fixed parts (system, steps, graph, input) leave less room than memory, tools and
history want, their caps shrink in proportion, so a prompt never exceeds the budget
unless the fixed parts alone do (reported as ``overflow``, never silent).

**Sliding window and rolling summary.** Once per turn (at its first brain request), the
session's history is fitted to its cap: when the messages are over the window's share
(the history cap less the summary's ``summary_share``) or over ``history_window - 2``
messages (room for this turn's two), the oldest are folded into the session's rolling
summary until the history is at ``fold_target`` of those limits (so the summarizer runs
every few turns, not every turn). The brain writes the summary (its ``summarize``,
under ``summary_timeout_s`` and at most half the state's timeout); a brain without one,
or one that fails, times out or answers nothing, gets the extractive summarizer of
:mod:`hermes_fsm.brain.summary`, and the event records why. The builder writes no
session state: the fold is in the ``context_built`` event (``folded``, ``summary``), and
the engine applies the event to the running turn (:func:`apply_fold`) as it does to a
session rebuilt from its events (:func:`apply_context_event`). The summary is part of
the session's checkpoint.

The configuration and the budget it resolves to are in :mod:`hermes_fsm.engine.budget`
(re-exported here).

Every brain request leaves a ``context_built`` event
(:class:`~hermes_fsm.events.model.ContextBuilt`) with the tokens per part, the caps, what was
dropped, folded or cut. One per request, not one per turn, because the parts differ by
request: tools are in the prompt only when planning, a state recalling ``past_outcomes``
adds them to its memory, earlier outputs grow as the turn goes, a retry adds its refusal — only a
per-request event says what the model saw. The costly step, folding (which may call a
model), still runs once per turn; the event of the request that did it carries
``folded`` and the new ``summary``.

>>> budget = ContextConfig(max_context_tokens=4096, reserved_output_tokens=512).budget()
>>> budget.available, budget.caps["history"], budget.summary_cap
(3584, 1254, 501)
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hermes_fsm._internal.redact import redact
from hermes_fsm.brain.prompt import (
    OUTPUTS_HEADER,
    conversation_block,
    facts_block,
    history_block,
    input_block,
    memory_block,
    plans_tools,
    repair_message,
    resources_block,
    shown_outputs,
    shows_conversation,
    summary_block,
    system_parts,
    tools_block,
)
from hermes_fsm.brain.protocol import BrainReply, BrainRequest, SummaryRequest, ToolDescription
from hermes_fsm.brain.summary import compress_summary, extractive_summary, truncate_tokens
from hermes_fsm.brain.tokens import CalibratedCounter, TokenCounter, build_counter
from hermes_fsm.engine.budget import ContextBudget, ContextConfig
from hermes_fsm.engine.session import Session
from hermes_fsm.engine.turn import TurnContext
from hermes_fsm.errors import BrainError, ContextOverflow

__all__ = ["ContextBudget", "ContextBuilder", "ContextConfig", "ContextFold", "Summary",
           "apply_context_event", "apply_fold"]

_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_]+")


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary as written: the text, who wrote it, why the brain's was not used, and
    whether it had to be cut to its budget."""

    text: str
    summarizer: str
    error: str | None = None
    cut: bool = False


@dataclass(frozen=True, slots=True)
class ContextFold:
    """What a build folds into the session's rolling summary: its oldest ``folded``
    messages go, ``summary`` replaces the summary. The builder only says so; the engine
    applies it from the ``context_built`` event (:func:`apply_fold`)."""

    folded: int
    summary: Summary


class ContextBuilder:
    """Fits each brain request into the token budget (see the module docs).

    Args:
        config: the budget and rules (default: :class:`ContextConfig` defaults).
        brain: the brain (its ``model`` picks the window from ``config.models``, its
            ``max_tokens`` is the output reserve unless ``reserved_output_tokens`` is set;
            a brain that reports usage gets the calibrated counter with ``tokenizer: auto``).
        counter: the token counter (default: from ``config.tokenizer``).
        history_window: the session's most messages (the orchestrator's).
    """

    def __init__(self, config: ContextConfig | None = None, *, brain: Any = None,
                 counter: TokenCounter | None = None, history_window: int = 20) -> None:
        self.config = config if config is not None else ContextConfig()
        self.counter = counter if counter is not None else build_counter(
            self.config.tokenizer, brain)
        model, max_output = getattr(brain, "model", None), getattr(brain, "max_tokens", None)
        self.budget = self.config.budget(model if isinstance(model, str) else None,
                                         max_output if isinstance(max_output, int) else None)
        self.history_window = history_window
        self._outputs: dict[int, tuple[Any, str, int]] = {}  # id → (output, name, tokens)
        # (history, line costs, turn): the last history measured, after its fold if any
        self._last_history: tuple[Any, list[int], Any] | None = None
        self._header: tuple[Any, int] | None = None  # (counter ratio, tokens)
        self._tools: tuple[Any, Any, int] | None = None  # (tools list, ratio, tokens)
        self._settled: tuple[Any, str, Any] | None = None  # (history, summary, ratio): no fold
        self._blocks: dict[Any, tuple[str, Any, int]] = {}  # block → (text, ratio, tokens)
        self._graph_last: tuple[tuple[Any, ...], int] | None = None  # graph, revision …
        self._system: dict[str, tuple[str, Any, int]] = {}  # state → (fixed text, ratio, tokens)

    # --- the input ----------------------------------------------------------------------

    def check_input(self, text: str) -> None:
        """Refuse a message that alone is over the input cap (``on_input_overflow: error``).

        Raises:
            ContextOverflow: says how big it is, the cap, and what to change.
        """
        if self.config.on_input_overflow != "error":
            return
        tokens = self.counter.count(input_block(text))
        cap = self.budget.caps["input"]
        if tokens > cap:
            b = self.budget
            raise ContextOverflow(
                f"the message is {tokens} tokens ({self.counter.name}) but the input budget "
                f"is {cap} (context window {b.window}, {b.reserved_output} reserved for the "
                "answer); shorten the message, raise context.caps.input or "
                "context.max_context_tokens, or set context.on_input_overflow: truncate")

    # --- one request ----------------------------------------------------------------------

    async def build(self, turn: TurnContext, request: BrainRequest, *, trim_tools: bool = True
                    ) -> tuple[BrainRequest, dict[str, Any]]:
        """The request with its context fitted to the budget, and the ``context_built``
        event's fields.

        Folds old history into the session's rolling summary first when it is over its
        limits (in effect once per turn: after a fold it fits). The fold is in the event's
        fields (``folded``, ``summary``); the session is left as it is: the caller applies
        the event (:func:`apply_fold`).

        Raises:
            ContextOverflow: the message is over its cap and ``on_input_overflow`` is error.

        ``trim_tools=False`` (a brain without a window, such as the rules brain) offers
        every tool, whatever the budget.
        """
        history = turn.history
        last = self._last_history
        if last is not None and (last[0] is history  # the same turn asks again: counted
                                 or (last[2] is turn and _same_items(last[0], history))):
            costs = last[1]  # (the second: the same turn, its fold applied since)
        else:
            costs = self._costs(history)
        summary, ratio = turn.session.summary, getattr(self.counter, "ratio", None)
        settled = self._settled
        if (settled is not None and settled[0] is history and settled[1] is summary
                and settled[2] == ratio):
            fold = None  # checked at this turn's previous request: nothing to fold
        else:
            fold = await self.fold(turn, costs)
        if fold is not None:
            history, costs = history[fold.folded:], costs[fold.folded:]
            summary = fold.summary.text
        else:
            self._settled = (history, summary, ratio)
        self._last_history = (history, costs, turn)
        return self.compose(request, history, summary, fold, costs, trim_tools=trim_tools)

    def compose(self, request: BrainRequest, history: Sequence[Mapping[str, str]],
                summary: str, fold: ContextFold | None = None, costs: Sequence[int] | None = None,
                *, trim_tools: bool = True) -> tuple[BrainRequest, dict[str, Any]]:
        """Fit ``request`` with ``history`` and ``summary`` to the budget (no folding).

        ``costs`` are the tokens of each history message's line, if known. Parts are
        measured piece by piece (a message, a memory line), so they add up.
        """
        count, b = self.counter.count, self.budget
        costs = costs if costs is not None else self._costs(history)
        header = self._history_header()
        truncated: list[str] = []
        system = self._system_tokens(request)
        steps = self._steps(request)
        graph = self._graph_tokens(request)  # fixed, and bounded: GraphEdit.prune
        # the resources a scenario reads are fixed like the steps (their URIs configured)
        resources_tokens = self._block_tokens(resources_block, request.resources)
        steps_graph = steps + graph + resources_tokens
        text = request.text
        input_tokens = self._block_tokens(input_block, text)
        if input_tokens > b.caps["input"]:
            if self.config.on_input_overflow == "error":
                self.check_input(text)  # raises, with the explanation
            label = count(input_block(""))
            text = truncate_tokens(text, b.caps["input"] - label, self.counter)
            input_tokens = count(input_block(text))
            truncated.append("input")
        plans = plans_tools(request)
        memory_tokens = self._block_tokens(memory_block, request.memory)
        tools_tokens = self._tools_cost(request.tools) if plans else 0
        summary_tokens = self._block_tokens(summary_block, summary)
        history_tokens = header + sum(costs) if history else 0
        need = {"memory": memory_tokens, "tools": tools_tokens,
                "history": summary_tokens + history_tokens}
        caps = b.caps
        want = {"memory": min(memory_tokens, caps["memory"]),
                "tools": min(tools_tokens, caps["tools"]),
                "history": min(need["history"], caps["history"])}
        grant = _share(want, b.available - system - steps_graph - input_tokens)
        if plans and tools_tokens > grant["tools"] and "tools" not in self.config.caps:
            # the window's unused share goes to the tools (an explicit cap still wins)
            spare = b.available - system - steps_graph - input_tokens - sum(grant.values())
            grant["tools"] = min(tools_tokens, grant["tools"] + max(0, spare))
        dropped: dict[str, int] = {}
        memory, lines = request.memory, 0
        if memory_tokens > grant["memory"]:
            memory, lines = self._trim_memory(memory, grant["memory"])
            memory_tokens = count(memory_block(memory))
        if lines:
            dropped["memory"] = lines
        tools: Sequence[ToolDescription] = request.tools
        gone: list[str] = []
        if plans and trim_tools and tools_tokens > grant["tools"]:
            tools, gone = self._trim_tools(tools, _topic(request, text), grant["tools"])
            tools_tokens = self._tools_cost(tools)
        if gone:
            dropped["tools"] = len(gone)
        window: Sequence[Mapping[str, str]]
        if need["history"] > grant["history"]:
            window, costs, summary_sent, messages, cut = self._trim_history(
                history, costs, summary, grant["history"])
            summary_tokens = count(summary_block(summary_sent))
            history_tokens = header + sum(costs) if window else 0
        else:  # it fits: sent as is
            window, summary_sent, messages, cut = history, summary, 0, False
        if messages:
            dropped["history"] = messages
        if cut:
            truncated.append("summary")
        parts = {"system": system,
                 "summary": summary_tokens,
                 "history": history_tokens,
                 "memory": memory_tokens,
                 "resources": resources_tokens,
                 "tools": tools_tokens,
                 "steps": steps,
                 "graph": graph,
                 "input": input_tokens}
        used = sum(parts.values())
        fields: dict[str, Any] = {
            "state": request.state, "attempt": request.attempt, "counter": self.counter.name,
            "window": b.window, "reserved_output": b.reserved_output, "budget": b.available,
            "used": used, "parts": parts, "caps": {**grant, "input": b.caps["input"]},
            "dropped": dropped, "dropped_tools": gone, "truncated": truncated,
            # tools a windowless brain gets whole (trim_tools=False) are no overflow
            "overflow": max(0, used - (0 if trim_tools else tools_tokens) - b.available)}
        if fold is not None:
            fields.update(folded=fold.folded, summary=fold.summary.text,
                          summarizer=fold.summary.summarizer, summary_error=fold.summary.error)
            if fold.summary.cut and "summary" not in truncated:
                truncated.append("summary")
        sent_tools, sent_window = tuple(tools), tuple(window)
        if (text is request.text and memory is request.memory and sent_tools is request.tools
                and sent_window is request.history and summary_sent == request.summary):
            return request, fields  # nothing to change (the common case)
        built = replace(request, text=text, memory=memory, tools=sent_tools,
                        history=sent_window, summary=summary_sent)
        return built, fields

    def observe(self, used: int, usage: Mapping[str, int], source: str | None) -> None:
        """Learn from what the server counted for a request we estimated at ``used``
        (only a calibrated counter learns; only from server- or tokenizer-counted usage)."""
        counter = self.counter
        prompt = usage.get("prompt_tokens")
        if (isinstance(counter, CalibratedCounter) and prompt
                and source in ("server", "tokenizer")):
            counter.observe(round(used / counter.ratio), prompt)

    # --- the rolling summary --------------------------------------------------------------

    async def fold(self, turn: TurnContext, costs: Sequence[int] | None = None
                   ) -> ContextFold | None:
        """What to fold of the turn's history into the session's rolling summary when the
        history is over its limits (the summary written); ``None`` when nothing has to
        change. Nothing is changed here: the engine applies the fold (:func:`apply_fold`).

        ``costs``: the tokens of each message's line, if already counted."""
        session, b, count = turn.session, self.budget, self.counter.count
        history = list(turn.history)
        window_cap = max(0, b.caps["history"] - b.summary_cap - self._history_header())
        limit = max(0, self.history_window - 2)
        costs = list(costs) if costs is not None else self._costs(history)
        total = sum(costs)
        n = 0
        if len(history) > limit or total > window_cap:
            target = self.config.fold_target
            max_messages, max_tokens = int(limit * target), int(window_cap * target)
            while n < len(history) and (len(history) - n > max_messages or total > max_tokens):
                total -= costs[n]
                n += 1
            if n < len(history) and history[n].get("role") == "assistant":
                n += 1  # keep turns whole: no answer without its question
        previous = session.summary
        if n == 0 and count(summary_block(previous)) <= b.summary_cap:
            return None
        timeout = self.config.summary_timeout_s
        state_timeout = turn.state.timeout_s if turn.state is not None else None
        if state_timeout:
            timeout = min(timeout, state_timeout / 2)  # leave the state time to answer
        summary = await self.summarize(turn.services.brain, turn.user_id, turn.session_id,
                                       previous, history[:n], timeout)
        return ContextFold(n, summary)

    async def summarize(self, brain: Any, user_id: str, session_id: str, previous: str,
                        messages: Sequence[Mapping[str, str]],
                        timeout_s: float | None = None) -> Summary:
        """``previous`` with ``messages`` folded in, within the summary budget: by the
        brain's ``summarize`` (under ``timeout_s``), else — or when it fails, times out or
        answers nothing — by the extractive summarizer. Never raises (but cancellation)."""
        counter = self.counter
        header = counter.count(summary_block("x")) - counter.count("x")
        limit = max(1, self.budget.summary_cap - header)  # the block, header included, fits
        timeout_s = self.config.summary_timeout_s if timeout_s is None else timeout_s
        summarize = getattr(brain, "summarize", None)
        error: str | None = None
        if summarize is not None:
            request = SummaryRequest(user_id, session_id, previous, tuple(messages), limit,
                                     counter)
            try:
                async with asyncio.timeout(timeout_s):
                    text = await summarize(request)
                if isinstance(text, BrainReply):
                    text = text.output
                if not isinstance(text, str) or not text.strip():
                    raise BrainError("the brain's summary was empty")
            except Exception as exc:
                error = redact(f"{type(exc).__name__}: {exc}") if str(exc) else \
                    type(exc).__name__
                if isinstance(exc, TimeoutError):
                    error = f"TimeoutError: no summary within {timeout_s:g}s"
            else:
                text = text.strip()
                if counter.count(text) <= limit:
                    return Summary(text, str(getattr(brain, "name", "brain")))
                return Summary(compress_summary(text, limit, counter),
                               str(getattr(brain, "name", "brain")), cut=True)
        return Summary(extractive_summary(previous, messages, limit, counter), "extractive",
                       error)

    # --- trimming ---------------------------------------------------------------------------

    def _trim_memory(self, memory: str, limit: int) -> tuple[str, int]:
        """The memory block within ``limit`` (its header included) and how many lines went:
        item lines (``- ...``) from the bottom, headers left without items with them."""
        count = self.counter.count
        if not memory or count(memory_block(memory)) <= limit:
            return memory, 0
        lines = memory.split("\n")
        header = count(memory_block("x")) - count("x")
        costs = [count(line) for line in lines]
        keep = [True] * len(lines)
        items = [i for i, line in enumerate(lines) if line.startswith("- ")]
        if not items:  # not itemized: cut it
            return truncate_tokens(memory, max(0, limit - header), self.counter), 1

        def kept_lines() -> list[int]:
            out: list[int] = []
            pending: list[int] = []
            after_item = False
            for i, line in enumerate(lines):
                if line.startswith("- "):
                    if keep[i]:
                        out += [*pending, i]
                        pending = []
                    after_item = True
                else:
                    if after_item:
                        pending = []  # a new section: the last one's header went with its items
                    pending.append(i)
                    after_item = False
            return out

        dropped = 0
        for index in reversed(items):
            if header + sum(costs[i] for i in kept_lines()) <= limit:
                break
            keep[index] = False
            dropped += 1
        text = "\n".join(lines[i] for i in kept_lines()).strip("\n")
        if text and count(memory_block(text)) > limit:  # even the best item alone is over
            dropped += sum(keep[i] for i in items)
            text = ""
        return text, dropped

    def _trim_tools(self, tools: Sequence[ToolDescription], text: str, limit: int
                    ) -> tuple[Sequence[ToolDescription], list[str]]:
        """The tools within ``limit`` and the names of those left out: the ones sharing
        the fewest words with the message (and the turn's task: see :func:`_topic`) go first,
        the later ones among equals."""
        count = self.counter.count
        if self._tools_cost(tools) <= limit:
            return tools, []  # the same list: its count stays cached
        kept = list(tools)
        words = {w.lower() for w in _WORD.findall(text)}
        relevance = {t.name: len(words & {w.lower() for w in _WORD.findall(
            f"{t.name.replace('_', ' ')} {t.description}")}) for t in kept}
        order = sorted(range(len(kept)), key=lambda i: (relevance[kept[i].name], -i))
        gone: set[int] = set()
        for index in order:
            if count(tools_block([t for i, t in enumerate(kept) if i not in gone])) <= limit:
                break
            gone.add(index)
        return ([t for i, t in enumerate(kept) if i not in gone],
                [kept[i].name for i in sorted(gone)])

    def _steps(self, request: BrainRequest) -> int:
        """Tokens of the earlier outputs of the turn (and a retry's refusal), counted output
        by output: each output is counted once, however many requests show it."""
        count = self.counter.count
        total = count(repair_message(request))
        if not request.outputs:
            return total
        total += count(OUTPUTS_HEADER)
        facts = facts_block(request)  # an answer's facts as lines, for the JSON of their outputs
        if facts:
            total += count(facts)
        cache = self._outputs
        for name, output in shown_outputs(request).items():
            hit = cache.get(id(output))
            if hit is None or hit[0] is not output or hit[1] != name:
                if len(cache) >= 256:  # a turn shows a few: keep few alive (GC)
                    cache.clear()
                dumped = output.model_dump_json()
                quoted = _QUOTED.get(name)
                if quoted is None:
                    quoted = _QUOTED[name] = json.dumps(name)
                text = f'{{{quoted}:{dumped}}}'
                hit = cache[id(output)] = (output, name, count(text))  # braces: the commas
            total += hit[2]
        return total

    def _graph_tokens(self, request: BrainRequest) -> int:
        """Tokens of the conversation graph's block, counted again only when the graph
        changed (its ``revision``) since the last request."""
        conv = request.conversation
        if conv is None or not shows_conversation(request):
            return 0
        key = (conv, conv.revision, getattr(self.counter, "ratio", None))
        last = self._graph_last
        if last is not None and last[0][0] is conv and last[0][1:] == key[1:]:
            return last[1]
        tokens = self.counter.count(conversation_block(request)) if (
            conv.entities or conv.tasks) else 0
        self._graph_last = (key, tokens)
        return tokens
    def _system_tokens(self, request: BrainRequest) -> int:
        """The system prompt's tokens: its fixed part (instructions and schema, the same
        text object for every request of a state) measured once per state, its clock block
        at each request (it starts with a blank line, so the heuristic counts the two
        parts exactly as the whole; a tokenizer may differ by a token at the join, as it
        may between the other parts). Re-counting a few kB of schema at every request was
        most of fitting a request that needs no cut."""
        fixed, clock = system_parts(request)
        ratio = getattr(self.counter, "ratio", None)
        hit = self._system.get(request.state)
        if hit is None or hit[0] is not fixed or hit[1] != ratio:
            if len(self._system) >= 256:
                self._system.clear()
            hit = self._system[request.state] = (fixed, ratio, self.counter.count(fixed))
        return hit[2] + (self.counter.count(clock) if clock else 0)

    def _block_tokens(self, block: Any, text: str) -> int:
        """``count(block(text))``, kept for the last text of each block: a turn's message,
        memory and summary are measured again at each of its requests."""
        ratio = getattr(self.counter, "ratio", None)
        last = self._blocks.get(block)
        if last is not None and last[0] is text and last[1] == ratio:
            return last[2]
        tokens = self.counter.count(block(text))
        self._blocks[block] = (text, ratio, tokens)
        return tokens

    def _costs(self, history: Sequence[Mapping[str, str]]) -> list[int]:
        """The tokens of each message's line in the history block."""
        count = self.counter.count
        return [count(_line(m)) for m in history]

    def _history_header(self) -> int:
        """The history block's header tokens (fixed for a counter: cached per its ratio)."""
        key = getattr(self.counter, "ratio", None)
        cached = self._header
        if cached is not None and cached[0] == key:
            return cached[1]
        count = self.counter.count
        tokens = count(history_block([{"role": "x", "content": ""}])) - count("x: ")
        self._header = (key, tokens)
        return tokens

    def _tools_cost(self, tools: Sequence[ToolDescription]) -> int:
        """The tools block's tokens: the catalog describes the same tools turn after turn,
        so the last catalog's count is kept (by names, descriptions, schemas and ratio)."""
        key = (getattr(self.counter, "ratio", None),
               tuple((t.name, t.description, id(t.input_schema)) for t in tools))
        cached = self._tools
        if cached is not None and cached[1] == key:
            return cached[2]
        tokens = self.counter.count(tools_block(tools))
        self._tools = (list(tools), key, tokens)  # the list keeps the schemas (their ids) alive
        return tokens

    def _trim_history(self, history: Sequence[Mapping[str, str]], costs: Sequence[int],
                      summary: str, limit: int
                      ) -> tuple[list[Mapping[str, str]], list[int], str, int, bool]:
        """The window and summary within ``limit``: the oldest messages go first (whole
        turns), then the summary's oldest lines, then it is cut. Returns the window, its
        costs, the summary, how many messages went, and whether the summary was cut."""
        count = self.counter.count
        window = list(history)
        costs = list(costs)
        header = self._history_header()
        summary_cost = count(summary_block(summary))

        def total() -> int:
            return summary_cost + (header + sum(costs) if window else 0)

        dropped = 0
        while window and total() > limit:
            window.pop(0)
            costs.pop(0)
            dropped += 1
            if window and window[0].get("role") == "assistant":
                window.pop(0)
                costs.pop(0)
                dropped += 1
        cut = False
        if summary and total() > limit:
            cut = True
            lines = summary.split("\n")
            head = count(summary_block("x")) - count("x")
            while len(lines) > 1 and head + sum(count(s) for s in lines) > limit:
                lines.pop(0)  # the oldest line of the summary
            summary = "\n".join(lines)
            if head + count(summary) > limit:
                summary = truncate_tokens(summary, max(0, limit - head), self.counter)
        return window, costs, summary, dropped, cut


_QUOTED: dict[str, str] = {}


def _line(message: Mapping[str, str]) -> str:
    return f"{message.get('role', '?')}: {message.get('content', '')}"


def _share(want: Mapping[str, int], room: int) -> dict[str, int]:
    """Each part's grant: what it wants (within its cap), shrunk in proportion when the
    room left by the fixed parts is smaller than the sum."""
    room = max(0, room)
    total = sum(want.values())
    if total <= room:
        return dict(want)
    return {part: (tokens * room) // total for part, tokens in want.items()}


def _same_items(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two histories hold the very same messages (objects), in order."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def apply_fold(turn: TurnContext, event: Mapping[str, Any]) -> None:
    """Apply a ``context_built`` event's fold to the running turn: to its session
    (:func:`apply_context_event`) and to the turn's view of the history."""
    apply_context_event(turn.session, event)
    folded = int(event.get("folded") or 0)
    if folded:
        turn.history = turn.history[folded:]


def apply_context_event(session: Session, event: Mapping[str, Any]) -> None:
    """Bring a session up to a ``context_built`` event (as it runs, or rebuilt from stored
    events): a build that changed the rolling summary folded its oldest ``folded``
    messages into it."""
    summary = event.get("summary")
    if summary is None:
        return
    folded = int(event.get("folded") or 0)
    if folded:
        del session.history[:folded]
    session.summary = summary


def _topic(request: BrainRequest, text: str) -> str:
    """What the tools are ranked against: the message, and what the turn made of it so
    far (the intent's type and slot names, the tools of an earlier plan), so that a
    follow-up ("那上海徐汇区呢") keeps the tools of its task."""
    words = [text]
    intent = request.outputs.get("intent")
    if intent is not None:
        words.append(str(getattr(intent, "intent_type", "")))
        words += [str(k) for k in (getattr(intent, "parameters", None) or {})]
    plan = request.outputs.get("plan")
    words += [str(getattr(c, "tool_name", "")) for c in getattr(plan, "tool_calls", ())]
    return " ".join(words)
