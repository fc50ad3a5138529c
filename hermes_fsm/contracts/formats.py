"""The string formats tool contracts enforce: ``date-time`` (with its offset) and ``date``.

JSON Schema treats ``format`` as a note unless a checker is asked for; a tool contract's
``format: date-time`` is a promise that the tool gets an exact time (seed 001 §6.3), so the
registry checks it, in both validators (jsonschema's interpreter and fastjsonschema's
compiled check), the same way.

>>> is_date_time("2026-12-02T10:00:00+08:00"), is_date_time("2026-12-02T10:00:00")
(True, False)
>>> is_date_time("tomorrow at 3pm"), is_date("2026-09-30"), is_date("2026-02-30")
(False, True, False)
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import jsonschema

__all__ = ["FAST_FORMATS", "FORMAT_CHECKER", "is_date", "is_date_time"]

_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def is_date_time(value: Any) -> bool:
    """Whether ``value`` is an RFC 3339 date-time with its offset (non-strings pass: the
    schema's ``type`` judges them)."""
    if not isinstance(value, str):
        return True
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


def is_date(value: Any) -> bool:
    """Whether ``value`` is an ISO 8601 calendar date (``2026-09-30``)."""
    if not isinstance(value, str):
        return True
    if not _DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


FORMAT_CHECKER = jsonschema.FormatChecker()
"""jsonschema's format checker with ``date-time`` and ``date`` as tool contracts mean them
(other formats as jsonschema checks them)."""
FORMAT_CHECKER.checkers["date-time"] = (is_date_time, ())
FORMAT_CHECKER.checkers["date"] = (is_date, ())

FAST_FORMATS = {"date-time": is_date_time, "date": is_date}
"""The same checks for ``fastjsonschema.compile(..., formats=FAST_FORMATS)``."""
