"""Encryption at rest per memory domain (seed 003 §5): AES-256-GCM (``cryptography``'s AEAD).

An item of a domain that has a key is stored sealed: its value, the statement it came
from, its key and its evidence are one AEAD ciphertext (the item id, user and domain are
the associated data, so a sealed payload moved to another item does not open), and the
payload's ``key`` field — which the store filters on — is an HMAC of the key under the
domain's key, so ``preference.likes.jazz`` is not readable either. What stays in clear is
what the store filters on: user id, domain, status, memory type, times. (The vector is
stored as floats: not plaintext, but it does say something about the meaning.) Without
the domain's key, a sealed item cannot be read: the store skips it.

>>> sealer = Sealer({"wealth": bytes(32)})
>>> payload = {"item_id": "i1", "user_id": "u1", "domain": "wealth", "key": "profile.income",
...            "value": "high", "text": "my income is high", "evidence": "user_message"}
>>> sealed = sealer.seal(payload)
>>> "high" in str(sealed), sealer.open(sealed) == payload
(False, True)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

from hermes_fsm.errors import ConfigError

__all__ = ["SEALED_FIELDS", "Sealer", "keys_from_env"]

SEALED_FIELDS = ("key", "value", "text", "evidence")


def keys_from_env(names: Mapping[str, str], env: Mapping[str, str] | None = None
                  ) -> dict[str, bytes]:
    """Domain → 32-byte key, from environment variables holding base64 (``names``: domain →
    variable). A variable that is unset leaves its domain without a key (its items are
    then unreadable and cannot be written)."""
    env = os.environ if env is None else env
    keys = {}
    for domain, variable in names.items():
        if not env.get(variable):
            continue
        try:
            key = base64.b64decode(env[variable], validate=True)
        except ValueError as exc:
            raise ConfigError(f"{variable} (the key of memory domain {domain!r}) is not "
                              "base64; make one with: python -c 'import os, base64; "
                              "print(base64.b64encode(os.urandom(32)).decode())'") from exc
        if len(key) != 32:
            raise ConfigError(f"{variable} (the key of memory domain {domain!r}) holds "
                              f"{len(key)} bytes; it needs 32 (AES-256)")
        keys[domain] = key
    return keys


class Sealer:
    """Seals and opens item payloads of the domains it has keys for.

    Args:
        keys: domain → 32-byte key.
        sealed_domains: domains whose items must be sealed even when their key is absent
            (a write then fails rather than store plaintext; a read skips them).
    """

    def __init__(self, keys: Mapping[str, bytes],
                 sealed_domains: frozenset[str] = frozenset()) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = {d: AESGCM(k) for d, k in keys.items()}
        self._mac = dict(keys)
        self.domains = frozenset(keys) | sealed_domains

    def sealed(self, domain: str | None) -> bool:
        """Whether items of ``domain`` are stored sealed."""
        return domain is not None and domain in self.domains

    def key_tag(self, domain: str, key: str) -> str:
        """The stored (and filtered-on) form of an item key of a sealed domain."""
        if domain not in self._mac:
            raise ConfigError(f"memory domain {domain!r} is encrypted but its key is absent: "
                              "set its key variable (memory.domain_keys)")
        return "hmac:" + hmac.new(self._mac[domain], key.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _aad(payload: Mapping[str, Any]) -> bytes:
        return json.dumps([payload["item_id"], payload["user_id"], payload["domain"]]).encode()

    def seal(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload with :data:`SEALED_FIELDS` replaced by one ciphertext."""
        domain = payload.get("domain")
        if not self.sealed(domain):
            return payload
        assert domain is not None
        aead = self._aead.get(domain)
        if aead is None:
            raise ConfigError(f"memory domain {domain!r} is encrypted but its key is absent: "
                              "nothing of it is written in clear; set its key variable")
        secret = json.dumps({f: payload.get(f) for f in SEALED_FIELDS}, ensure_ascii=False)
        nonce = os.urandom(12)
        box = aead.encrypt(nonce, secret.encode(), self._aad(payload))
        out = {k: v for k, v in payload.items() if k not in SEALED_FIELDS}
        out["key"] = self.key_tag(domain, str(payload["key"]))
        out["sealed"] = base64.b64encode(nonce + box).decode("ascii")
        return out

    def open(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The payload in clear (``None``: sealed, and its domain's key is absent)."""
        if "sealed" not in payload:
            return payload
        aead = self._aead.get(payload.get("domain") or "")
        if aead is None:
            return None
        raw = base64.b64decode(payload["sealed"])
        secret = json.loads(aead.decrypt(raw[:12], raw[12:], self._aad(payload)))
        out = {k: v for k, v in payload.items() if k != "sealed"}
        out.update(secret)
        return out
