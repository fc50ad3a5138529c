"""What a message does to the conversation, read from its words alone (no rule book).

- :func:`reply_kind`: a yes or a no to a pending approval ("yes/确认/好的", "no/取消");
- :func:`parse_followup`: a follow-up that replaces one slot of the last task ("那华南仓呢?",
  "and the Pudong one?", "Pro 呢") or a correction ("不对,我说的是深圳南山区", "等等,是
  iPhone 15 Pro", "no, I meant the south"), with the fragment that names the new value;
- :func:`has_pronoun`: a pronoun or ellipsis that refers back ("它", "那家店", "there",
  "it"), resolved to the most recent active node of the type the slot needs.

>>> reply_kind("好的"), reply_kind("取消吧"), reply_kind("A1001 还有多少")
('yes', 'no', None)
>>> parse_followup("那华南仓呢?")
Followup(kind='followup', fragment='华南仓')
>>> parse_followup("不对,我说的是深圳南山区")
Followup(kind='correction', fragment='深圳南山区')
>>> parse_followup("and the Pudong one?")
Followup(kind='followup', fragment='Pudong')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["PLACE_TYPES", "Followup", "has_place_pronoun", "has_pronoun", "parse_followup",
           "reply_kind"]

_YES = re.compile(
    r"^(?:yes|y|yeah|yep|ok|okay|sure|confirm(?:ed)?|approve[d]?|go ahead|do it|please do|"
    r"send it|确认|确定|好的?|好吧|是的?|可以|行|对|没问题|同意|执行|发吧|发送|批准)"
    r"(?:[,，\s]*(?:please|thanks|谢谢|吧|的|了|啊|呀))*$")
_NO = re.compile(
    r"^(?:no|n|nope|cancel(?:led)?|stop|abort|don'?t|do not|never ?mind|取消|不要|不用了?|算了|"
    r"不行|不|别|否|放弃|不同意)"
    r"(?:[,，\s]*(?:please|thanks|it|that|谢谢|吧|的|了|啊|呀|发|执行))*$")
_STRIP = re.compile(r"^[\s,，.。!！?？~]+|[\s,，.。!！?？~]+$")


def reply_kind(text: str) -> Literal["yes", "no"] | None:
    """``"yes"`` or ``"no"`` when the whole message is an approval or a refusal, else
    ``None`` (anything else is a new message)."""
    low = _STRIP.sub("", text.strip().lower())
    if _YES.match(low):
        return "yes"
    if _NO.match(low):
        return "no"
    return None


@dataclass(frozen=True, slots=True)
class Followup:
    """A message that reuses the last task: ``followup`` (one slot replaced) or
    ``correction`` (the node it names is deprecated and the task redone); ``fragment`` is
    the text naming the new value."""

    kind: Literal["followup", "correction"]
    fragment: str


_CORRECTION = [
    re.compile(r"^(?:不对|不是|错了|搞错了|说错了|等等|等一下|等下|哦不|不)[,，\s。!！]*"
               r"(?:[^,，。]*?[,，]\s*)?(?:我(?:说|问|指|想问)的是|我是说|应该是|改成|换成|是)\s*(?P<x>.+?)$"),
    re.compile(r"^(?:我(?:说|问|指)的是|我是说|应该是|改成|换成)\s*(?P<x>.+?)$"),
    re.compile(r"^(?:不对|不是|错了|搞错了|等等|等一下)[,，\s。!！]+(?P<x>[^,，。]+?)$"),
    re.compile(r"^(?:no|nope|sorry|wait|actually|oops)\b[,\s]*(?:i\s+)?(?:meant|mean|said|"
               r"it'?s|it is|make it|change it to|not that,?)?\s*(?:the\s+)?(?P<x>.+?)$"),
    re.compile(r"^i\s+(?:meant|mean|said)\s+(?:the\s+)?(?P<x>.+?)$"),
]
_FOLLOWUP = [
    re.compile(r"^(?:那|那么|那个|还有|换成|改成)?\s*(?P<x>[^,，。]{1,30}?)\s*(?:呢|怎么样|如何|咋样)$"),
    re.compile(r"^(?:and|what about|how about|and what about|same for|now)\s+"
               r"(?:the\s+|in\s+the\s+|in\s+|for\s+|at\s+)?"
               r"(?P<x>.+?)(?:\s+(?:one|warehouse|store|then))?$"),
]


def parse_followup(text: str) -> Followup | None:
    """The follow-up or correction ``text`` is, or ``None`` (the fragment keeps the
    message's case)."""
    original = _STRIP.sub("", text.strip())
    low = original.lower()
    same = len(low) == len(original)
    for kind, patterns in (("correction", _CORRECTION), ("followup", _FOLLOWUP)):
        for pattern in patterns:
            match = pattern.match(low)
            if match:
                raw = original[match.start("x"):match.end("x")] if same else match["x"]
                fragment = _STRIP.sub("", raw)
                if fragment:
                    return Followup(kind, fragment)  # type: ignore[arg-type]
    return None


_PRONOUN = re.compile(r"(?:它|它们|这个|那个|那家店|这家店|那里|那边|这里|该店|该商品|同一个|"
                      r"\b(?:it|its|there|that one|this one|the same|that store|that product)\b)")


_PLACE = re.compile(r"(?:那里|那边|那儿|那家店|这家店|该店|同一个仓|\b(?:there|that store|"
                    r"that warehouse|the same (?:store|warehouse|place))\b)")
PLACE_TYPES = frozenset({"Warehouse", "Location", "Store"})
"""The entity types a place pronoun ("there", "那里", "那家店") refers to."""


def has_place_pronoun(text: str) -> bool:
    """Whether ``text`` refers back to a place ("there", "那里", "那家店")."""
    return _PLACE.search(text.lower()) is not None


def has_pronoun(text: str) -> bool:
    """Whether ``text`` refers back with a pronoun or a demonstrative."""
    return _PRONOUN.search(text.lower()) is not None
