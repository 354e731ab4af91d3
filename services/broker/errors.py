"""Broker domain errors.

RPC-level errors are :class:`services.core.status.ServiceError` subclasses (mapped to gRPC status by
:func:`services.core.status.abort`); provider frame refusals are :class:`FrameRejection`, which the
broker turns into a ``FrameRejected`` frame on the provider's own stream and counts (they never end
the stream); a call the broker will not start is :class:`CallRefused`, which ends it with a ``failure``.
"""

from __future__ import annotations

from collections import Counter

from maka.broker.v1 import broker_pb2
from services.core import metrics
from services.core.reasons import BrokerErrorReason, InteractionErrorReason
from services.core.status import InvalidArgument, NotFound, PermissionDenied, Unavailable

DOMAIN = "maka.broker.v1"


class InvalidRequest(InvalidArgument):
    """INVALID_ARGUMENT / ``INVALID_REQUEST``: a malformed Connect register, Stop or CallTool request."""

    def __init__(self, message: str) -> None:
        super().__init__(BrokerErrorReason.INVALID_REQUEST, message, domain=DOMAIN)


class NotPermitted(PermissionDenied):
    """PERMISSION_DENIED / ``PERMISSION_DENIED``: the caller lacks the role or the session (docs/design.md#tokens)."""

    def __init__(self, message: str) -> None:
        super().__init__(BrokerErrorReason.PERMISSION_DENIED, message, domain=DOMAIN)


class CallNotFound(NotFound):
    """NOT_FOUND / ``CALL_NOT_FOUND``: WatchCall names no live invocation, nor one settled within the retention."""

    def __init__(self, message: str) -> None:
        super().__init__(BrokerErrorReason.CALL_NOT_FOUND, message, domain=DOMAIN)


class HostUnavailable(Unavailable):
    """UNAVAILABLE / ``HOST_UNAVAILABLE``: the Interaction service's HostLink is down or stale."""

    def __init__(self, message: str) -> None:
        super().__init__(BrokerErrorReason.HOST_UNAVAILABLE, message, domain=DOMAIN)


class OpenRefused(Exception):
    """The Interaction service refused ``OpenInteraction`` (``OpenRejected``): reason and message.

    ``reason`` is the ``InteractionErrorReason`` member, or the name as sent when this broker does not know it.
    """

    def __init__(self, reason: InteractionErrorReason | str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class CallRefused(Exception):
    """A well-formed call the broker will not start (no provider, sign-in needed, draining, ...): it ends
    with a ``failure`` event of ``code``, never an RPC error."""

    def __init__(self, code: broker_pb2.FailureCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FrameRejection(Exception):
    """A provider frame refused fail-closed: nothing changed; sent back as ``FrameRejected``."""

    def __init__(self, reason: broker_pb2.RejectReason.ValueType, invocation_id: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.invocation_id = invocation_id
        self.message = message

    def count(self, counters: Counter[str]) -> None:
        """Count the rejection (``rejected_frames``, ``rejected_frames.<REASON>``, ``maka_frames_rejected_total``)."""
        reason = broker_pb2.RejectReason.Name(self.reason).removeprefix("REJECT_REASON_")
        counters["rejected_frames"] += 1
        counters[f"rejected_frames.{reason}"] += 1
        metrics.FRAMES_REJECTED.labels(reason).inc()

    def to_frame(self) -> broker_pb2.ConnectResponse:
        """The ``FrameRejected`` frame for the provider."""
        return broker_pb2.ConnectResponse(
            rejected=broker_pb2.FrameRejected(
                reason=self.reason, invocation_id=self.invocation_id, message=self.message
            )
        )
