"""The Capability broker's records: invocation states, provider streams, registrations, invocations.

Plain data the :class:`~services.broker.broker.Broker` state machine reads and changes (with its
registry, timers and caller attachments beside it); no gRPC service code. :func:`call_summary` is an
invocation's status-only view for activity lists; :func:`mint_id` mints the broker's ids.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from google.protobuf import timestamp_pb2

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.call_log import CallLog


class InvocationState(StrEnum):
    """Where one logical Tool invocation is."""

    RUNNING = "running"
    OPENING = "opening"
    """The provider asked for a form; the Interaction service has not confirmed it yet."""
    AWAITING = "awaiting_interaction"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    STOPPED = "stopped"


TERMINAL = frozenset({InvocationState.SUCCEEDED, InvocationState.FAILED, InvocationState.LOST, InvocationState.STOPPED})


class Notifier:
    """A bounded outgoing queue drained by one stream, with an explicit end."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._maxsize = maxsize
        self.closed = False

    def push(self, item: Any) -> bool:
        """Queue ``item``; False when closed or full (the caller decides what full means)."""
        if self.closed or len(self._items) >= self._maxsize:
            return False
        self._items.append(item)
        self._wake.set()
        return True

    def pop(self) -> Any | None:
        """The oldest queued item, removed; ``None`` when nothing is queued (never waits)."""
        return self._items.popleft() if self._items else None

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def drain(self) -> AsyncIterator[Any]:
        """Yield queued items until closed and empty."""
        while True:
            self._wake.clear()
            while (item := self.pop()) is not None:
                yield item
            if self.closed:
                return
            await self._wake.wait()


@dataclass(eq=False)
class ProviderStream:
    """One provider ``Connect`` stream."""

    connection_id: str
    outbox: Notifier
    registration: Registration | None = None
    last_seen: float = field(default_factory=time.monotonic)

    def frames(self) -> AsyncIterator[broker_pb2.ConnectResponse]:
        """The frames to write to the provider, ending when the broker ends the stream."""
        return self.outbox.drain()


@dataclass(eq=False)
class Registration:
    """A live (or retired) provider registration and the Tools it offers."""

    registration_id: str
    provider_id: str
    display_name: str
    stream: ProviderStream
    tools: dict[str, broker_pb2.ToolDescriptor]
    """Qualified ``SERVER:TOOL`` → descriptor."""
    invocations: dict[str, Invocation] = field(default_factory=lambda: dict[str, "Invocation"]())
    live: bool = True
    sign_in: broker_pb2.SignInStatus | None = None
    """The OAuth sign-in status the provider last published for its server (``sign_in_status``)."""


@dataclass(eq=False)
class Invocation:
    """One logical Tool invocation (possibly several provider legs around nested forms)."""

    invocation_id: str
    session_id: str
    turn_id: str
    tool_use_id: str
    qualified_name: str
    arguments_json: str
    registration: Registration | None
    log: CallLog
    owner: str = ""
    """The principal that started it (only it may reattach)."""
    made_for: interaction_pb2.Person | None = None
    """The person the call is made for, from the caller's authentication (:func:`made_for`); None for machines.
    Every form it opens carries it (``Binding.made_for``)."""
    call_id: str = ""
    state: InvocationState = InvocationState.RUNNING
    terminal: broker_pb2.CallToolResponse | None = None
    timer: asyncio.TimerHandle | None = None
    timer_generation: int = 0
    run_started: float = 0.0
    """Monotonic time the running execution timer was armed."""
    run_spent: float = 0.0
    """Seconds of provider execution (timer running) of earlier legs: the max-total budget's use."""
    correlation_id: str = ""
    interaction_id: str = ""
    late_form_close: interaction_pb2.CloseReason.ValueType = interaction_pb2.CloseReason.CLOSE_REASON_INVOCATION_SETTLED
    """How to close a form whose open completes after the invocation settled (and why an undelivered
    answer was lost)."""
    undelivered: str = ""
    """The answered form whose InteractionResult went to the provider, receipt not yet confirmed."""
    tasks: set[asyncio.Task[Any]] = field(default_factory=lambda: set[asyncio.Task[Any]]())
    interaction_expires_at: timestamp_pb2.Timestamp | None = None
    """When the pending form's bounded wait ends (for ``status`` events)."""
    watchers: int = 0
    """Caller streams following this invocation now (CallTool, WatchCall)."""
    grace: asyncio.TimerHandle | None = None
    """Armed while nobody is attached: stops the invocation when the reattach grace ends."""
    outcome_delivered: bool = False
    """A caller stream has sent the terminal event (what a drain waits for besides settlement)."""
    interaction_ids: list[str] = field(default_factory=lambda: list[str]())
    """Every form this invocation asked for (activity lists)."""
    started_at: float = field(default_factory=time.time)
    ended_at: float = 0.0

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL

    def emit(self, event: broker_pb2.CallToolResponse) -> None:
        """Log a lifecycle event for the caller (never dropped; progress may be). Nothing is logged
        once the invocation settled: its terminal event is the last one."""
        if self.terminal is None:
            self.log.append(event)

    def status(self) -> broker_pb2.CallStatus:
        """The keepalive ``status`` of this invocation now (phase, pending form and its expiry)."""
        status = broker_pb2.CallStatus(
            invocation_id=self.invocation_id, phase=broker_pb2.CALL_PHASE_RUNNING, watchers=self.watchers
        )
        if self.state is InvocationState.AWAITING and self.interaction_id:
            status.phase = broker_pb2.CALL_PHASE_AWAITING_INTERACTION
            status.interaction_id = self.interaction_id
            if self.interaction_expires_at is not None:
                status.interaction_expires_at.CopyFrom(self.interaction_expires_at)
        return status


def mint_id(prefix: str) -> str:
    """A fresh unguessable id the broker mints: ``<prefix>_<random>`` (registrations, connections, invocations)."""
    return f"{prefix}_{secrets.token_urlsafe(12)}"


def _stamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def call_summary(invocation: Invocation) -> broker_pb2.CallSummary:
    """Status only: ids, the Tool name, the state and the failure code; never arguments or results."""
    summary = broker_pb2.CallSummary(
        invocation_id=invocation.invocation_id,
        session_id=invocation.session_id,
        turn_id=invocation.turn_id,
        tool_name=invocation.qualified_name,
        state=invocation.state.value,
        interaction_ids=invocation.interaction_ids,
        start_time=_stamp(invocation.started_at),
    )
    terminal = invocation.terminal
    if terminal is not None:
        kind = terminal.WhichOneof("event")
        if kind == "failure":
            summary.failure_code = terminal.failure.code
        elif kind == "result":
            summary.is_error = terminal.result.is_error
        summary.end_time.CopyFrom(_stamp(invocation.ended_at))
    return summary
