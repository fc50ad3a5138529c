"""The execution bus's messages (seed 003 §4): versioned contracts with committed schemas.

An orchestrator sends :class:`ExecuteRequest`; a worker answers :class:`ExecuteAck` when it
takes the call, then one terminal message: :class:`ExecuteResult` or
:class:`ExecuteError`; the bus itself says :class:`ExecuteTimeout` when no terminal message
came in time. Every message names its ``kind`` (the discriminator) and carries the
``request_id`` it belongs to, so a request id can be followed end to end.

On the wire a message is its JSON (:func:`encode`); :func:`decode` reads one back and
raises :class:`MalformedMessage` (never anything else) for what is not a message of this
version — the caller dead-letters it, it never crashes a worker or an orchestrator.

>>> req = ExecuteRequest(request_id="r1", call_id="c1", idempotency_key="s/c1/a1",
...                      tool_name="add", input_params={"a": 1}, timeout_ms=1000,
...                      sent_at=0.0)
>>> decode(encode(req)) == req
True
>>> decode(b'{"kind": "EXECUTE_RESULT"}')
Traceback (most recent call last):
...
hermes_fsm.tools.bus.messages.MalformedMessage: EXECUTE_RESULT.request_id: Field required
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, ValidationError

from hermes_fsm.contracts.base import Contract, ContractRegistry
from hermes_fsm.errors import HermesError

__all__ = ["BUS_CONTRACTS", "BusMessage", "CallerInfo", "ExecuteAck", "ExecuteError",
           "ExecuteRequest", "ExecuteResult", "ExecuteTimeout", "MalformedMessage",
           "Reply", "RetryInfo", "decode", "encode"]

TOOL_BUDGET_SHARE = 0.6
"""The tool's own budget inside the worker, as a share of the bus timeout (seed 003 §4)."""
ANSWER_GRACE_S = 2.0
"""The answer's deadline is the bus timeout plus this (seed 003 §4)."""


class MalformedMessage(HermesError):
    """What came off the bus is not a message of this protocol version."""


class _Message(Contract):
    contract_version: ClassVar[str] = "1.0.0"

    v: Literal[1] = 1
    """The protocol version; a message of another version is refused (dead-lettered)."""
    request_id: str = Field(min_length=1, max_length=200)


class CallerInfo(Contract):
    """Who asked: the user id with the roles and grants the orchestrator resolved."""

    contract_name: ClassVar[str] = "bus_caller"
    user_id: str
    roles: tuple[str, ...] = ()
    grants: tuple[str, ...] = ()


class RetryInfo(Contract):
    """The call's retry policy as the orchestrator applies it (the worker does not retry:
    a retry is a new request with a new idempotency key), and which attempt this is."""

    contract_name: ClassVar[str] = "bus_retry"
    attempt: int = Field(default=1, ge=1)
    max_attempts: int = Field(default=1, ge=1)


class ExecuteRequest(_Message):
    """Run ``tool_name`` once with ``input_params``.

    ``timeout_ms`` is the bus timeout (what the state allows); the worker gives the tool
    :data:`TOOL_BUDGET_SHARE` of it and starts nothing after ``sent_at`` + timeout +
    :data:`ANSWER_GRACE_S` (the answer's deadline). ``idempotency_key`` is the worker's
    fence in the effects journal: one key, at most one execution of a non-idempotent
    tool. ``reply_to`` names the orchestrator's reply stream. ``trace`` carries a W3C
    trace context (``traceparent``, ``tracestate``) when tracing is on.
    """

    contract_name: ClassVar[str] = "execute_request"
    kind: Literal["EXECUTE_REQUEST"] = "EXECUTE_REQUEST"
    session_id: str | None = None
    turn_id: str | None = None
    call_id: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=1, max_length=500)
    tool_name: str = Field(min_length=1)
    tool_version: str = "1.0.0"
    idempotent: bool = False
    input_params: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int = Field(gt=0, le=3_600_000)
    retry_policy: RetryInfo = RetryInfo()
    caller: CallerInfo = CallerInfo(user_id="anonymous")
    trace: dict[str, str] = Field(default_factory=dict)
    reply_to: str = ""
    sent_at: float
    """Unix time (s) the request was sent."""

    @property
    def tool_budget_s(self) -> float:
        """How long the tool itself may run in the worker (0.6 × the bus timeout)."""
        return self.timeout_ms / 1000 * TOOL_BUDGET_SHARE

    @property
    def deadline(self) -> float:
        """Unix time after which nobody waits for the answer (sent + timeout + 2 s)."""
        return self.sent_at + self.timeout_ms / 1000 + ANSWER_GRACE_S


class ExecuteAck(_Message):
    """A worker took the request and scheduled it."""

    contract_name: ClassVar[str] = "execute_ack"
    kind: Literal["EXECUTE_ACK"] = "EXECUTE_ACK"
    worker_id: str
    scheduled_at: float
    delivery: int = Field(default=1, ge=1)
    """How many times the bus has delivered this request (more than 1: a redelivery)."""


class ExecuteResult(_Message):
    """The tool answered: its output and how long it ran."""

    contract_name: ClassVar[str] = "execute_result"
    kind: Literal["EXECUTE_RESULT"] = "EXECUTE_RESULT"
    output_data: Any = None
    execution_time_ms: float = Field(ge=0.0)
    worker_id: str = ""
    replayed: bool = False
    """The outcome recorded for this idempotency key was returned; nothing ran again."""


class ExecuteError(_Message):
    """The call failed, as a structured error (``error_code`` as the executor knows them)."""

    contract_name: ClassVar[str] = "execute_error"
    kind: Literal["EXECUTE_ERROR"] = "EXECUTE_ERROR"
    error_code: str = Field(min_length=1)
    error_message: str = ""
    retryable: bool = False
    worker_id: str = ""
    replayed: bool = False


class ExecuteTimeout(_Message):
    """No terminal answer within ``timeout_ms`` (the bus says so, not the tool)."""

    contract_name: ClassVar[str] = "execute_timeout"
    kind: Literal["EXECUTE_TIMEOUT"] = "EXECUTE_TIMEOUT"
    timeout_ms: int = Field(gt=0)
    reason: str = ""


BusMessage = Annotated[ExecuteRequest | ExecuteAck | ExecuteResult | ExecuteError
                       | ExecuteTimeout, Field(discriminator="kind")]
"""Any message of the bus, told apart by ``kind``."""

Reply = ExecuteResult | ExecuteError | ExecuteTimeout
"""A terminal message: how a request ends."""

BUS_CONTRACTS = ContractRegistry([ExecuteRequest, ExecuteAck, ExecuteResult, ExecuteError,
                                  ExecuteTimeout])
"""The message contracts, exported to ``contracts/bus`` and checked by ``contracts check``."""

_ADAPTER: TypeAdapter[Any] = TypeAdapter(BusMessage)


def encode(message: _Message) -> bytes:
    """The wire form of ``message`` (JSON)."""
    return message.model_dump_json().encode()


def decode(raw: bytes | str | None) -> ExecuteRequest | ExecuteAck | Reply:
    """Read a message off the wire.

    Raises:
        MalformedMessage: not JSON, an unknown kind or version, a field missing or wrong
            (the message says which); nothing else.
    """
    if raw is None:
        raise MalformedMessage("an entry without a message field")
    try:
        message: Any = _ADAPTER.validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise MalformedMessage(f"{where}: {err['msg']}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise MalformedMessage(f"not a bus message: {type(exc).__name__}") from None
    return message  # type: ignore[no-any-return]
