"""Domain errors → gRPC status with ``google.rpc`` rich details, in one place for every service.

A servicer never builds a status by hand: domain code raises a :class:`ServiceError` subclass and
:func:`abort` turns it into a status carrying ``google.rpc.ErrorInfo`` (stable ``reason``, service
``domain``, metadata) and, for field problems, ``google.rpc.BadRequest`` field violations. Clients
read it back with :func:`error_from_rpc`. Messages never carry form values or ``requestState``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.core.form.errors import Violation
from services.core.reasons import ErrorReason, parse_reason

_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class ErrorDetail:
    """What a client learns from an error status: code, stable reason, message, violations."""

    code: grpc.StatusCode
    reason: ErrorReason | str
    """The :mod:`services.core.reasons` member for a known domain and reason; a reason this code does not
    know (a newer server's) stays the string it is, and ``""`` when the status carried no ErrorInfo."""
    message: str
    domain: str = ""
    metadata: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    violations: tuple[tuple[str, str], ...] = ()
    """``(field path, description)`` pairs from ``google.rpc.BadRequest``."""


class ServiceError(Exception):
    """Base of every error a servicer turns into a gRPC status.

    Subclasses fix ``code``; instances carry the stable ``reason`` (a :mod:`services.core.reasons` member;
    on the wire its ``ErrorReason`` value name without the prefix, e.g. ``"ALREADY_SETTLED"``), the
    ``domain`` (proto package), an optional metadata map and field violations.
    """

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    retry_pushback: bool = True
    """For ``UNAVAILABLE``: tell clients' retry policy not to retry (the service already spent its time).
    ``False`` for a stream the server ended to be resumed (a draining replica, a subscriber that fell behind),
    which a reconnect fixes."""

    def __init__(
        self,
        reason: ErrorReason,
        message: str,
        *,
        domain: str = "maka",
        metadata: Mapping[str, str] | None = None,
        violations: Sequence[Violation] = (),
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.domain = domain
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations: tuple[Violation, ...] = tuple(violations)


class InvalidArgument(ServiceError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ServiceError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(ServiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(ServiceError):
    code = grpc.StatusCode.ABORTED


class ResourceExhausted(ServiceError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(ServiceError):
    code = grpc.StatusCode.UNAVAILABLE


class Unauthenticated(ServiceError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(ServiceError):
    code = grpc.StatusCode.PERMISSION_DENIED


MAX_MESSAGE_CHARS = 300
"""Longest status message sent; a message quoting an id a caller sent (``no interaction '…'``) is cut."""
MAX_PATH_CHARS = 200
"""Longest field path of one violation (a path names a field the caller sent, which may be any length)."""
VIOLATIONS_BUDGET_BYTES = 4096
"""UTF-8 bytes of violation paths and descriptions sent; the violations past it are counted in a last ``$``
entry. With the message cap this keeps a status inside gRPC's 8 KiB soft limit on trailers."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field_violations(violations: Sequence[Violation]) -> list[error_details_pb2.BadRequest.FieldViolation]:
    out: list[error_details_pb2.BadRequest.FieldViolation] = []
    spent = 0
    for index, v in enumerate(violations):
        path, description = _clip(v.path, MAX_PATH_CHARS), _clip(f"{v.reason.value}: {v.description}", 300)
        spent += len(path.encode()) + len(description.encode())
        if spent > VIOLATIONS_BUDGET_BYTES:
            more = f"{len(violations) - index} more violations not listed"
            out.append(error_details_pb2.BadRequest.FieldViolation(field="$", description=more))
            break
        out.append(error_details_pb2.BadRequest.FieldViolation(field=path, description=description))
    return out


def to_status(error: ServiceError) -> grpc.Status:
    """Build the rich ``grpc.Status`` (ErrorInfo + BadRequest details) for ``error``.

    The message, each violation and the violations together are bounded so the status always fits in the
    trailers a gRPC client accepts: an id or a field name of 100 000 characters still gets its stable reason,
    not a transport error (docs/security.md#threats-and-what-stops-them).
    """
    details: list[any_pb2.Any] = []
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=error.reason.value, domain=error.domain, metadata=error.metadata))
    details.append(info)
    if error.violations:
        field_violations = _field_violations(error.violations)
        bad = error_details_pb2.BadRequest(field_violations=field_violations)
        packed = any_pb2.Any()
        packed.Pack(bad)
        details.append(packed)
    message = status_pb2.Status(
        code=error.code.value[0], message=_clip(error.message, MAX_MESSAGE_CHARS), details=details
    )
    status = rpc_status.to_status(message)
    if error.code == grpc.StatusCode.UNAVAILABLE and error.retry_pushback:
        # A service's own UNAVAILABLE (its store is down) already spent its time: tell the clients' retry
        # policy not to retry it (gRPC server pushback); a replica that went away is still retried.
        return _Status(status.code, status.details, (*status.trailing_metadata, ("grpc-retry-pushback-ms", "-1")))
    return status


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: tuple[tuple[str, str | bytes], ...]):
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


async def abort(context: grpc.aio.ServicerContext[object, object], error: ServiceError) -> NoReturn:
    """Abort the RPC with ``error``'s rich status. Raises (never returns)."""
    await context.abort_with_status(to_status(error))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


def error_from_rpc(error: grpc.aio.AioRpcError) -> ErrorDetail:
    """Decode a failed call's status, reading ErrorInfo/BadRequest from the trailing metadata."""
    code = error.code()
    reason, domain, metadata = "", "", dict[str, str]()
    violations: list[tuple[str, str]] = []
    for key, value in error.trailing_metadata() or ():
        if key != _DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason, domain, metadata = info.reason, info.domain, dict(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations.extend((v.field, v.description) for v in bad.field_violations)
    return ErrorDetail(
        code=code,
        reason=parse_reason(domain, reason),
        message=error.details() or "",
        domain=domain,
        metadata=metadata,
        violations=tuple(violations),
    )
