"""The 40 fixed turns of ``bench/real_model.py`` and how their answers are scored.

Each turn's expected facts come from the demo data (``hermes_fsm/data/retail.yaml``, the
copy of the shared demo domain): a stock question expects that warehouse's units, and no
other warehouse's figure for the product; a zero stock may also be said in words ("out of
stock", "缺货"). Scoring is strict about tokens: a number matches a whole number in the
answer (an expected ``0`` does not match ``980``, ``342`` does not match the ``1001`` of
``A1001``), an ASCII word matches whole words ("ali" is not in "totally"), and a Chinese
phrase matches as written. Small talk expects any readable answer.

>>> correct("B2002 has 0 units in the East China warehouse.", stock("B2002", "east"))
True
>>> correct("B2001: 980 units in North China.", stock("B2002", "east"))
False
>>> numbers("A1001 在华东仓还有342件, 共 1,500 件")
[342, 1500]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hermes_fsm.demo.retail import RetailData

__all__ = ["TURNS", "Expect", "Turn", "correct", "numbers", "stock", "total", "words"]

Token = int | str
"""A number (matched as a whole number) or a phrase (ASCII words whole, CJK as written)."""


@dataclass(frozen=True)
class Expect:
    """What a correct answer says: all tokens of one of ``any_of`` (none: any readable
    answer), and none of the numbers in ``forbid``."""

    any_of: tuple[tuple[Token, ...], ...] = ()
    forbid: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Turn:
    text: str
    expect: Expect


_ZERO_WORDS = ("out of stock", "none left", "no stock", "no units", "not in stock",
               "sold out", "缺货", "无货", "没货", "没有货", "没有库存", "售罄")


def stock(sku: str, warehouse: str, data: RetailData | None = None) -> Expect:
    """A warehouse stock question: its units (a zero also in words), no other figure of
    the product."""
    units = (data or RetailData.default()).doc["warehouse_stock"][sku]
    wanted = int(units[warehouse])
    others = frozenset(int(n) for w, n in units.items() if w != warehouse) - {wanted}
    if wanted == 0:
        return Expect(((0,), *((w,) for w in _ZERO_WORDS)), others)
    return Expect(((wanted,),), others)


def total(sku: str, data: RetailData | None = None) -> Expect:
    """A product's stock over all warehouses: the sum, or every warehouse's figure."""
    units = [int(n) for n in (data or RetailData.default()).doc["warehouse_stock"][sku].values()]
    return Expect(((sum(units),), tuple(units)))


def words(*alternatives: str | tuple[str, ...]) -> Expect:
    """One of ``alternatives`` (a phrase, or a tuple of phrases that must all appear)."""
    return Expect(tuple((a,) if isinstance(a, str) else a for a in alternatives))


ANY = Expect()

TURNS: list[Turn] = [
    Turn("How many A1001 are left in the east warehouse?", stock("A1001", "east")),
    Turn("SKU A1001 在华东仓还有多少库存?", stock("A1001", "east")),
    Turn("How many A1002 are in the south warehouse?", stock("A1002", "south")),
    Turn("A1002 在华南仓有多少?", stock("A1002", "south")),
    Turn("How many B2001 are left in the north warehouse?", stock("B2001", "north")),
    Turn("B2001 在华北仓还有多少件?", stock("B2001", "north")),
    Turn("Do we still have B2002 in the east warehouse?", stock("B2002", "east")),
    Turn("B2002 在华东仓有货吗?", stock("B2002", "east")),
    Turn("How many C3001 are left in the west warehouse?", stock("C3001", "west")),
    Turn("C3001 在西南仓还有多少?", stock("C3001", "west")),
    Turn("How many A1001 are left in the east?", stock("A1001", "east")),
    Turn("What is the stock of A1001?", total("A1001")),
    Turn("A1001 一共有多少库存?", total("A1001")),
    Turn("How many C3001 are in the north warehouse?", stock("C3001", "north")),
    Turn("C3001 在华北仓有多少?", stock("C3001", "north")),
    Turn("Remind me tomorrow at 9 to call Bob.", words("bob")),
    Turn("提醒我明天上午十点给李雷打电话", words("李雷")),
    # "on Friday" has no time: set for Friday, or asked when on Friday (never guessed)
    Turn("Remind me to order more B2002 on Friday.", words("friday")),
    Turn("What are my reminders?", words(("bob", "李雷"))),
    Turn("我有哪些提醒?", words(("bob", "李雷"))),
    Turn("I prefer short answers.", words("short")),
    Turn("我喜欢用邮件联系", words("邮件", "email", "e-mail")),
    Turn("Please contact me by email.", words("email", "e-mail")),
    Turn("Call me Ali.", words("ali")),
    Turn("请用中文回答我", words("中文", "chinese")),
    Turn("hello!", ANY),
    Turn("你好", ANY),
    Turn("Thanks, that is all.", ANY),
    Turn("谢谢你的帮助", ANY),
    Turn("What can you do?", ANY),
    Turn("How many A1002 are left in the east warehouse?", stock("A1002", "east")),
    Turn("A1002 在华东仓还有多少库存?", stock("A1002", "east")),
    Turn("How many B2001 are in the west warehouse?", stock("B2001", "west")),
    Turn("B2001 在西南仓有多少?", stock("B2001", "west")),
    Turn("How many B2002 are in the south warehouse?", stock("B2002", "south")),
    Turn("B2002 在华南仓有多少?", stock("B2002", "south")),
    Turn("How many A1001 are left in the west warehouse?", stock("A1001", "west")),
    Turn("A1001 在西南仓还有多少?", stock("A1001", "west")),
    Turn("Is there any C3001 in the south warehouse?", stock("C3001", "south")),
    Turn("C3001 在华南仓有多少?", stock("C3001", "south")),
]

# A number not inside a word or code: "342" in "有342件" (CJK around it is fine), not the
# "1001" of "A1001", the "2" of "v2" or the "5" of "1.5"; "1,500" is 1500.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.,])(?<![A-Za-z0-9]-)(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
                     r"(?![A-Za-z0-9_])")


def numbers(text: str) -> list[int]:
    """The whole numbers written in ``text`` (the integer part of a decimal)."""
    return [int(m.group(1).replace(",", "")) for m in _NUMBER.finditer(text)]


def _has_phrase(text: str, phrase: str) -> bool:
    lowered, phrase = text.lower(), phrase.lower()
    if not phrase.isascii():
        return phrase in lowered
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", lowered) is not None


def _has(text: str, token: Token, found: list[int]) -> bool:
    return token in found if isinstance(token, int) else _has_phrase(text, token)


def correct(answer: str, expect: Expect) -> bool:
    """Whether ``answer`` says what ``expect`` asks: readable, every token of one
    alternative, no forbidden number."""
    if not answer.strip():
        return False
    found = numbers(answer)
    if any(n in expect.forbid for n in found):
        return False
    if not expect.any_of:
        return True
    return any(all(_has(answer, t, found) for t in option) for option in expect.any_of)
