"""The configuration's secrets, registered with the one redaction policy
(:mod:`hermes_fsm._internal.redact`) when a configuration is loaded or built from.

Registered: the password and secret query values of every URL (``memory.redis_url``,
``postgres_url``, ``qdrant_url``, ``brain.base_url``, ``memory.embedder.url``, each MCP
server's ``url``); the API keys read from ``brain.api_key_env`` and (an ``openai``
embedder's) ``memory.embedder.api_key_env``; the server's bearer tokens; every MCP
server's ``headers`` values (and the credential of an ``Authorization``-style value);
the values of MCP servers' ``env`` whose names look secret (``*TOKEN*``, ``*KEY*``,
``*SECRET*``, ``*PASSWORD*`` …). From then on no error message, event, log line,
recording or stored row that passes through the policy shows them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from hermes_fsm._internal.redact import register_secret, register_url

__all__ = ["register_config_secrets"]

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|PWD|AUTH|CREDENTIAL|COOKIE|SESSION",
                          re.IGNORECASE)


def register_config_secrets(config: Any, environ: Mapping[str, str] | None = None) -> None:
    """Register every secret of ``config`` (a :class:`~hermes_fsm.config.settings.
    HermesConfig`); ``environ`` (default ``os.environ``) holds the API keys it names."""
    env = os.environ if environ is None else environ
    memory = config.memory
    for url in (memory.redis_url, memory.postgres_url, memory.qdrant_url,
                config.brain.base_url, memory.embedder.url, config.bus.url):
        register_url(url)
    if config.brain.api_key_env:
        register_secret(env.get(config.brain.api_key_env))
    if memory.embedder.kind == "openai":
        register_secret(env.get(memory.embedder.api_key_env))
    for token in config.server.tokens:
        register_secret(token)
    for server in config.mcp_servers.values():
        register_url(server.url)
        for value in server.headers.values():
            register_secret(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():  # "Bearer …", "Basic …", "token …"
                register_secret(credential.strip())
        for name, value in server.env.items():
            if _SECRET_NAME.search(name):
                register_secret(value)
