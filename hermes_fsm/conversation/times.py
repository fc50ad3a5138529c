"""Exact times: every time expression becomes an ISO 8601 value before a tool sees it.

Seed 001 §6.3, the iron rule: "明天", "下周一", "tomorrow at 3pm" never reach a tool as text.
:class:`TimeResolver` turns an expression into an :class:`ExactTime` — an instant with the
configured timezone's offset (``2026-12-02T10:00:00+08:00``), a day, or a span of days
(``上个月``, ``Q3``: first and last day) — relative to a base time (the turn's, from the
injectable clock). What it cannot pin down raises :class:`UnclearTime`: the caller asks the
user, it never guesses.

Parsers: English through `dateparser` (its relative dates and times of day), Chinese
through `jionlp-time` (the time parser of JioNLP as a dependency-free package), imported
only when an expression has Chinese in it; calendar spans (this/last/next week, month,
quarter, year, ``Q3``, ``第三季度``) are computed here, because both parsers answer them with
one instant.

>>> from datetime import datetime, UTC
>>> resolver = TimeResolver("Asia/Shanghai")
>>> base = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)          # 10:00 in Shanghai
>>> resolver.resolve("明天上午十点", base=base).iso()
'2026-12-02T10:00:00+08:00'
>>> resolver.resolve("tomorrow at 3pm", base=base).iso()
'2026-12-02T15:00:00+08:00'
>>> q3 = resolver.resolve("Q3", base=base)
>>> q3.grain, q3.first_day(), q3.last_day()
('span', '2026-07-01', '2026-09-30')
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hermes_fsm.errors import ConfigError, HermesError
from hermes_fsm.sources import Clock, SystemClock

__all__ = ["ExactTime", "Grain", "TimeResolver", "UnclearTime", "local_zone", "zone_of"]

Grain = Literal["minute", "day", "span"]
"""How exact a time is: an instant (to the minute), one whole day, or a span of days."""


class UnclearTime(HermesError):
    """A time expression that cannot be made exact; ask the user for a date and time."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(f"cannot make {text!r} an exact time: {why}; ask the user for a "
                         "date and time (e.g. 2026-12-02 15:00)")
        self.text = text
        self.why = why


@dataclass(frozen=True, slots=True)
class ExactTime:
    """An exact time: ``start`` (aware, in the resolver's zone) and its ``grain``.

    For ``day`` and ``span`` grains, ``end`` is the last day's start (inclusive span).
    """

    text: str
    start: datetime
    end: datetime
    grain: Grain

    def iso(self) -> str:
        """The instant as ISO 8601 with the offset (``2026-12-02T10:00:00+08:00``)."""
        return self.start.isoformat(timespec="seconds")

    def first_day(self) -> str:
        """The first day, ISO (``2026-07-01``)."""
        return self.start.date().isoformat()

    def last_day(self) -> str:
        """The last day, ISO (``2026-09-30``)."""
        return self.end.date().isoformat()

    def slots(self, name: str) -> dict[str, str]:
        """What the time fills in an intent: ``name`` (the ISO instant, or the day), and
        ``name_date``, ``name_start``, ``name_end`` (days, ISO)."""
        value = self.iso() if self.grain == "minute" else self.first_day()
        found = {name: value, f"{name}_date": self.first_day(),
                 f"{name}_start": self.first_day(), f"{name}_end": self.last_day()}
        if self.grain == "span":
            del found[name]  # a span is no single value
        return found


def zone_of(name: str | tzinfo | None) -> tzinfo:
    """The timezone ``name`` names (IANA, e.g. ``Asia/Shanghai``); the machine's local zone
    for ``None``.

    Raises:
        ConfigError: ``name`` is not a known IANA zone.
    """
    if name is None:
        return local_zone()
    if isinstance(name, tzinfo):
        return name
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"timezone {name!r} is not a known IANA zone; use a name like "
                          "'Asia/Shanghai' or 'UTC', or leave `timezone` out for the "
                          "machine's local zone") from None


def local_zone() -> tzinfo:
    """The machine's local zone: its IANA name when it can be found (``TZ``,
    ``/etc/localtime``, through `tzlocal`), else its current fixed offset."""
    try:
        import tzlocal  # a dependency of dateparser

        name = tzlocal.get_localzone_name()
        if name:
            return ZoneInfo(name)
    except Exception:  # no name to be had: the offset is still right for now
        pass
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


_CJK = re.compile(r"[\u3400-\u9fff]")
_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "1": 1, "2": 2, "3": 3, "4": 4}
_QUARTER = re.compile(r"(?i)(?<![a-z0-9])(?:q|quarter\s*)([1-4])(?![0-9])|第?([一二三四1-4])季度|"
                      r"\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter\b")
_ORDINAL = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3,
            "fourth": 4, "4th": 4}
_RELATIVE_SPAN = re.compile(
    r"(?i)\b(?P<en>last|this|next|previous|current)\s+(?P<unit>week|month|quarter|year)\b|"
    r"(?P<zh>上个?|这个?|本|下个?|今|去|明)(?P<zunit>周|星期|月|季度|年)(?!\d|[一二三四五六日天])")
_EN_TIME_OF_DAY = re.compile(
    r"(?i)\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b|"
    r"\bmidnight\b|\bin\s+(?:an?|\w+|\d+)\s+(?:hours?|minutes?|mins?)\b|"
    r"\b(?:hours?|minutes?)\s+(?:from now|later)\b|\btonight\b|\bnow\b")
_BARE_HOUR = re.compile(r"(?i)\b(at|by)\s+(\d{1,2})\b(?!\s*(?::|am|pm|a\.m|p\.m|o'clock))")
_ZH_TIME_OF_DAY = re.compile(r"[点時时:：]|分钟|小时|钟头")
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
               "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3}
_AGO = re.compile(
    r"(?i)^(?P<en>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few)"
    r"\s+(?P<unit>day|week|month|year)s?\s+ago$|"
    r"^(?P<zh>\d+|[零一二两三四五六七八九十]+)\s*(?:个)?(?P<zunit>天|日|周|星期|礼拜|月|年)(?:以前|之前|前)$")
_ZH_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week",
             "月": "month", "年": "year"}
_ZH_UNCLEAR = re.compile(
    r"^(?:早上|上午|中午|下午|晚上|傍晚|凌晨|以后|之后|稍后|晚点|待会儿?|回头|改天|有空)$")


class TimeResolver:
    """Makes time expressions exact in one timezone, relative to a base time.

    Args:
        timezone: an IANA zone name or a ``tzinfo`` (``None``: the machine's local zone).
        clock: the base time when :meth:`resolve` gets none (default: the wall clock).
    """

    def __init__(self, timezone: str | tzinfo | None = None, clock: Clock | None = None
                 ) -> None:
        self.zone = zone_of(timezone)
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._zh: Any = None
        self._en: Any = None

    def now(self, base: datetime | None = None) -> datetime:
        """The base time in this resolver's zone (``base``, else the clock's now)."""
        moment = base if base is not None else self.clock.now()
        if moment.tzinfo is None:
            raise ValueError("a base time must be aware (give it tzinfo=UTC)")
        return moment.astimezone(self.zone)

    def today(self, base: datetime | None = None) -> date:
        """The base time's date in this zone."""
        return self.now(base).date()

    def resolve(self, text: str, *, base: datetime | None = None) -> ExactTime:
        """``text`` as an exact time relative to ``base`` (default: the clock's now).

        Raises:
            UnclearTime: the expression names no exact time (e.g. "later", "下午" alone).
        """
        expression = text.strip().strip("。,.，!！?？")
        if not expression:
            raise UnclearTime(text, "it is empty")
        now = self.now(base)
        ago = self._ago(expression, now)
        if ago is not None:
            return ago
        span = self._span(expression, now)
        if span is not None:
            return span
        if _CJK.search(expression):
            return self._chinese(text, expression, now)
        return self._english(text, expression, now)

    def reference_day(self, text: str, *, base: datetime | None = None) -> ExactTime:
        """The day a comparison with ``text`` means: "上个月" / "last month" / "上周" is the
        same day one month (week, quarter, year) before today — "比上个月涨了吗" compares
        with the price a month ago — and any other expression its (first) day.

        >>> from datetime import datetime, UTC
        >>> TimeResolver("UTC").reference_day("上个月", base=datetime(2026, 12, 15,
        ...                                   tzinfo=UTC)).first_day()
        '2026-11-15'

        Raises:
            UnclearTime: as :meth:`resolve`.
        """
        expression = text.strip().strip("。,.，!！?？")
        now = self.now(base)
        match = _RELATIVE_SPAN.search(expression)
        if match is not None and len(match[0]) >= len(expression) - 2:
            step, unit = _step_unit(match)
            if step == -1:
                today = now.date()
                if unit in ("week", "周", "星期"):
                    day = today - timedelta(weeks=1)
                else:
                    months = {"month": 1, "月": 1, "quarter": 3, "季度": 3}.get(unit, 12)
                    day = _add_months(today.replace(day=1), -months)
                    day = day.replace(day=min(today.day, _month_days(day)))
                return self._days(text, day, day)
        found = self.resolve(text, base=base)
        return self._days(text, found.start.date(), found.start.date())

    # --- "a month ago", "一个月前": the same day that long before today ----------------

    def _ago(self, expression: str, now: datetime) -> ExactTime | None:
        """``expression`` as the day it counts back to ("a month ago", "两周前"), or ``None``
        when it is not such an expression (both parsers read "a month ago" as a month)."""
        match = _AGO.match(expression)
        if match is None:
            return None
        if match["en"] is not None:
            n, unit = _EN_NUMBERS.get(match["en"].lower()) or int(match["en"]), \
                match["unit"].lower()
        else:
            n, unit = _zh_number(match["zh"]), _ZH_UNITS[match["zunit"]]
        today = now.date()
        if unit in ("day", "week"):
            day = today - timedelta(days=n * (7 if unit == "week" else 1))
        else:
            first = _add_months(today.replace(day=1), -n * (12 if unit == "year" else 1))
            day = first.replace(day=min(today.day, _month_days(first)))
        return self._days(expression, day, day)

    # --- calendar spans ---------------------------------------------------------------

    def _span(self, expression: str, now: datetime) -> ExactTime | None:
        quarter = _QUARTER.search(expression)
        if quarter is not None:
            n = _DIGITS.get(quarter[1] or quarter[2] or "") or _ORDINAL.get(
                (quarter[3] or "").lower(), 0)
            year = now.year
            if re.search(r"去年|last year", expression, re.IGNORECASE):
                year -= 1
            elif re.search(r"明年|next year", expression, re.IGNORECASE):
                year += 1
            first = date(year, 3 * n - 2, 1)
            return self._days(expression, first, _add_months(first, 3) - timedelta(days=1))
        match = _RELATIVE_SPAN.search(expression)
        if match is None or len(match[0]) < len(expression) - 2:  # "下周一" is a day
            return None
        step, unit = _step_unit(match)
        today = now.date()
        if unit in ("week", "周", "星期"):
            first = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            return self._days(expression, first, first + timedelta(days=6))
        if unit in ("month", "月"):
            first = _add_months(today.replace(day=1), step)
            return self._days(expression, first, _add_months(first, 1) - timedelta(days=1))
        if unit in ("quarter", "季度"):
            first = _add_months(date(today.year, 3 * ((today.month - 1) // 3) + 1, 1), 3 * step)
            return self._days(expression, first, _add_months(first, 3) - timedelta(days=1))
        first = date(today.year + step, 1, 1)
        return self._days(expression, first, date(first.year, 12, 31))

    def _days(self, text: str, first: date, last: date) -> ExactTime:
        start = datetime(first.year, first.month, first.day, tzinfo=self.zone)
        end = datetime(last.year, last.month, last.day, tzinfo=self.zone)
        return ExactTime(text, start, end, "day" if first == last else "span")

    # --- Chinese: jionlp-time ------------------------------------------------------------

    def _chinese(self, text: str, expression: str, now: datetime) -> ExactTime:
        if _ZH_UNCLEAR.match(expression):
            raise UnclearTime(text, "it names a part of the day, not a time")
        parse = self._zh_parser()
        local = now.replace(tzinfo=None)
        with self._lock:  # the parser keeps its time base on itself
            try:
                found = parse(expression, time_base={
                    "year": local.year, "month": local.month, "day": local.day,
                    "hour": local.hour, "minute": local.minute, "second": local.second})
            except Exception as exc:  # it raises ValueError and worse on what it can't read
                raise UnclearTime(text, f"the Chinese time parser could not read it "
                                        f"({type(exc).__name__})") from None
        if not isinstance(found, dict) or found.get("type") not in ("time_point", "time_span"):
            raise UnclearTime(text, "it is not a point or span of time (a repeating time?)")
        times = found.get("time") or []
        if len(times) != 2 or "inf" in str(times):
            raise UnclearTime(text, "it has no definite start and end")
        first, last = (datetime.fromisoformat(str(t)) for t in times)
        if _ZH_TIME_OF_DAY.search(expression) and last - first < timedelta(hours=2):
            return self._instant(text, first)
        if first.time() == datetime.min.time() and last - first < timedelta(days=1):
            return self._days(text, first.date(), first.date())
        if last - first >= timedelta(days=1) and first.time() == datetime.min.time():
            return self._days(text, first.date(), last.date())
        raise UnclearTime(text, f"it spans {first:%H:%M}–{last:%H:%M}, not one time")

    def _zh_parser(self) -> Callable[..., Any]:
        if self._zh is None:
            try:
                from jionlp_time import TimeParser
            except ImportError:  # pragma: no cover - a declared dependency
                raise UnclearTime("", "the Chinese time parser (jionlp-time) is not "
                                      "installed; pip install jionlp-time") from None
            self._zh = TimeParser()
        return self._zh  # type: ignore[no-any-return]

    # --- English: dateparser -------------------------------------------------------------

    def _english(self, text: str, expression: str, now: datetime) -> ExactTime:
        local = now.replace(tzinfo=None, microsecond=0)
        wording = _BARE_HOUR.sub(lambda m: f"{m[1]} {m[2]}:00", expression)
        found = self._en_parser(local).get_date_data(wording)
        moment = found.date_obj
        if moment is None:
            raise UnclearTime(text, "no date or time in it could be read")
        moment = moment.replace(tzinfo=None)
        if found.period in ("week", "month", "year"):
            raise UnclearTime(text, f"it names a {found.period}, not a day or a time")
        if _EN_TIME_OF_DAY.search(wording):
            return self._instant(text, moment)
        return self._days(text, moment.date(), moment.date())

    def _en_parser(self, local: datetime) -> Any:
        from dateparser.date import DateDataParser

        return DateDataParser(languages=["en"], settings={
            "RELATIVE_BASE": local, "PREFER_DATES_FROM": "future",
            "RETURN_AS_TIMEZONE_AWARE": False})

    def _instant(self, text: str, local: datetime) -> ExactTime:
        moment = local.replace(second=0, microsecond=0, tzinfo=self.zone)
        return ExactTime(text, moment, moment, "minute")


def _step_unit(match: re.Match[str]) -> tuple[int, str]:
    """(-1 last, 0 this, 1 next; the unit) of a relative span."""
    word = (match["en"] or match["zh"]).lower()
    unit = (match["unit"] or match["zunit"]).lower()
    step = -1 if word in ("last", "previous", "上", "上个", "去") else \
        1 if word in ("next", "下", "下个", "明") else 0
    return step, unit


def _zh_number(text: str) -> int:
    """A Chinese (or Arabic) number up to 99: "一" 1, "两" 2, "十二" 12, "二十" 20."""
    if text.isdigit():
        return int(text)
    digits = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (digits.get(tens, 1) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    return digits.get(text, 0) or 1


def _month_days(first: date) -> int:
    return (_add_months(first.replace(day=1), 1) - timedelta(days=1)).day


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return day.replace(year=index // 12, month=index % 12 + 1)
