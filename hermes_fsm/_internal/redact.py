"""One redaction policy for every text hermes-fsm writes: events, logs, recordings, the
session store, error messages.

What is masked (as ``***``):

- the password of every URL (``redis://user:pw@host`` → ``redis://user:***@host``) and
  the values of its secret-looking query parameters (``password``, ``token``, ``key``,
  ``secret``, ``sig``, … : ``?api_key=…`` → ``?api_key=***``);
- bearer credentials (``Bearer sk-…`` → ``Bearer ***``);
- every secret value registered with :func:`register_secret` or :func:`register_url`,
  wherever it appears (also percent-encoded or JSON-escaped): API keys, server bearer
  tokens, MCP server headers, URL passwords. The configuration registers them when it
  is loaded (:mod:`hermes_fsm.config`); the parts that take a secret themselves (the
  OpenAI brain's key, a Redis URL) register it too, so that a part built without a
  configuration file is covered.

It is applied where errors are made: the messages of errors that may carry a URL or a
server's answer, and the places that turn an exception into an event (``handler_failed``,
``memory_commit_failed``, ``memory_recalled``, a tool's error envelope) or a log line.
An event, a log line, a recording or a stored row written from those texts holds no
secret.

Values shorter than :data:`MIN_SECRET_CHARS` are not registered (masking ``abc``
everywhere would garble text; such a value is no secret anyway).

>>> register_secret("sk-test-0123456789")
>>> redact("401: bad key sk-test-0123456789 for redis://:hunter2@cache:6379/0?token=abc")
'401: bad key *** for redis://:***@cache:6379/0?token=***'
>>> redact_url("postgresql://app:s3cret@db/app")
'postgresql://app:***@db/app'
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, unquote, urlsplit

__all__ = ["MASK", "MIN_SECRET_CHARS", "redact", "redact_url", "register_all",
           "register_secret", "register_url", "registered"]

MASK = "***"
MIN_SECRET_CHARS = 4

_SECRET_PARAMS = (r"password|passwd|pwd|pass|token|access_token|refresh_token|id_token|"
                  r"api[_-]?key|apikey|key|secret|client_secret|sig|signature|auth|"
                  r"authorization|credentials?|session_token|x-amz-security-token|"
                  r"x-amz-signature")
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@?#]*):"
                       r"(?P<password>[^\s/?#]*)@")
_QUERY = re.compile(rf"(?P<head>[?&;](?:{_SECRET_PARAMS})=)(?P<value>[^&;#\s\"']+)",
                    re.IGNORECASE)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<value>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE)

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Mask ``value`` (and its percent-encoded and JSON-escaped forms) from now on."""
    global _pattern
    if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_CHARS:
        return
    forms = {value, quote(value, safe=""), json.dumps(value)[1:-1], unquote(value)}
    forms = {f for f in forms if len(f) >= MIN_SECRET_CHARS}
    with _lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        ordered = sorted(_secrets, key=len, reverse=True)  # the longest form wins
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def register_url(url: str | None) -> None:
    """Mask the secrets of ``url``: its password (or a user name standing alone as a
    token, ``https://TOKEN@host``) and its secret-looking query values."""
    if not isinstance(url, str) or "://" not in url:
        return
    try:
        parts = urlsplit(url)
        query = parts.query
        password, username = parts.password, parts.username
    except ValueError:  # a malformed host or port: take the userinfo by hand
        match = _USERINFO.search(url)
        password, username = (match.group("password") if match else None), None
        query = url.partition("?")[2]
    register_secret(password)
    if username and password is None and len(username) >= 16:  # a token as the user name
        register_secret(username)
    for name, value in parse_qsl(query, keep_blank_values=False):
        if re.fullmatch(_SECRET_PARAMS, name, re.IGNORECASE):
            register_secret(value)


def register_all(values: Iterable[str | None]) -> None:
    """:func:`register_secret` of each value."""
    for value in values:
        register_secret(value)


def registered() -> int:
    """How many secret forms are registered (for tests and diagnostics)."""
    return len(_secrets)


def redact(text: str) -> str:
    """``text`` with every URL password, secret query value, bearer credential and
    registered secret masked."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    if "=" in text:
        text = _QUERY.sub(lambda m: f"{m.group('head')}{MASK}", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(lambda m: f"{m.group('head')}{MASK}", text)
    return text


def redact_url(url: str) -> str:
    """A URL to show in messages: its password and secret query values masked."""
    return redact(url)
