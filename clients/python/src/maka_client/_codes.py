"""Stable codes and reasons as enums, equal to their wire names (docs/clients.md, "Failure codes").

Each member's value is its proto enum value name without the prefix (``FAILURE_CODE_``, ``ERROR_REASON_``),
so a member compares equal to the string the other client libraries expose. A code or reason this version
does not know (a newer server's) is kept as the plain string it is: a client never fails on it.
"""

from __future__ import annotations

from enum import StrEnum


class FailureCode(StrEnum):
    """``maka.broker.v1.FailureCode``: why a call failed (``Failure.code``)."""

    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_REQUEST = "INVALID_REQUEST"
    EXECUTION_TIMEOUT = "EXECUTION_TIMEOUT"
    INTERACTION_TIMED_OUT = "INTERACTION_TIMED_OUT"
    INCONSISTENT_PROVIDER = "INCONSISTENT_PROVIDER"
    UNSUPPORTED_INPUT_REQUEST = "UNSUPPORTED_INPUT_REQUEST"
    LIMITS_EXCEEDED = "LIMITS_EXCEEDED"
    ROUNDS_EXHAUSTED = "ROUNDS_EXHAUSTED"
    BINDING_CHANGED = "BINDING_CHANGED"
    CONNECTION_LOST = "CONNECTION_LOST"
    SERVER_ERROR = "SERVER_ERROR"
    REQUEST_STATE_REJECTED = "REQUEST_STATE_REJECTED"
    MISSING_CLIENT_CAPABILITY = "MISSING_CLIENT_CAPABILITY"
    INVALID_FORM = "INVALID_FORM"
    INVALID_ANSWER = "INVALID_ANSWER"
    INTERACTION_CLOSED = "INTERACTION_CLOSED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    HOST_UNAVAILABLE = "HOST_UNAVAILABLE"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    SERVER_UNAVAILABLE = "SERVER_UNAVAILABLE"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"


class BrokerErrorReason(StrEnum):
    """``maka.broker.v1.ErrorReason``: the reason of an error status from the broker (``MakaError.reason``)."""

    INVALID_REQUEST = "INVALID_REQUEST"
    CALL_NOT_FOUND = "CALL_NOT_FOUND"
    NOT_FOUND = "NOT_FOUND"
    NOT_REGISTERED = "NOT_REGISTERED"
    HOST_UNAVAILABLE = "HOST_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


class InteractionErrorReason(StrEnum):
    """``maka.interaction.v1.ErrorReason``: the reason of an error status from the Interaction service."""

    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_FORM = "INVALID_FORM"
    INVALID_ANSWER = "INVALID_ANSWER"
    NOT_FOUND = "NOT_FOUND"
    CLOSED = "CLOSED"
    ALREADY_SETTLED = "ALREADY_SETTLED"
    STALE_EPOCH = "STALE_EPOCH"
    ALREADY_PENDING = "ALREADY_PENDING"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    ANSWER_UNSEALABLE = "ANSWER_UNSEALABLE"
    SUBSCRIBER_OVERFLOW = "SUBSCRIBER_OVERFLOW"
    SHUTTING_DOWN = "SHUTTING_DOWN"


class ClientErrorReason(StrEnum):
    """Reasons this library raises itself, with no status from a service."""

    REATTACH_FAILED = "REATTACH_FAILED"
    """A call's stream dropped and could not be resumed within ``ReattachPolicy.give_up_after``."""
    NO_RESULT = "NO_RESULT"
    """The call's stream ended without an outcome."""
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    """A request this library refused before sending it."""


ErrorReason = BrokerErrorReason | InteractionErrorReason | ClientErrorReason
"""Any reason a :class:`maka_client.MakaError` carries (or a newer server's, as a string)."""

_BY_DOMAIN: dict[str, type[BrokerErrorReason] | type[InteractionErrorReason]] = {
    "maka.broker.v1": BrokerErrorReason,
    "maka.interaction.v1": InteractionErrorReason,
    # refusals of the services' shared authentication, before any handler runs
    "maka.auth": BrokerErrorReason,
}


def parse_reason(domain: str, reason: str) -> ErrorReason | str:
    """The member for ``reason`` of ``domain`` (``google.rpc.ErrorInfo``); unknown ones stay strings."""
    enum = _BY_DOMAIN.get(domain)
    return enum[reason] if enum is not None and reason in enum.__members__ else reason


def parse_failure_code(name: str) -> FailureCode | str:
    """The member for a ``FailureCode`` name without prefix; an unknown one stays a string."""
    return FailureCode[name] if name in FailureCode.__members__ else name
