"""The provider's server status report to the broker (``CapabilityBrokerService.ReportServers``).

Why this path (docs/operations.md#status, ``maka status``): a server that never connects has no ``Connect``
stream (a stream is registered per connection generation), yet the broker must know it exists to
answer ``SERVER_UNAVAILABLE`` with its cause instead of ``UNKNOWN_TOOL``, and status readers (``maka
status``, the web page, the TUI) already reach the broker. So each provider process keeps one
client-streaming ``ReportServers`` call open and sends a full snapshot of its servers after every
change (state, failure, Tool refresh, reload; a call starting or ending changes only the in-flight count,
which is sent within :data:`CALLS_REPORT_SECONDS`, so a busy provider sends about one snapshot a second
rather than two per call). The broker keeps the latest snapshot
while the stream is open and forgets it when the stream ends (the provider died or restarted).

A snapshot carries states, counts, the configured era and transport, the negotiated version and the
last failure's bounded, secret-free cause (:mod:`services.mcp_provider.causes`); never arguments,
form values or ``requestState``. A connected server whose registration the broker refused (another
provider holds its name, :class:`~services.mcp_provider.broker_link.Refusal`) is reported FAILED with
the cause ``refused by the broker: <reason>`` and the link's next registration attempt as next retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
import grpc.aio
from google.protobuf import timestamp_pb2

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.mcp_provider.broker_link import Refusal
from services.mcp_provider.causes import clean_line
from services.mcp_provider.connection import McpConnection, ServerState
from services.mcp_provider.settings import reconnect_backoff

log = logging.getLogger("maka.mcp_provider.status")

STATES: dict[ServerState, broker_pb2.ServerState.ValueType] = {
    ServerState.CONNECTING: broker_pb2.SERVER_STATE_CONNECTING,
    ServerState.READY: broker_pb2.SERVER_STATE_READY,
    ServerState.FAILED: broker_pb2.SERVER_STATE_FAILED,
    ServerState.WAITING_FOR_SIGN_IN: broker_pb2.SERVER_STATE_WAITING_FOR_SIGN_IN,
    ServerState.DISABLED: broker_pb2.SERVER_STATE_DISABLED,
    ServerState.DRAINING: broker_pb2.SERVER_STATE_DRAINING,
}
"""``ServerState`` → ``maka.broker.v1.ServerState``."""

MAX_RELOAD_PROBLEMS = 20
"""Problem lines of a rejected reload kept in the report (then one ``... and N more problems`` line)."""

KEEPALIVE_SECONDS = 30.0
"""A snapshot is re-sent at least this often, so a half-open stream is noticed by gRPC keepalive."""
CALLS_REPORT_SECONDS = 1.0
"""How soon a change of only the in-flight call counts is sent (:meth:`StatusReporter.poke_calls`): the
changes of that window go out as one snapshot."""


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def server_status(
    connection: McpConnection, live_calls: int = 0, refusal: Refusal | None = None
) -> broker_pb2.ServerStatus:
    """One connection's ``ServerStatus`` (FAILED with the refusal's cause while the connection is ready
    but the broker refused its registration)."""
    health = connection.health()
    status = broker_pb2.ServerStatus(
        name=connection.name,
        state=STATES[health.state],
        transport=connection.config.transport_name,
        era=connection.config.era.value,
        protocol_version=connection.protocol_version or "",
        tool_count=len(connection.snapshot().tools),
        state_time=timestamp(health.state_time),
        failures=health.failures,
        connection_generation=connection.generation,
        live_calls=live_calls,
    )
    if health.last_error is not None:
        cause = health.last_error
        status.last_error.CopyFrom(
            broker_pb2.ServerError(
                summary=cause.summary,
                causes=list(cause.causes),
                http_status=cause.http_status,
                stderr_tail=list(cause.stderr_tail),
                time=timestamp(health.last_error_time),
            )
        )
    if health.next_retry_time is not None and math.isfinite(health.next_retry_time):
        status.next_retry_time.CopyFrom(timestamp(health.next_retry_time))
    if refusal is not None and health.state is ServerState.READY:
        status.state = broker_pb2.SERVER_STATE_FAILED
        status.last_error.CopyFrom(broker_pb2.ServerError(summary=refusal.cause, time=timestamp(refusal.time)))
        status.ClearField("next_retry_time")
        if refusal.next_retry_time is not None:
            status.next_retry_time.CopyFrom(timestamp(refusal.next_retry_time))
    return status


def reload_problems(problems: Sequence[object]) -> list[str]:
    """A rejected reload's problems as report lines (``maka status``, ``maka reload``): at most
    :data:`MAX_RELOAD_PROBLEMS`, then ``... and N more problems``; each on one line of at most
    :data:`~services.mcp_provider.causes.MAX_LINE_CHARS` without control characters. A config problem
    names paths and what is wrong, never a value (:class:`~services.mcp_provider.config.Problem`), so no
    ``${VAR}`` value can be in it; URL query strings and user info are redacted all the same."""
    lines = [clean_line(str(problem)) for problem in problems[:MAX_RELOAD_PROBLEMS]]
    if len(problems) > MAX_RELOAD_PROBLEMS:
        lines.append(f"... and {len(problems) - MAX_RELOAD_PROBLEMS} more problems")
    return lines


Snapshot = Callable[[], broker_pb2.ReportServersRequest]


class StatusReporter:
    """Keeps one ``ReportServers`` stream open to the broker and sends ``snapshot()`` after every
    :meth:`poke` (coalesced), within :data:`CALLS_REPORT_SECONDS` of a :meth:`poke_calls`, and at least
    every :data:`KEEPALIVE_SECONDS`; reconnects with backoff."""

    def __init__(
        self,
        stub: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
        snapshot: Snapshot,
        *,
        reconnect_initial_seconds: float = 0.5,
        reconnect_max_seconds: float = 30.0,
    ) -> None:
        self._stub = stub
        self._snapshot = snapshot
        self._backoff = reconnect_backoff(reconnect_initial_seconds, reconnect_max_seconds)
        self._changed = asyncio.Event()
        self._calls_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        """Snapshots sent (tests read it)."""

    def poke(self) -> None:
        """Something changed: send a fresh snapshot soon."""
        self._changed.set()

    def poke_calls(self) -> None:
        """Only the in-flight call counts changed: send a snapshot within :data:`CALLS_REPORT_SECONDS`
        (one for every call start and end in that window)."""
        if self._calls_timer is None:
            self._calls_timer = asyncio.get_running_loop().call_later(CALLS_REPORT_SECONDS, self._calls_due)

    def _calls_due(self) -> None:
        self._calls_timer = None
        self._changed.set()

    async def start(self) -> None:
        """Start the reporting task. Returns at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="mcp-status-report")

    async def close(self) -> None:
        """Stop reporting (the broker forgets this provider's servers when the stream ends)."""
        if self._calls_timer is not None:
            self._calls_timer.cancel()
            self._calls_timer = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _snapshots(self) -> AsyncIterator[broker_pb2.ReportServersRequest]:
        while True:
            self._changed.clear()
            if self._calls_timer is not None:  # this snapshot carries the counts too
                self._calls_timer.cancel()
                self._calls_timer = None
            self.sent += 1
            yield self._snapshot()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    await self._changed.wait()

    async def _run(self) -> None:
        retry = self._backoff.attempts()
        while True:
            call = self._stub.ReportServers(self._snapshots())
            try:
                await call
                retry.reset()
            except grpc.aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.UNIMPLEMENTED:
                    log.warning("status_report_unsupported", extra={"code": error.code().name})
                    return
                log.info("status_report_ended", extra={"code": error.code().name})
            finally:
                call.cancel()
            await retry.sleep()  # reconnect backoff, not synchronisation
