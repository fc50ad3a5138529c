"""Token counting for context budgets: a small protocol and an offline default.

A :class:`TokenCounter` has a ``name`` (it appears in ``context_built`` events) and
``count(text) -> int``. Three come with hermes-fsm:

- :class:`HeuristicCounter`, the default: no model, no download, Chinese and English.
  It leans towards counting too many rather than too few (a budget that over-counts
  wastes a little room; one that under-counts overflows the model's window):

  * each CJK character (Han ideographs, kana, Hangul, CJK and full-width punctuation):
    one token — what BPE tokenizers of current chat models give on average;
  * each run of other letters: one token per six letters (most English words are one);
  * each run of digits: one token per three digits (tokenizers split numbers that way);
  * each run of other non-space symbols (punctuation, JSON braces and quotes): one token
    per two;
  * whitespace: free (tokenizers fold a leading space into the next word).

- :class:`CalibratedCounter`: the heuristic scaled by what a server reported — the
  OpenAI-compatible brain returns ``usage.prompt_tokens``, and the ratio of that to our
  estimate of the same prompt is learnt (a running average, kept within 0.5–2).
- :class:`TokenizerCounter`: exact counts from a local ``tokenizer.json`` (Hugging Face
  ``tokenizers``; no download: point it at a file you have).

>>> counter = HeuristicCounter()
>>> counter.count("How many A1001 are left?"), counter.count("华东仓还有多少库存?")
(8, 10)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hermes_fsm.errors import ConfigError

__all__ = ["CalibratedCounter", "HeuristicCounter", "TokenCounter", "TokenizerCounter",
           "build_counter"]

_CJK = ("\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
        "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef")
# one match per token: a CJK character, up to six letters, up to three digits, up to two
# symbols (greedy, so a run of n letters gives ceil(n / 6) matches); ASCII text (the common
# case, and JSON schemas) takes a simpler, faster pattern with the same result
_TOKENS = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}]{{1,6}}|\d{{1,3}}|(?:[^\w\s{_CJK}]|_){{1,2}}")
_ASCII_TOKENS = re.compile(r"[A-Za-z]{1,6}|[0-9]{1,3}|[^\sA-Za-z0-9]{1,2}")
_CACHE_MAX_CHARS = 4000

# The ASCII rule by run lengths, for longer texts (JSON outputs, prompts; about twice as fast
# as the regex there): each character mapped to its class (letter, digit, space, symbol),
# a run of n characters of a class with at most k per token is ceil(n / k) tokens, that is
# the k-long chunks in it, plus 1 if some is left over (counted by where runs start).
_LETTER, _DIGIT, _SPACE, _SYMBOL = b"a", b"0", b" ", b"."
_CLASSES = b"".join(
    _LETTER if re.fullmatch("[A-Za-z]", c) else _DIGIT if re.fullmatch("[0-9]", c)
    else _SPACE if re.fullmatch(r"\s", c) else _SYMBOL for c in map(chr, range(128))
) + _SYMBOL * 128
_RUNS = ((_LETTER, 6), (_DIGIT, 3), (_SYMBOL, 2))
_RUN_RULE_FROM = 128  # characters; shorter texts take the regex (faster for them)
_CACHE_SIZE = 4096


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a model would see for a piece of text."""

    name: str

    def count(self, text: str) -> int:
        """How many tokens ``text`` is."""
        ...


class HeuristicCounter:
    """The offline default (see the module docs for the rule). Short texts are cached:
    system prompts, tool catalogs and history messages repeat turn after turn."""

    name = "heuristic"

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens of ``text`` by the heuristic."""
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        if not text.isascii():
            total = len(_TOKENS.findall(text))
        elif len(text) < _RUN_RULE_FROM:
            total = len(_ASCII_TOKENS.findall(text))
        else:
            total = _count_runs(text)
        if len(text) <= _CACHE_MAX_CHARS:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[text] = total
        return total


def _count_runs(text: str) -> int:
    """``len(_ASCII_TOKENS.findall(text))`` for an ASCII text, by run lengths (see above)."""
    classes = _SPACE + text.encode("ascii").translate(_CLASSES)  # a space before the start
    total = 0
    for kind, most in _RUNS:
        chunk = kind * most
        whole = classes.count(chunk)
        rest = classes.replace(chunk, b"") if whole else classes
        total += whole
        for other in (_LETTER, _DIGIT, _SPACE, _SYMBOL):
            if other != kind:
                total += rest.count(other + kind)  # runs with a shorter chunk left
    return total


class CalibratedCounter:
    """A base counter scaled by what a server says prompts really cost.

    Args:
        base: the estimate to scale (default: the heuristic).
        weight: how much each observation moves the ratio (0..1).

    >>> counter = CalibratedCounter()
    >>> counter.observe(estimated=100, actual=80)
    >>> round(counter.ratio, 2), counter.count("word " * 10)
    (0.95, 10)
    """

    def __init__(self, base: TokenCounter | None = None, weight: float = 0.25) -> None:
        self.base = base if base is not None else HeuristicCounter()
        self.name = f"calibrated:{self.base.name}"
        self.weight = weight
        self.ratio = 1.0

    def count(self, text: str) -> int:
        """The base count times the learnt ratio (rounded up)."""
        raw = self.base.count(text)
        return raw if self.ratio == 1.0 else math.ceil(raw * self.ratio)

    def observe(self, estimated: int, actual: int) -> None:
        """Learn from one request: we estimated ``estimated`` (with the base counter), the
        server counted ``actual`` prompt tokens."""
        if estimated <= 0 or actual <= 0:
            return
        seen = min(2.0, max(0.5, actual / estimated))
        self.ratio = min(2.0, max(0.5, self.ratio + self.weight * (seen - self.ratio)))


class TokenizerCounter:
    """Exact counts from a Hugging Face ``tokenizer.json`` on disk (package ``tokenizers``).

    Raises:
        ConfigError: the package is missing or the file cannot be loaded.
    """

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigError("context.tokenizer names a tokenizer file, which needs the "
                              "'tokenizers' package: pip install tokenizers (or use "
                              "tokenizer: heuristic)") from None
        try:
            self._tokenizer: Any = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises its own Exception types
            raise ConfigError(f"context.tokenizer: cannot load {path} ({exc}); point it at a "
                              "Hugging Face tokenizer.json, or use tokenizer: heuristic") from None
        self._tokenizer.no_padding()  # count the text, not a padded or cut batch row
        self._tokenizer.no_truncation()
        self.name = f"tokenizer:{Path(path).name}"

    def count(self, text: str) -> int:
        """Tokens of ``text`` by the tokenizer (no special tokens)."""
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def build_counter(spec: str, brain: Any = None) -> TokenCounter:
    """The counter a ``context.tokenizer`` setting names.

    ``auto``: calibrated by server usage for a brain that reports it (the
    OpenAI-compatible brain), else the heuristic; ``heuristic``; ``calibrated``; or the
    path of a ``tokenizer.json``.

    Raises:
        ConfigError: a tokenizer file that cannot be used.
    """
    if spec == "heuristic":
        return HeuristicCounter()
    if spec == "calibrated":
        return CalibratedCounter()
    if spec == "auto":
        reports_usage = getattr(brain, "reports_usage", None)
        if reports_usage is None:  # the OpenAI-compatible brain returns usage.prompt_tokens
            reports_usage = str(getattr(brain, "name", "")).startswith("openai:")
        return CalibratedCounter() if reports_usage else HeuristicCounter()
    return TokenizerCounter(Path(spec).expanduser())
