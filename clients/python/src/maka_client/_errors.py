"""Errors of the Maka client: one exception type carrying the gRPC status code and the stable reason."""

from __future__ import annotations

from collections.abc import Mapping

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from maka_client._codes import ErrorReason, parse_reason

_DETAILS_KEY = "grpc-status-details-bin"


class MakaError(Exception):
    """A call the Maka services refused or could not complete.

    Attributes:
        grpc_status_code: the :class:`grpc.StatusCode` (``UNAVAILABLE``, ``PERMISSION_DENIED``, ...).
        code: its name (``"UNAVAILABLE"``), the same string the TypeScript client exposes.
        reason: the stable reason from ``google.rpc.ErrorInfo`` when the service sent one, as a member of
            :class:`BrokerErrorReason` / :class:`InteractionErrorReason` (``CALL_NOT_FOUND``,
            ``ALREADY_SETTLED``, ...) or :class:`ClientErrorReason` when this library raised it; a newer
            server's unknown reason stays a string; without one, the same as ``code``.
        message: human-readable; never contains form values.
        violations: ``(field path, description)`` pairs from ``google.rpc.BadRequest``; ``str(error)`` lists
            them after the message (``INVALID_ANSWER: ... (/email: must be an email address; ...)``).
        domain: the ``google.rpc.ErrorInfo`` domain (``maka.interaction.v1``, ...; empty without one).
        metadata: the ``google.rpc.ErrorInfo`` metadata (e.g. ``close_reason`` of ``ALREADY_SETTLED``).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: ErrorReason | str = "",
        violations: tuple[tuple[str, str], ...] = (),
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        failing = "; ".join(f"{path or '$'}: {description}" for path, description in violations)
        super().__init__(f"{reason or code.name}: {message}" + (f" ({failing})" if failing else ""))
        self.grpc_status_code = code
        self.code = code.name
        self.reason: ErrorReason | str = reason or code.name
        self.message = message
        self.violations = violations
        self.domain = domain
        self.metadata: Mapping[str, str] = dict(metadata or {})

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError) -> MakaError:
        """Decode a failed RPC, reading ``google.rpc.ErrorInfo`` / ``BadRequest`` from the status details."""
        reason: ErrorReason | str = ""
        domain = ""
        metadata: dict[str, str] = {}
        violations: list[tuple[str, str]] = []
        for key, value in error.trailing_metadata() or ():
            if key != _DETAILS_KEY or not isinstance(value, bytes):
                continue
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(info):
                    reason = parse_reason(info.domain, info.reason)
                    domain, metadata = info.domain, dict(info.metadata)
                elif detail.Unpack(bad):
                    violations += [(v.field, v.description) for v in bad.field_violations]
        return cls(
            error.code(),
            error.details() or error.code().name,
            reason=reason,
            violations=tuple(violations),
            domain=domain,
            metadata=metadata,
        )


RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
"""Call-stream failures a reattach may fix: transport, proxy or server restarts (an L7 proxy reports a cut
stream as UNAVAILABLE, INTERNAL or UNKNOWN). Anything else is the server's answer and is raised."""

ATTACH_FATAL = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""``Attach`` failures a reconnect cannot fix (raised); a surface reconnects after any other."""
