"""Errors of the Maka client: one exception type carrying the gRPC status name and the stable reason."""

from __future__ import annotations

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

_DETAILS_KEY = "grpc-status-details-bin"


class MakaError(Exception):
    """A call the Maka services refused or could not complete.

    Attributes:
        code: the gRPC status name (``"UNAVAILABLE"``, ``"PERMISSION_DENIED"``, ...).
        reason: the stable ``ErrorReason`` from ``google.rpc.ErrorInfo`` when the service sent one
            (``"CALL_NOT_FOUND"``, ``"ALREADY_SETTLED"``, ...), else the same as ``code``.
        message: human-readable; never contains form values.
        violations: ``(field path, description)`` pairs from ``google.rpc.BadRequest``.
    """

    def __init__(
        self, code: str, message: str, *, reason: str = "", violations: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(f"{reason or code}: {message}")
        self.code = code
        self.reason = reason or code
        self.message = message
        self.violations = violations

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError) -> MakaError:
        """Decode a failed RPC, reading ``google.rpc.ErrorInfo`` / ``BadRequest`` from the status details."""
        reason = ""
        violations: list[tuple[str, str]] = []
        for key, value in error.trailing_metadata() or ():
            if key != _DETAILS_KEY or not isinstance(value, bytes):
                continue
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(info):
                    reason = info.reason
                elif detail.Unpack(bad):
                    violations += [(v.field, v.description) for v in bad.field_violations]
        return cls(error.code().name, error.details() or error.code().name, reason=reason, violations=tuple(violations))


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
"""Stream failures a reattach may fix: transport, proxy or server restarts (an L7 proxy reports a cut
stream as UNAVAILABLE, INTERNAL or UNKNOWN). Anything else is the server's answer and is raised."""
