"""Rolling summaries: what older messages leave behind when they leave the window.

:func:`extractive_summary` is the offline summarizer (the rules brain's, and everyone's
fallback when a model's summary fails or times out). It is deterministic and keeps the
sentences that carry what a later turn needs, in English and Chinese:

- **times and dates** — ``10:30``, ``3pm``, ``Friday``, ``tomorrow``, ``2026-03-01``,
  ``下午三点``, ``周五``, ``明天``, ``3月5日`` (weight 3);
- **constraints** — ``must``, ``don't``, ``never``, ``only``, ``before``, ``by <time>``,
  ``at least``, ``必须``, ``不要``, ``不能``, ``之前``, ``截止``, ``至少`` (weight 3);
- **tasks** — ``remind``, ``need to``, ``book``, ``schedule``, ``send``, ``提醒``, ``需要``,
  ``帮我``, ``安排``, ``预约`` (weight 2);
- **numbers** — any digit (weight 1).

The user's other sentences are kept with weight 0 (the topic), the assistant's only when
they carry one of the above. The summary is one line per sentence, oldest first,
prefixed with who said it. When it is over its token limit, the lowest-weighted lines
go first (the oldest among equals); a last line still too long is cut.

>>> from hermes_fsm.brain.tokens import HeuristicCounter
>>> print(extractive_summary("", [
...     {"role": "user", "content": "Hi there. Remind me to call Bob before Friday 3pm."},
...     {"role": "assistant", "content": "Sure, I can help with that."},
...     {"role": "user", "content": "我必须在明天上午10点前交报告。谢谢!"}],
...     max_tokens=100, counter=HeuristicCounter()))
user: Hi there.
user: Remind me to call Bob before Friday 3pm.
user: 我必须在明天上午10点前交报告。
user: 谢谢!
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hermes_fsm.brain.tokens import HeuristicCounter, TokenCounter

__all__ = ["compress_summary", "extractive_summary", "sentence_weight", "truncate_tokens"]

_SPLIT = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")
# (English patterns, Chinese patterns): matched on the lower-cased sentence, the Chinese
# ones only when it has non-ASCII characters (cheaper than one IGNORECASE alternation)
_TIME = (re.compile(
    r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s*(?:am|pm|a\.m\.|p\.m\.)|\bo'clock\b|\bnoon\b"
    r"|\bmidnight\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:today|tonight"
    r"|tomorrow|yesterday|weekend|morning|afternoon|evening)\b|\bnext (?:week|month|year)\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"), re.compile(
    r"[0-9零〇一二三四五六七八九十两]\s*(?:点|时|號|号|日|月|年|分钟|刻)"
    r"|(?:周|星期|礼拜)[一二三四五六日天]|今天|明天|后天|昨天|今晚|明早|上午|下午|中午|晚上"
    r"|早上|凌晨|下周|下个月|月底|周末"))
_CONSTRAINT = (re.compile(
    r"\b(?:must|mustn't|don't|do not|never|always|only|before|until|no later than|deadline"
    r"|at least|at most|no more than|not allowed|cannot|can't|avoid|without)\b"
    r"|\bby (?:\d|mon|tue|wed|thu|fri|sat|sun|tomorrow|tonight|noon|end|next|the end)"),
    re.compile(r"必须|务必|一定要|不要|别|不能|不可以|不许|禁止|之前|以前|前交|截止|最晚|至少"
               r"|最多|只能|只要|避免"))
_TASK = (re.compile(
    r"\b(?:remind|todo|to-do|need to|needs to|have to|has to|please|book|schedule|call|send"
    r"|buy|order|pay|finish|submit|prepare|check|follow up|cancel|reserve|remember)\b"),
    re.compile(r"提醒|需要|帮我|请|记得|安排|预约|预订|订|买|发送|发给|完成|提交|准备|取消|检查"))
_DIGIT = re.compile(r"\d")
_ELLIPSIS = "…"


def sentence_weight(sentence: str) -> int:
    """How much a summary needs ``sentence``: times, constraints (3 each), tasks (2),
    numbers (1), summed.

    >>> sentence_weight("Call Bob before 3pm."), sentence_weight("Nice weather."), \
sentence_weight("提醒我周五交报告")
    (9, 0, 5)
    """
    low = sentence.lower()
    chinese = not low.isascii()
    weight = 0
    for (english, han), points in ((_TIME, 3), (_CONSTRAINT, 3), (_TASK, 2)):
        if english.search(low) or (chinese and han.search(low)):
            weight += points
    if _DIGIT.search(low):
        weight += 1
    return weight


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(text) if s and s.strip()]


def extractive_summary(previous: str, messages: Sequence[Mapping[str, str]], max_tokens: int,
                       counter: TokenCounter | None = None) -> str:
    """``previous`` (a summary) with the key sentences of ``messages`` added, within
    ``max_tokens`` (see the module docs for what is kept and what goes first).

    Args:
        previous: the summary so far ("" for none); its sentences are kept as they are.
        messages: the messages to fold in, oldest first (``role``, ``content``).
        max_tokens: the limit, by ``counter``.
        counter: measures tokens (default: the heuristic).
    """
    counter = counter or HeuristicCounter()
    lines: list[tuple[int, str]] = []
    seen: set[str] = set()
    for sentence in _sentences(previous):
        if sentence not in seen:
            seen.add(sentence)
            lines.append((sentence_weight(sentence), sentence))
    for message in messages:
        role = str(message.get("role", "user"))
        for sentence in _sentences(str(message.get("content", ""))):
            weight = sentence_weight(sentence)
            if weight == 0 and role != "user":
                continue  # the assistant's small talk: nothing a later turn needs
            line = f"{role}: {sentence}"
            if line not in seen:
                seen.add(line)
                lines.append((weight, line))
    return _fit(lines, max_tokens, counter)


def compress_summary(summary: str, max_tokens: int, counter: TokenCounter | None = None) -> str:
    """``summary`` cut to ``max_tokens`` by the extractive rule (lowest-weighted lines
    first, then the oldest among equals, then a cut)."""
    return extractive_summary(summary, (), max_tokens, counter)


def _fit(lines: list[tuple[int, str]], max_tokens: int, counter: TokenCounter) -> str:
    costs = [counter.count(line) for _, line in lines]
    total = sum(costs)
    if total <= max_tokens:
        return "\n".join(line for _, line in lines)
    keep = [True] * len(lines)
    for index in sorted(range(len(lines)), key=lambda i: (lines[i][0], i)):
        if total <= max_tokens or sum(keep) == 1:
            break
        keep[index] = False
        total -= costs[index]
    kept = [line for (_, line), k in zip(lines, keep, strict=True) if k]
    if total > max_tokens and kept:  # one line left, still too long
        kept = [truncate_tokens(kept[0], max_tokens, counter)]
    return "\n".join(k for k in kept if k)


def truncate_tokens(text: str, max_tokens: int, counter: TokenCounter | None = None) -> str:
    """The longest start of ``text`` that fits ``max_tokens`` (with ``…`` when cut).

    >>> truncate_tokens("one two three four", 3)
    'one two…'
    """
    counter = counter or HeuristicCounter()
    if counter.count(text) <= max_tokens:
        return text
    if max_tokens <= 0:
        return ""
    low, high = 0, len(text)
    while low < high:  # the longest prefix whose cut form fits
        mid = (low + high + 1) // 2
        if counter.count(text[:mid].rstrip() + _ELLIPSIS) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low].rstrip() + _ELLIPSIS if low else ""
