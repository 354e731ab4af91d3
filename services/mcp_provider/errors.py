"""Stable errors of one MCP Tool call, for the broker (``maka.broker.v1.FailureCode``).

Messages are fixed text plus ids, counts and codes: never ``requestState``, form values or MCP params.
"""

from __future__ import annotations

from enum import StrEnum

from maka.broker.v1 import broker_pb2


class CallErrorCode(StrEnum):
    """Why a Tool call failed; each maps to one ``maka.broker.v1.FailureCode``."""

    UNSUPPORTED_INPUT_REQUEST = "unsupported_input_request"
    """URL-mode elicitation, ``sampling/createMessage``, ``roots/list`` or an unknown method (RFC criterion 11)."""
    UNSUPPORTED_METHOD = "unsupported_method"
    """A ``prompts/get`` or ``resources/read`` answered ``input_required``: MRTR is supported for ``tools/call``
    only (RFC criterion 11; MRTR for prompts/resources is a non-goal). Nothing was asked, no retry was sent."""
    LIMITS_EXCEEDED = "limits_exceeded"
    """A repository cap (``requestState`` bytes, input requests per round, key length) was exceeded."""
    ROUNDS_EXHAUSTED = "rounds_exhausted"
    """The round cap was reached without a complete result (RFC criterion 6)."""
    BINDING_CHANGED = "binding_changed"
    """The Tool binding or connection generation changed between rounds (RFC criterion 8)."""
    CONNECTION_LOST = "connection_lost"
    """The MCP connection closed or failed during or between rounds; the outcome is unknown."""
    SERVER_ERROR = "server_error"
    """The MCP server answered with a JSON-RPC error or an invalid result."""
    INVALID_RESULT = "invalid_result"
    """The result's ``resultType`` is neither ``complete`` (or absent) nor a valid ``input_required`` (one with
    ``inputRequests`` or ``requestState``): MCP 2026-07-28 ``basic/index`` §ResultType says an unrecognised value
    MUST be treated as invalid. Nothing is returned and no retry is sent."""
    ROUND_EXPIRED = "round_expired"
    """The round's deadline (``requestState`` received + ``requestStateTtl``) passed before every form of the
    round was answered: the retry would be rejected, so the remaining input is not collected and nothing is sent."""
    REQUEST_STATE_REJECTED = "request_state_rejected"
    """``-32602 Invalid or expired requestState``."""
    MISSING_CLIENT_CAPABILITY = "missing_client_capability"
    """``-32021``: the server needs a client capability (a UI) this call did not offer."""
    INVALID_FORM = "invalid_form"
    """The server's ``requestedSchema`` could not be decoded into the form contract."""
    INVALID_ANSWER = "invalid_answer"
    """The answer failed validation against the server's original schema."""
    INTERACTION_CLOSED = "interaction_closed"
    """The form closed without an answer (host restart, superseded ...); no retry was sent."""
    INTERACTION_TIMED_OUT = "interaction_timed_out"
    """The form's bounded wait ran out or its lease expired; no retry was sent."""
    STOPPED = "stopped"
    """The call was stopped (broker ``CancelInvocation``); nothing more was sent."""
    UNKNOWN_TOOL = "unknown_tool"
    """No such Tool on this server (or the server is not connected)."""
    INVALID_REQUEST = "invalid_request"
    """The call itself was malformed (arguments not a JSON object)."""
    AUTH_REQUIRED = "auth_required"
    """The server waits for an OAuth sign-in; nothing was sent (the message carries the sign-in hint)."""
    SERVER_UNAVAILABLE = "server_unavailable"
    """The server is configured but not serving calls (draining after a reload removed it, reconnecting)."""


FAILURE_CODES: dict[CallErrorCode, broker_pb2.FailureCode.ValueType] = {
    CallErrorCode.UNSUPPORTED_INPUT_REQUEST: broker_pb2.FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST,
    CallErrorCode.UNSUPPORTED_METHOD: broker_pb2.FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST,
    CallErrorCode.LIMITS_EXCEEDED: broker_pb2.FAILURE_CODE_LIMITS_EXCEEDED,
    CallErrorCode.ROUNDS_EXHAUSTED: broker_pb2.FAILURE_CODE_ROUNDS_EXHAUSTED,
    CallErrorCode.BINDING_CHANGED: broker_pb2.FAILURE_CODE_BINDING_CHANGED,
    CallErrorCode.CONNECTION_LOST: broker_pb2.FAILURE_CODE_CONNECTION_LOST,
    CallErrorCode.SERVER_ERROR: broker_pb2.FAILURE_CODE_SERVER_ERROR,
    CallErrorCode.INVALID_RESULT: broker_pb2.FAILURE_CODE_SERVER_ERROR,
    CallErrorCode.ROUND_EXPIRED: broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT,
    CallErrorCode.REQUEST_STATE_REJECTED: broker_pb2.FAILURE_CODE_REQUEST_STATE_REJECTED,
    CallErrorCode.MISSING_CLIENT_CAPABILITY: broker_pb2.FAILURE_CODE_MISSING_CLIENT_CAPABILITY,
    CallErrorCode.INVALID_FORM: broker_pb2.FAILURE_CODE_INVALID_FORM,
    CallErrorCode.INVALID_ANSWER: broker_pb2.FAILURE_CODE_INVALID_ANSWER,
    CallErrorCode.INTERACTION_CLOSED: broker_pb2.FAILURE_CODE_INTERACTION_CLOSED,
    CallErrorCode.INTERACTION_TIMED_OUT: broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT,
    CallErrorCode.STOPPED: broker_pb2.FAILURE_CODE_PROVIDER_ERROR,
    CallErrorCode.UNKNOWN_TOOL: broker_pb2.FAILURE_CODE_UNKNOWN_TOOL,
    CallErrorCode.INVALID_REQUEST: broker_pb2.FAILURE_CODE_INVALID_REQUEST,
    CallErrorCode.AUTH_REQUIRED: broker_pb2.FAILURE_CODE_AUTH_REQUIRED,
    CallErrorCode.SERVER_UNAVAILABLE: broker_pb2.FAILURE_CODE_SERVER_UNAVAILABLE,
}
"""``CallErrorCode`` → ``maka.broker.v1.FailureCode``.

``STOPPED`` is normally never sent: a stopped call sends nothing."""


class McpToolCallError(Exception):
    """A Tool call failed with a stable ``code`` (:class:`CallErrorCode`) and a secret-free message.

    ``mcp_error_code`` is the server's JSON-RPC error code when there was one.
    """

    def __init__(self, code: CallErrorCode, message: str, *, mcp_error_code: int | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.mcp_error_code = mcp_error_code

    @property
    def failure_code(self) -> broker_pb2.FailureCode.ValueType:
        """The ``maka.broker.v1.FailureCode`` for the broker."""
        return FAILURE_CODES[self.code]


class InteractionAborted(Exception):
    """Raised by a ``FormHandler`` when the form closed without an answer: the call aborts, no retry.

    ``code`` is :attr:`CallErrorCode.STOPPED`, :attr:`CallErrorCode.INTERACTION_TIMED_OUT`,
    :attr:`CallErrorCode.BINDING_CHANGED`, :attr:`CallErrorCode.CONNECTION_LOST` or
    :attr:`CallErrorCode.INTERACTION_CLOSED` (the close reason, mapped by the provider).
    """

    def __init__(self, code: CallErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
