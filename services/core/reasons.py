"""The stable ``reason`` of every error status, as enums: one per ``google.rpc.ErrorInfo`` domain.

Each member's value is its proto ``ErrorReason`` value name without the ``ERROR_REASON_`` prefix, so the
wire string is the proto's (``maka.interaction.v1.ErrorReason``, ``maka.broker.v1.ErrorReason``;
tests/services/core/test_reasons.py proves the names match). Services raise
:class:`services.core.status.ServiceError` with a member; clients decode a status with
:func:`services.core.status.error_from_rpc`, which turns a known reason into its member (see
:func:`parse_reason`). They live here, beside the status mapping, because the surfaces read the reasons of
services they do not import.
"""

from __future__ import annotations

from enum import StrEnum

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2

INTERACTION_DOMAIN = interaction_pb2.DESCRIPTOR.package
"""``maka.interaction.v1``."""
BROKER_DOMAIN = broker_pb2.DESCRIPTOR.package
"""``maka.broker.v1``."""
AUTH_DOMAIN = "maka.auth"
"""Refusals of the shared authentication interceptor, before any handler runs."""


class InteractionErrorReason(StrEnum):
    """``maka.interaction.v1.ErrorReason`` (domain ``maka.interaction.v1``)."""

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


class BrokerErrorReason(StrEnum):
    """``maka.broker.v1.ErrorReason`` (domain ``maka.broker.v1``)."""

    INVALID_REQUEST = "INVALID_REQUEST"
    CALL_NOT_FOUND = "CALL_NOT_FOUND"
    NOT_FOUND = "NOT_FOUND"
    NOT_REGISTERED = "NOT_REGISTERED"
    HOST_UNAVAILABLE = "HOST_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


class AuthErrorReason(StrEnum):
    """Domain ``maka.auth``: the two refusals every service's ``ErrorReason`` also lists."""

    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


ErrorReason = InteractionErrorReason | BrokerErrorReason | AuthErrorReason
"""A reason a Maka service raises."""

REASONS_BY_DOMAIN: dict[str, type[InteractionErrorReason] | type[BrokerErrorReason] | type[AuthErrorReason]] = {
    INTERACTION_DOMAIN: InteractionErrorReason,
    BROKER_DOMAIN: BrokerErrorReason,
    AUTH_DOMAIN: AuthErrorReason,
}


def parse_reason(domain: str, reason: str) -> ErrorReason | str:
    """The member for ``reason`` in ``domain``; an unknown domain or reason (a newer server's) is returned
    as the string it is, so a client never fails on it and still compares equal to a member of that name."""
    enum = REASONS_BY_DOMAIN.get(domain)
    if enum is None or reason not in enum.__members__:
        return reason
    return enum[reason]
