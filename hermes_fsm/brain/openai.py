"""A brain backed by any OpenAI-compatible ``/v1/chat/completions`` server.

OpenAI, vLLM, Ollama, llama.cpp's server (and llama-cpp-python's) all speak it. Each
state's request carries the state's contract JSON Schema as the structured-output format
(``response_format: json_schema``); a server that refuses that format gets JSON mode
with the schema (``json_object`` + ``schema``, as llama.cpp's servers take it), then plain
JSON mode (the schema is in the prompt anyway), then no format at all. The engine
validates every output against the contract either way, and a refused output is retried
with the validation errors in the prompt.

- Transport failures (connection errors, timeouts, HTTP 429 and 5xx) are retried here,
  ``max_retries`` times, with exponential backoff that honours ``Retry-After``; then the
  state is retried by the engine (:class:`RetryableError`). Other HTTP errors raise
  :class:`BrainError` (the state takes its failure route).
- When the contract has a string ``text`` field and the request asks for tokens
  (``BrainRequest.on_token``), the completion is streamed and the ``text`` value is handed
  over piece by piece as it arrives (``TokenChunk`` events).
- Token usage (``prompt_tokens``, ``completion_tokens``, ``total_tokens``) is returned in a
  :class:`BrainReply`, so it lands in the ``BrainCall`` event, with where it came from
  (``usage_source``): ``server`` when the server reported it — in the answer, or, streamed,
  in the last chunk, which is asked for with ``stream_options: {"include_usage": true}``
  (OpenAI, vLLM, llama.cpp's ``llama-server``). A server that streams without usage
  (llama-cpp-python's) is asked to count with its own tokenizer (its ``/extras/tokenize/
  count`` or llama.cpp's ``/tokenize`` endpoint): ``tokenizer`` — exact for the answer; for
  the prompt, the text of the messages without the chat template's few wrapper tokens per
  message. With neither, ``completion_tokens`` is the number of streamed content chunks
  (one token each on such servers), no prompt count: ``estimated:stream_chunks``.

>>> brain = OpenAIBrain("http://127.0.0.1:8080/v1", "smollm2")
>>> brain.name, brain.endpoint
('openai:smollm2', 'http://127.0.0.1:8080/v1/chat/completions')
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import tzinfo
from typing import Any, Literal

import httpx

from hermes_fsm._internal.redact import redact, redact_url, register_secret, register_url
from hermes_fsm.brain.grammar_schema import grammar_patterns, grounded_schema, turn_facts
from hermes_fsm.brain.node_schema import bounded_memory_schema, graph_nodes_schema, node_ids
from hermes_fsm.brain.prompt import (
    answer_field,
    chat_messages,
    request_aliases,
    strip_fences,
    summary_messages,
)
from hermes_fsm.brain.protocol import BrainReply, BrainRequest, SummaryRequest
from hermes_fsm.brain.tool_schema import offered_tools_schema
from hermes_fsm.contracts.grounding import figures
from hermes_fsm.conversation.times import zone_of
from hermes_fsm.errors import BrainError, ConfigError, RetryableError

__all__ = ["CONTRACT_MAX_TOKENS", "AnswerTextStream", "OpenAIBrain"]

Format = Literal["json_schema", "json_object_schema", "json_object", "none"]
_FALLBACK: dict[Format, Format] = {"json_schema": "json_object_schema",
                                   "json_object_schema": "json_object", "json_object": "none"}


CONTRACT_MAX_TOKENS: dict[str, int] = {
    "intent": 256, "plan": 512, "result_report": 768, "response": 512, "memory_commit": 384}
"""Token caps of the bundled contracts' answers when neither ``max_tokens`` nor
``contract_max_tokens`` says otherwise (each output fits well within its cap)."""


class OpenAIBrain:
    """Asks an OpenAI-compatible chat-completions server for state outputs.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:8080/v1`` (``/chat/completions`` is appended).
        model: the model name the server knows.
        api_key: sent as a bearer token (``None`` for a local server).
        timeout_s: per HTTP request.
        max_retries: transport retries per call (429, 5xx, connection errors, timeouts).
        structured_output: ``auto`` (JSON Schema, falling back to JSON mode, then to none,
            as the server refuses them), or force ``json_schema``, ``json_object_schema``
            (JSON mode with the schema, which llama-cpp-python's server turns into a
            grammar: no refused first request) or ``json_object``.
        temperature, max_tokens: passed through when set.
        contract_max_tokens: a token cap per contract name (``{"intent": 128}``), over
            :data:`CONTRACT_MAX_TOKENS` and over ``max_tokens``: a small model that
            rambles is cut off instead of running out the state's timeout.
        stream_every_state: stream every request, not only answer text, so a state
            timeout closes the stream and a server that stops on disconnect
            (llama-cpp-python's) stops generating instead of delaying the retry.
        system_role: ``False`` for a model whose chat template has no system role
            (Gemma 3: llama-cpp-python's ``gemma`` format drops system messages): the
            instructions and the schema go at the head of the first user message.
        backoff_s, max_backoff_s: first retry delay (doubled each time, jittered) and cap;
            a ``Retry-After`` header wins (capped at ``max_backoff_s``).
        client: an ``httpx.AsyncClient`` to use (default: one of its own).
        sleep: how backoff waits (tests may pass a recorder).
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 3,
                 structured_output: Literal["auto", "json_schema", "json_object_schema",
                                            "json_object"] = "auto",
                 temperature: float | None = None, max_tokens: int | None = None,
                 contract_max_tokens: Mapping[str, int] | None = None,
                 stream_every_state: bool = False, system_role: bool = True,
                 backoff_s: float = 0.5, max_backoff_s: float = 20.0,
                 client: httpx.AsyncClient | None = None, sleep: Any = None,
                 timezone: str | tzinfo | None = None) -> None:
        self.name = f"openai:{model}"
        self.zone = zone_of(timezone)  # the model is told the turn's time in this zone
        self.base_url = base_url.rstrip("/")
        self.endpoint = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.format: Format = "json_schema" if structured_output == "auto" else structured_output
        self.fallback = structured_output == "auto"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.contract_max_tokens = dict(contract_max_tokens or {})
        self.stream_every_state = stream_every_state
        self.system_role = system_role
        self.format_refusals = 0  # requests the server refused for their format (a probe)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        register_secret(api_key)  # a server echoing it back: never in an error or event
        register_url(base_url)
        self._client = client
        self._own_client = client is None
        self._sleep = sleep or asyncio.sleep
        self.stream_options = True  # off once the server refuses ``stream_options``
        self._counter: _Counter | bool | None = False  # the tokenize endpoint; False: unknown

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str] | None = None, *,
                    timezone: str | tzinfo | None = None) -> OpenAIBrain:
        """The brain a :class:`~hermes_fsm.config.settings.BrainConfig` of ``kind: openai``
        describes.

        Raises:
            ConfigError: ``api_key_env`` names a variable that is not set.
        """
        env = os.environ if environ is None else environ
        key = None
        if config.api_key_env:
            key = env.get(config.api_key_env)
            if not key:
                raise ConfigError(f"brain.api_key_env names {config.api_key_env}, which is not "
                                  "set; export it with the server's API key, or remove "
                                  "api_key_env for a server without keys")
        return cls(config.base_url, config.model, api_key=key, timeout_s=config.timeout_s,
                   max_retries=config.max_retries, structured_output=config.structured_output,
                   temperature=config.temperature, max_tokens=config.max_tokens,
                   contract_max_tokens=config.contract_max_tokens,
                   stream_every_state=config.stream_every_state,
                   system_role=config.system_role, timezone=timezone)

    # --- the Brain protocol ---------------------------------------------------------------

    async def decide(self, request: BrainRequest) -> BrainReply:
        """Ask the server for ``request``'s output; returns the raw text and token usage.

        Raises:
            RetryableError: the server stayed unreachable or overloaded through the retries.
            BrainError: the server refused the request (bad model name, key, payload).
        """
        stream = self.stream_every_state or (
            request.on_token is not None and answer_field(request.schema))
        while True:
            body = self._body(request, stream)
            try:
                if stream:
                    content, usage, chunks = await self._post_stream(body, request)
                else:
                    content, usage = await self._post(body)
                    chunks = 0
            except _FormatRefused:  # found once per brain; configure structured_output
                self.format = _FALLBACK[self.format]  # to skip the probe
                self.format_refusals += 1
                continue
            except _StreamOptionsRefused:
                self.stream_options = False
                continue
            source: str | None = "server" if usage else None
            if stream and not usage:
                usage, source = await self._counted_usage(body, content, chunks)
            output = strip_fences(content)
            aliases = request_aliases(request)
            if aliases is not None:  # the fact ids and values, for the contract's check
                output = aliases.resolve(output)
            return BrainReply(output, usage, usage_source=source)

    async def summarize(self, request: SummaryRequest) -> str:
        """Ask the model to fold ``request.messages`` into the rolling summary.

        The prompt says to keep every stated time and date, open task and constraint, with
        exact numbers and names, within ``request.max_tokens``. The context builder runs
        this under a timeout and falls back to the extractive summarizer when it raises.

        Raises:
            RetryableError, BrainError: as :meth:`decide`; BrainError for an empty answer.
        """
        body: dict[str, Any] = {"model": self.model, "messages": summary_messages(request),
                                "max_tokens": max(16, request.max_tokens)}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        content, _ = await self._post(body)
        text = strip_fences(content).strip()
        if not text:
            raise BrainError(f"{self.endpoint}: the model {self.model!r} answered an empty "
                             "summary")
        return text

    async def check(self) -> dict[str, Any]:
        """Readiness: the server answers ``GET /models`` (and lists the model, if it lists)."""
        response = await self._http().get(f"{self.base_url}/models", headers=self._headers,
                                          timeout=min(self.timeout_s, 5.0))
        if response.status_code != 200:
            return {"ready": False, "error": f"GET /models: HTTP {response.status_code}"}
        names = [m.get("id") for m in response.json().get("data", []) if isinstance(m, dict)]
        return {"ready": True, "base_url": self.base_url, "model": self.model,
                "model_listed": self.model in names}

    async def aclose(self) -> None:
        """Close the HTTP client (if this brain made it)."""
        if self._client is not None and self._own_client:
            await self._client.aclose()
            self._client = None

    # --- HTTP -------------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s)
        return self._client

    def _body(self, request: BrainRequest, stream: bool) -> dict[str, Any]:
        if request.now is not None:  # the turn's time, in the configured zone's offset
            request = replace(request, now=request.now.astimezone(self.zone))
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(
            request, system_role=self.system_role)}
        # a plan's calls narrowed to the offered tools: constrained decoding names no other
        schema = offered_tools_schema(request.schema, request.tools)
        # a memory update's node narrowed to the graph's: it names one that exists, or none
        schema = graph_nodes_schema(schema, node_ids(request.conversation))
        # and bounded: a model that repeats itself closes the JSON before the token cap
        schema = bounded_memory_schema(schema)
        # an answer narrowed to the turn's facts, by alias: it cites them and writes one of
        # their figures, or a placeholder that :meth:`decide` fills with one
        aliases = request_aliases(request)
        facts = [] if aliases is None else [
            (alias, figures(content))
            for alias, (_, content) in zip(aliases.ids, turn_facts(request.outputs), strict=True)]
        grounding: dict[str, Any] = {} if aliases is None else {
            "placeholders": aliases.with_figures(), "also": aliases.shown,
            "listed": aliases.listed,
            "words": [(h, aliases.values[h]) for h in aliases.with_words()]}
        if self.format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.contract_name,
                "schema": grounded_schema(schema, facts, **grounding)}}
        elif self.format == "json_object_schema":  # llama.cpp's and Anyscale's JSON mode
            # its grammar parser takes no regex escapes: patterns in GBNF's classes (or left
            # to the contract's check)
            body["response_format"] = {"type": "json_object", "schema": grounded_schema(
                grammar_patterns(schema), facts, **grounding)}
        elif self.format == "json_object":
            body["response_format"] = {"type": "json_object"}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        cap = self.contract_max_tokens.get(request.contract_name, self.max_tokens)
        if cap is None:
            cap = CONTRACT_MAX_TOKENS.get(request.contract_name)
        if cap is not None:
            body["max_tokens"] = cap
        if stream:
            body["stream"] = True
            if self.stream_options:  # usage in the last chunk (OpenAI, vLLM, llama-server)
                body["stream_options"] = {"include_usage": True}
        return body

    async def _post(self, body: dict[str, Any]) -> tuple[str, dict[str, int]]:
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._http().post(self.endpoint, json=body,
                                                   headers=self._headers)
            except httpx.TransportError as exc:
                await self._transient(attempt, f"{type(exc).__name__}: {exc}", None)
                continue
            self._check_format(response, body)
            if self._should_retry(response):
                await self._transient(attempt, f"HTTP {response.status_code}", response)
                continue
            self._raise_for(response, body)
            data = _json(response)
            return _content(data), _usage(data.get("usage"))
        raise AssertionError("unreachable")  # _transient raises on the last attempt

    async def _post_stream(self, body: dict[str, Any],
                           request: BrainRequest) -> tuple[str, dict[str, int], int]:
        """The streamed answer, the usage the server reported (``{}`` if none) and the
        number of content chunks."""
        on_token = request.on_token if answer_field(request.schema) else None
        aliases = request_aliases(request) if on_token is not None else None
        for attempt in range(self.max_retries + 1):
            answer = AnswerTextStream()
            filler = aliases.stream() if aliases is not None else None
            pieces: list[str] = []
            usage: dict[str, int] = {}
            try:
                async with self._http().stream("POST", self.endpoint, json=body,
                                               headers=self._headers) as response:
                    if response.status_code != 200:
                        await response.aread()
                        self._check_format(response, body)
                        if ("stream_options" in body and response.status_code in (400, 422)
                                and "stream_options" in response.text[:2000]):
                            raise _StreamOptionsRefused
                    if self._should_retry(response):
                        await self._transient(attempt, f"HTTP {response.status_code}",
                                              response)
                        continue
                    self._raise_for(response, body)
                    async for data in _sse_data(response):
                        if data.get("usage"):
                            usage = _usage(data["usage"])
                        for choice in data.get("choices") or ():
                            delta = (choice.get("delta") or {}).get("content") or ""
                            if delta:
                                pieces.append(delta)
                                text = answer.feed(delta) if on_token else ""
                                if text and filler is not None:
                                    text = filler.feed(text)
                                if text and on_token is not None:
                                    on_token(text)
                    rest = filler.flush() if filler is not None else ""
                    if rest and on_token is not None:
                        on_token(rest)
            except httpx.TransportError as exc:
                if pieces:  # half an answer already streamed: let the engine retry the state
                    raise RetryableError(f"{redact_url(self.endpoint)}: the stream broke off: "
                                         f"{redact(str(exc))}") from exc
                await self._transient(attempt, f"{type(exc).__name__}: {exc}", None)
                continue
            return "".join(pieces), usage, len(pieces)
        raise AssertionError("unreachable")

    # --- token usage of a stream without it ------------------------------------------------

    async def _counted_usage(self, body: dict[str, Any], content: str,
                             chunks: int) -> tuple[dict[str, int], str]:
        """Usage of a streamed call whose server reported none: counted with the server's
        tokenizer when it has a tokenize endpoint, else estimated from the chunk count."""
        counter = await self._token_counter()
        if counter is not None:
            prompt_text = "\n".join(str(m.get("content") or "") for m in body["messages"])
            try:
                prompt, completion = await asyncio.gather(counter.count(prompt_text),
                                                          counter.count(content))
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                pass  # the count failed this time: estimate (the endpoint is kept)
            else:
                return {"prompt_tokens": prompt, "completion_tokens": completion,
                        "total_tokens": prompt + completion}, "tokenizer"
        return {"completion_tokens": chunks}, "estimated:stream_chunks"

    async def _token_counter(self) -> _Counter | None:
        """The server's tokenize endpoint (found once): llama-cpp-python's, llama.cpp's, or
        ``None`` when it has neither."""
        if self._counter is not False:
            assert not isinstance(self._counter, bool)
            return self._counter
        root = self.base_url.removesuffix("/v1")
        for counter in (_Counter(self, f"{root}/extras/tokenize/count", "input", "count"),
                        _Counter(self, f"{root}/tokenize", "content", "tokens")):
            try:
                await counter.count("hello")
            except httpx.TransportError:
                return None  # unreachable now: estimate this time, look again next time
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                continue  # not this server's endpoint
            self._counter = counter
            return counter
        self._counter = None
        return None

    @staticmethod
    def _should_retry(response: httpx.Response) -> bool:
        return response.status_code == 429 or response.status_code >= 500

    async def _transient(self, attempt: int, what: str, response: httpx.Response | None) -> None:
        """Wait before the next attempt, or raise when the retries are used up."""
        if attempt >= self.max_retries:
            raise RetryableError(f"{redact_url(self.endpoint)}: {redact(what)} after "
                                 f"{attempt + 1} attempt(s); check that the server is up and "
                                 "not overloaded")
        delay = _retry_after(response) if response is not None else None
        if delay is None:
            delay = self.backoff_s * (2 ** attempt) * (0.5 + random.random())
        await self._sleep(min(delay, self.max_backoff_s))

    def _check_format(self, response: httpx.Response, body: dict[str, Any]) -> None:
        """Raise :class:`_FormatRefused` when the server refused our ``response_format``.

        Servers say so with 400 or 422, and llama-cpp-python with a 500 whose message is the
        validation error: read the message, not only the status.
        """
        if (response.status_code != 200 and self.fallback and self.format != "none"
                and "response_format" in body and _about_format(response.text[:2000])):
            raise _FormatRefused

    def _raise_for(self, response: httpx.Response, body: dict[str, Any]) -> None:
        """Raise for a non-200 answer that retrying will not fix."""
        if response.status_code == 200:
            return
        detail = redact(response.text[:500])  # a body may echo the key it was sent
        raise BrainError(f"{redact_url(self.endpoint)} refused the request for model "
                         f"{self.model!r}: HTTP {response.status_code}: {detail}; check "
                         "base_url, model and the API key")


class AnswerTextStream:
    """Pulls the ``text`` string value out of a JSON object as its pieces stream in.

    >>> stream = AnswerTextStream()
    >>> [stream.feed(p) for p in ['{"te', 'xt": "Hel', 'lo \\\\', 'n wor', 'ld", "evidence": []}']]
    ['', 'Hel', 'lo ', '\\n wor', 'ld']
    """

    def __init__(self, name: str = "text") -> None:
        self._key = json.dumps(name)
        self._raw = ""
        self._start: int | None = None
        self._sent = 0
        self._closed = False

    def feed(self, piece: str) -> str:
        """Add ``piece``; return the answer text that became complete with it."""
        self._raw += piece
        if self._closed:
            return ""
        if self._start is None:
            at = self._raw.find(self._key)
            if at < 0:
                return ""
            rest = self._raw[at + len(self._key):]
            stripped = rest.lstrip()
            if not stripped.startswith(":"):
                return ""
            value = stripped[1:].lstrip()
            if not value.startswith('"'):
                return ""
            self._start = len(self._raw) - len(value) + 1
        segment, closed = _string_prefix(self._raw[self._start:])
        self._closed = closed
        try:  # a raw newline or tab a small model wrote: shown; the contract judges the JSON
            text = json.loads(f'"{segment}"', strict=False)
        except json.JSONDecodeError:  # a bad escape (\x): stop streaming, the answer is
            self._closed = True       # validated whole and retried as a violation
            return ""
        new = text[self._sent:]
        self._sent = len(text)
        return str(new)


def _string_prefix(raw: str) -> tuple[str, bool]:
    """The decodable part of a JSON string body (up to its closing quote, if there)."""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            return raw[:i], True
        if ch == "\\":
            need = 6 if raw[i + 1:i + 2] == "u" else 2
            if i + need > len(raw):
                return raw[:i], False
            i += need
            continue
        i += 1
    return raw, False


class _FormatRefused(Exception):
    """The server refused the response_format; fall back to a simpler one."""


class _StreamOptionsRefused(Exception):
    """The server refused ``stream_options``; stream without it."""


class _Counter:
    """A tokenize endpoint: POST ``{field: text}`` (and the model), read the token count."""

    def __init__(self, brain: OpenAIBrain, url: str, field: str, answer: str) -> None:
        self.brain = brain
        self.url = url
        self.field = field
        self.answer = answer

    async def count(self, text: str) -> int:
        """The number of tokens of ``text``.

        Raises:
            httpx.HTTPError: unreachable, or not a tokenize endpoint (non-2xx).
            ValueError, KeyError, TypeError: an answer without the count.
        """
        brain = self.brain
        response = await brain._http().post(
            self.url, json={self.field: text, "model": brain.model}, headers=brain._headers,
            timeout=min(brain.timeout_s, 10.0))
        response.raise_for_status()
        value = response.json()[self.answer]
        count = len(value) if isinstance(value, list) else value
        if not isinstance(count, int) or isinstance(count, bool):
            raise TypeError(f"{self.url} answered {self.answer}={value!r}, not a count")
        return count


def _about_format(detail: str) -> bool:
    lowered = detail.lower()
    return any(w in lowered for w in ("response_format", "json_schema", "json_object",
                                      "structured", "grammar"))


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise RetryableError(f"{response.request.url}: the answer is not JSON: "
                             f"{response.text[:200]!r}") from exc
    if not isinstance(data, dict):
        raise RetryableError(f"{response.request.url}: the answer is not a JSON object")
    return data


def _content(data: dict[str, Any]) -> str:
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise RetryableError(f"a chat completion without choices[0].message.content: "
                             f"{json.dumps(data)[:300]}") from exc
    return content if isinstance(content, str) else ""


def _usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {k: int(usage[k]) for k in keys if isinstance(usage.get(k), int)}


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), if the server sent one."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # neither seconds nor a date: back off as usual
    return max(0.0, when.timestamp() - time.time())


async def _sse_data(response: httpx.Response) -> Any:
    """The JSON ``data`` of each server-sent event of a streamed completion (to ``[DONE]``)."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise RetryableError(f"a streamed chunk is not JSON: {payload[:200]!r}") from exc
        if isinstance(data, dict):
            yield data
