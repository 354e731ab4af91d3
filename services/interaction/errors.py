"""Domain errors of the Interaction service and their gRPC mapping, in one module.

Every error is a :class:`services.core.status.ServiceError` subclass, so the servicer only calls
:func:`services.core.status.abort`. ``reason`` is the ``maka.interaction.v1.ErrorReason`` value name
without its prefix; ``domain`` is ``maka.interaction.v1``. Messages name ids and rules, never form
values.
"""

from __future__ import annotations

from collections.abc import Sequence

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core import status
from services.core.form.errors import FormError, Violation
from services.core.reasons import InteractionErrorReason

DOMAIN = "maka.interaction.v1"


class InvalidRequest(status.InvalidArgument):
    """INVALID_ARGUMENT / INVALID_REQUEST: a malformed request (missing ids, bad shapes)."""

    def __init__(self, message: str, violations: Sequence[Violation] = ()) -> None:
        super().__init__(InteractionErrorReason.INVALID_REQUEST, message, domain=DOMAIN, violations=violations)


class InvalidForm(status.InvalidArgument):
    """INVALID_ARGUMENT / INVALID_FORM: the form broke the form contract or its caps."""

    def __init__(self, error: FormError) -> None:
        super().__init__(
            InteractionErrorReason.INVALID_FORM,
            "the form breaks the form contract",
            domain=DOMAIN,
            violations=error.violations,
        )


class InvalidAnswer(status.InvalidArgument):
    """INVALID_ARGUMENT / INVALID_ANSWER: the answer does not fit the stored canonical form."""

    def __init__(self, error: FormError) -> None:
        super().__init__(
            InteractionErrorReason.INVALID_ANSWER,
            "the answer does not fit the form",
            domain=DOMAIN,
            violations=error.violations,
        )


class InteractionNotFound(status.NotFound):
    """NOT_FOUND: unknown id, or an id of a session the caller may not see (never revealed)."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(InteractionErrorReason.NOT_FOUND, f"no interaction {interaction_id!r}", domain=DOMAIN)


class SessionNotFound(status.NotFound):
    """NOT_FOUND: a session the caller may not see (indistinguishable from an unknown one)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(InteractionErrorReason.NOT_FOUND, f"no session {session_id!r}", domain=DOMAIN)


class SessionForbidden(status.PermissionDenied):
    """PERMISSION_DENIED: an explicit request for a session outside the caller's token scope (docs/design.md#tokens).

    Decided from the token alone, so it reveals nothing about whether the session exists.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            InteractionErrorReason.PERMISSION_DENIED, f"the caller may not see session {session_id!r}", domain=DOMAIN
        )


class HostForbidden(status.PermissionDenied):
    """PERMISSION_DENIED: a Host the caller's token does not name, or one this tier does not serve.

    One message for both, naming no Host, so it reveals nothing about which Hosts exist.
    """

    def __init__(self) -> None:
        super().__init__(InteractionErrorReason.PERMISSION_DENIED, "the caller may not use this Host", domain=DOMAIN)


class InteractionClosed(status.FailedPrecondition):
    """FAILED_PRECONDITION / CLOSED: the Interaction closed without an answer; metadata ``close_reason``."""

    def __init__(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> None:
        name = close_reason_name(reason)
        super().__init__(
            InteractionErrorReason.CLOSED,
            f"interaction {interaction_id!r} is closed ({name})",
            domain=DOMAIN,
            metadata={"close_reason": name},
        )
        self.close_reason = reason


class AlreadySettled(status.Aborted):
    """ABORTED / ALREADY_SETTLED: another answer won."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(
            InteractionErrorReason.ALREADY_SETTLED, f"interaction {interaction_id!r} is already answered", domain=DOMAIN
        )


class StaleEpoch(status.FailedPrecondition):
    """FAILED_PRECONDITION / STALE_EPOCH: the caller's Host epoch is not the current one."""

    def __init__(self, epoch: int, current: int) -> None:
        super().__init__(
            InteractionErrorReason.STALE_EPOCH,
            f"host epoch {epoch} is not the current epoch {current}",
            domain=DOMAIN,
            metadata={"current_epoch": str(current)},
        )


class AlreadyPending(status.FailedPrecondition):
    """FAILED_PRECONDITION / ALREADY_PENDING: the invocation already has a pending Interaction."""

    def __init__(self, invocation_id: str) -> None:
        super().__init__(
            InteractionErrorReason.ALREADY_PENDING,
            f"invocation {invocation_id!r} already has a pending interaction",
            domain=DOMAIN,
        )


class LimitExceeded(status.ResourceExhausted):
    """RESOURCE_EXHAUSTED / LIMIT_EXCEEDED: a cap was hit before anything was stored."""

    def __init__(self, message: str) -> None:
        super().__init__(InteractionErrorReason.LIMIT_EXCEEDED, message, domain=DOMAIN)


class StoreUnavailable(status.Unavailable):
    """UNAVAILABLE / STORE_UNAVAILABLE: Redis cannot be reached; retry later."""

    def __init__(self) -> None:
        super().__init__(
            InteractionErrorReason.STORE_UNAVAILABLE,
            "the interaction store (Redis) is unavailable; retry later",
            domain=DOMAIN,
        )


class SubscriberOverflowed(status.Unavailable):
    """UNAVAILABLE / SUBSCRIBER_OVERFLOW: the server ended an Attach stream whose surface fell too far behind the
    live events; the surface reattaches at once with the token of the last event it got and loses nothing.
    UNAVAILABLE (not ABORTED) because every client library reconnects an Attach stream after it."""

    retry_pushback = False

    def __init__(self) -> None:
        super().__init__(
            InteractionErrorReason.SUBSCRIBER_OVERFLOW,
            "the stream fell too far behind the live events; resume with the last resume token",
            domain=DOMAIN,
        )


class ShuttingDown(status.Unavailable):
    """UNAVAILABLE / SHUTTING_DOWN: the replica is draining; reconnect (another replica serves the stream) and
    resume with the last token. Unlike the store's UNAVAILABLE, a client's retry policy may retry it at once."""

    retry_pushback = False

    def __init__(self) -> None:
        super().__init__(
            InteractionErrorReason.SHUTTING_DOWN,
            "this replica is shutting down; reconnect and resume with the last resume token",
            domain=DOMAIN,
        )


class AnswerUnsealable(status.ServiceError):
    """INTERNAL / ANSWER_UNSEALABLE: a stored answer does not open with this service's answer key (sealed with
    another key, moved from another record, damaged, or sealed while this replica has no key;
    docs/security.md "Answer values at rest"). The record is never served with a wrong or empty answer."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(
            InteractionErrorReason.ANSWER_UNSEALABLE,
            f"the stored answer of interaction {interaction_id!r} cannot be unsealed",
            domain=DOMAIN,
        )
        self.interaction_id = interaction_id


def close_reason_name(reason: interaction_pb2.CloseReason.ValueType) -> str:
    """``CLOSE_REASON_HOST_RESTARTED`` → ``"host_restarted"`` (the spelling of
    docs/design.md#close-reasons, stored in Redis and logged)."""
    return interaction_pb2.CloseReason.Name(reason).removeprefix("CLOSE_REASON_").lower()


def error_reason(error: status.ServiceError) -> interaction_pb2.ErrorReason.ValueType:
    """The proto ``ErrorReason`` of ``error`` (UNSPECIFIED for reasons outside this service)."""
    try:
        return interaction_pb2.ErrorReason.Value(f"ERROR_REASON_{error.reason.value}")
    except ValueError:
        return interaction_pb2.ERROR_REASON_UNSPECIFIED


def violations_to_proto(violations: Sequence[Violation]) -> list[form_pb2.FieldViolation]:
    """Form-contract violations as ``maka.form.v1.FieldViolation`` messages."""
    return [
        form_pb2.FieldViolation(
            path=v.path,
            reason=form_pb2.FormErrorReason.Value(f"FORM_ERROR_REASON_{v.reason.value}"),
            description=v.description,
        )
        for v in violations
    ]
