"""The Capability broker's domain: provider registrations, the invocation state machine, timers.

A plain async class with no gRPC in it; :mod:`services.broker.servicer` adapts it. Rules (the
broker issue; RFC "Lifecycle and failure semantics", criteria 7, 8, 10, 16; DESIGN.md §5):

- A provider ``Connection`` registers once; the broker mints the registration and connection ids.
  A registration with the same provider id replaces the old one: every invocation bound to the old
  one settles ``lost`` (its pending form closes ``provider_lost``) and its stream is ended.
- An invocation runs ``RUNNING`` → (``OPENING`` → ``AWAITING`` → ``RUNNING``)* → exactly one
  terminal state: ``SUCCEEDED`` (result), ``FAILED`` (stable ``FailureCode``), ``LOST``, ``STOPPED``.
- The execution timer runs in ``RUNNING``/``OPENING``, is suspended while the canonical form is
  pending (``AWAITING``) and re-armed fresh after the form settled with an answer.
- A provider frame is accepted only for a live invocation of its own connection; anything else
  is answered with ``FrameRejected`` (counted in :meth:`Broker.stats`) and changes nothing.
- Every terminal transition closes the invocation's pending form (with the reason of the
  transition) so no form is orphaned, and no answer is delivered after it.
- The caller's side (docs/clients.md): every event goes to the invocation's sequenced
  :class:`~services.broker.call_log.CallLog`, which any number of streams follow (``CallTool``,
  ``WatchCall``) with ``status`` keepalives. The last stream ending without the outcome starts the
  reattach grace; when it runs out with nobody attached the invocation is stopped as Stop is. A
  settled invocation stays reattachable for the grace; ``call_id`` maps to it for the same time.

How a settled form (HostLink ``settled``) is delivered — only to the bound invocation, registration
and connection, and only while that invocation still awaits it:

- answered → provider: ``InteractionResult(answer, correlation id echoed)``; caller:
  ``interaction_settled(action)``; a fresh execution timer.
- timed_out / lease_expired / round_expired → caller: failure INTERACTION_TIMED_OUT; provider:
  ``InteractionResult(close_reason)`` then ``cancel``. host_restarted / superseded / other →
  the same with INTERACTION_CLOSED. stopped (closed by someone else) → caller: ``stopped``.
- Closes the broker makes itself — Stop and no caller reattached within the grace (``stopped``),
  provider loss or replacement (``provider_lost``), a final result / failure / execution timeout while pending
  (``invocation_settled``), a Tool refresh (``superseded``), shutdown (``stopped``) — deliver no
  interaction result to the provider afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from google.protobuf import duration_pb2, timestamp_pb2

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.arguments import argument_problems
from services.broker.call_log import CallLog, parse_resume_token
from services.broker.errors import (
    DOMAIN,
    CallNotFound,
    FrameRejection,
    HostUnavailable,
    InvalidRequest,
    NotPermitted,
    OpenRefused,
)
from services.broker.servers import ServerTable, unavailable_message
from services.core import metrics
from services.core.status import NotFound

log = logging.getLogger("maka.broker.broker")

FC = broker_pb2.FailureCode
RR = broker_pb2.RejectReason
CR = interaction_pb2.CloseReason
SIS = broker_pb2.SignInState

MAX_ID_CHARS = 256
MAX_AUTHORIZATION_URL_CHARS = 8192
"""Cap of a published OAuth authorization URL."""
"""Longest session, turn, tool-use, provider or Tool id accepted (code points)."""
MAX_MESSAGE_CHARS = 2000
"""Provider failure / progress messages are cut to this many code points."""
RECENT_CALLS = 200
"""Settled invocations kept for activity lists (``GetStatus.recent_calls``)."""
SETTLED_MEMORY = 4096
"""How many settled invocation ids are remembered to tell late frames from unknown ones."""


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


class InteractionHost(Protocol):
    """What the broker needs from the Interaction service (implemented by ``HostLink``)."""

    async def open(
        self,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait_seconds: float,
        round_info: interaction_pb2.Round | None = None,
    ) -> interaction_pb2.Interaction: ...

    async def close_durably(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> Any:
        """Close a form; return once the service answered (an ``InteractionClosed``), or None when that can
        no longer happen because a newer Host epoch fenced this one (or the broker stops)."""
        ...

    async def close_invocation_durably(self, invocation_id: str, reason: interaction_pb2.CloseReason.ValueType) -> Any:
        """Close whatever form is pending for the invocation and fence it against a late open; like
        :meth:`close_durably`."""
        ...

    async def report_delivery(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = ...,
    ) -> object:
        """Record whether an answer reached its provider; retried like :meth:`close_durably`."""
        ...


class _Notifier:
    """A bounded outgoing queue drained by one stream, with an explicit end."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._maxsize = maxsize
        self.closed = False

    def push(self, item: Any, *, force: bool = False) -> bool:
        """Queue ``item``; False when closed or full (the caller decides what full means).

        ``force`` bypasses the bound for lifecycle events that must never be dropped (there are
        few of them per invocation: accepted, one awaiting/settled pair per bounded round).
        """
        if self.closed or (len(self._items) >= self._maxsize and not force):
            return False
        self._items.append(item)
        self._wake.set()
        return True

    def full(self) -> bool:
        return len(self._items) >= self._maxsize

    def drop_oldest(self) -> None:
        if self._items:
            self._items.popleft()

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
class Connection:
    """One provider ``Connect`` stream."""

    connection_id: str
    outbox: _Notifier
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
    connection: Connection
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
    late_form_close: interaction_pb2.CloseReason.ValueType = CR.CLOSE_REASON_INVOCATION_SETTLED
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


class Broker:
    """Registrations, invocations and nested forms of one Runtime Host.

    Args:
        host: the Interaction service link (``HostLink``) used to open and close forms.
        execution_timeout: provider execution budget of one leg, seconds; progress re-arms it.
        max_execution_seconds: most provider execution (outside forms) of one invocation, however
            often progress re-arms the timer; 0 = progress does not re-arm.
        heartbeat_seconds: provider heartbeat interval; a provider silent for 3x is lost.
        form_wait_seconds: bounded wait asked for each form (0 = Interaction service default).
        max_invocations_per_provider: live invocations per registration before RESOURCE_EXHAUSTED.
        queue_size: bound of each provider stream queue, and of the progress events each invocation's
            event log retains.
        call_keepalive_seconds: a caller stream silent this long gets a ``status`` event.
        reattach_grace_seconds: how long an invocation with no caller attached keeps running before
            it is stopped exactly as Stop; also how long a settled one stays reattachable.
    """

    def __init__(
        self,
        host: InteractionHost,
        *,
        execution_timeout: float = 120.0,
        max_execution_seconds: float = 0.0,
        heartbeat_seconds: float = 5.0,
        form_wait_seconds: float = 0.0,
        max_invocations_per_provider: int = 256,
        queue_size: int = 256,
        call_keepalive_seconds: float = 15.0,
        reattach_grace_seconds: float = 30.0,
    ) -> None:
        self._host = host
        self._execution_timeout = execution_timeout
        self._max_execution = max_execution_seconds
        self.servers = ServerTable()
        self._recent: deque[Invocation] = deque(maxlen=RECENT_CALLS)
        """What providers report of their MCP servers (``ReportServers``)."""
        self._heartbeat_seconds = heartbeat_seconds
        self._form_wait = form_wait_seconds
        self._max_invocations = max_invocations_per_provider
        self._queue_size = queue_size
        self._keepalive = call_keepalive_seconds
        self._reattach_grace = reattach_grace_seconds
        self._retained: OrderedDict[str, tuple[float, Invocation]] = OrderedDict()
        """settled invocations still reattachable: id → (monotonic deadline, invocation)."""
        self._by_call_id: dict[tuple[str, str, str], Invocation] = {}
        """(owner, session id, call id) → live or retained invocation (idempotent start)."""
        self._registrations: dict[str, Registration] = {}
        """provider id → live registration."""
        self._tools: dict[str, Registration] = {}
        """qualified Tool name → live registration serving it (the latest to claim it)."""
        self._invocations: dict[str, Invocation] = {}
        """live invocations by id."""
        self._by_interaction: dict[str, Invocation] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()
        """recently settled invocation id → connection id."""
        self._early_settled: OrderedDict[str, interaction_pb2.Interaction] = OrderedDict()
        self._connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._counters: Counter[str] = Counter()
        self._liveness: asyncio.Task[None] | None = None
        self._shutting_down = False
        self._draining = False
        self._idle = asyncio.Event()
        """Set whenever no invocation is live (what :meth:`drain` waits for)."""
        self._idle.set()

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the provider liveness sweep."""
        self._liveness = asyncio.create_task(self._sweep_liveness(), name="maka-broker-liveness")

    async def drain(self, timeout: float) -> int:
        """Stop accepting calls and give the live ones up to ``timeout`` s to finish.

        From now on every new ``CallTool`` fails ``HOST_UNAVAILABLE`` ("draining"); calls in flight,
        their forms and their provider legs go on untouched. Returns how many invocations are still
        live when the wait ends (:meth:`shutdown` then settles them by the usual rules). A rolling
        update calls this between NOT_SERVING and :meth:`shutdown` (docs/design.md §8).
        """
        self._draining = True
        live = len(self._invocations)
        if live and timeout > 0:
            log.info("broker_draining", extra={"live_invocations": live, "drain_seconds": timeout})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._idle.wait()
        left = len(self._invocations)
        log.info("broker_drained", extra={"finished": live - left, "live_invocations": left})
        return left

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Graceful stop: live invocations settle ``lost``, pending forms close ``stopped``,
        providers get ``cancel`` and their streams end; waits up to ``timeout`` s for the closes."""
        self._shutting_down = True
        if self._liveness is not None:
            self._liveness.cancel()
        for invocation in list(self._invocations.values()):
            invocation.late_form_close = CR.CLOSE_REASON_STOPPED
            self._settle(
                invocation,
                InvocationState.LOST,
                broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason="the broker is shutting down")),
                form_close=CR.CLOSE_REASON_STOPPED,
                cancel_reason="broker shutting down",
            )
        for connection in list(self._connections):
            connection.outbox.close()
        await self._wait(self._tasks, timeout)

    # --- stats ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters (monotonic) and gauges: ``rejected_frames``, ``rejected_frames.<REASON>``,
        ``invocations_started``, ``invocations.<outcome>``, ``registrations``, ``replacements``,
        ``interactions_opened``, ``live_invocations``, ``live_registrations``, ``pending_forms``."""
        out = dict(self._counters)
        out["live_invocations"] = len(self._invocations)
        out["live_registrations"] = len(self._registrations)
        out["pending_forms"] = len(self._by_interaction)
        return out

    def recent_calls(self, visible: Callable[[str], bool], limit: int = 50) -> list[broker_pb2.CallSummary]:
        """Live then recently settled invocations of sessions ``visible`` accepts, newest first."""
        live = sorted(self._invocations.values(), key=lambda i: i.started_at, reverse=True)
        out: list[broker_pb2.CallSummary] = []
        for invocation in [*live, *self._recent]:
            if len(out) >= limit:
                break
            if visible(invocation.session_id):
                out.append(_summary(invocation))
        return out

    def status(self, visible: Callable[[str], bool] = lambda _session: True) -> broker_pb2.GetStatusResponse:
        """Every reported MCP server, the reporters, the broker's own gauges and the recent calls of the
        sessions ``visible`` accepts (``GetStatus``)."""
        return broker_pb2.GetStatusResponse(
            recent_calls=self.recent_calls(visible),
            servers=self.servers.servers(),
            reporters=self.servers.reporters(),
            live_invocations=len(self._invocations),
            live_registrations=len(self._registrations),
            pending_forms=len(self._by_interaction),
        )

    def live_invocations(self) -> list[Invocation]:
        """The live (not terminal) invocations."""
        return list(self._invocations.values())

    def awaiting_interaction_ids(self) -> list[str]:
        """Canonical ids of the forms the broker waits on (HostLink resume ``watched`` ids)."""
        return list(self._by_interaction)

    # --- provider connections -------------------------------------------------------------------

    def open_connection(self) -> Connection:
        """A new provider stream; the broker mints its connection id."""
        connection = Connection(connection_id=_mint("conn"), outbox=_Notifier(self._queue_size))
        self._connections.add(connection)
        if self._shutting_down:
            connection.outbox.close()
        return connection

    def connection_lost(self, connection: Connection) -> None:
        """The provider's stream ended (EOF, cancellation, transport failure): its live
        registration is retired, its invocations settle ``lost``, pending forms close ``provider_lost``."""
        self._connections.discard(connection)
        connection.outbox.close()
        registration = connection.registration
        if registration is not None and registration.live:
            self._retire(registration, "provider disconnected")

    def handle_frame(self, connection: Connection, request: broker_pb2.ConnectRequest) -> None:
        """Apply one provider frame. A refused frame is answered with ``FrameRejected`` on the same
        stream and counted; it never ends the stream and changes nothing else."""
        connection.last_seen = time.monotonic()
        try:
            self._apply(connection, request)
        except FrameRejection as rejection:
            self._counters["rejected_frames"] += 1
            self._counters[f"rejected_frames.{RR.Name(rejection.reason).removeprefix('REJECT_REASON_')}"] += 1
            metrics.FRAMES_REJECTED.labels(RR.Name(rejection.reason).removeprefix("REJECT_REASON_")).inc()
            log.info(
                "frame_rejected",
                extra={
                    "connection_id": connection.connection_id,
                    "invocation_id": rejection.invocation_id,
                    "reject_reason": RR.Name(rejection.reason),
                },
            )
            self._send(connection, rejection.to_frame())

    def _apply(self, connection: Connection, request: broker_pb2.ConnectRequest) -> None:
        kind = request.WhichOneof("frame")
        if kind == "register":
            self._register(connection, request.register)
            return
        registration = connection.registration
        if registration is None or not registration.live:
            raise FrameRejection(RR.REJECT_REASON_NOT_REGISTERED, "", "register first")
        if kind == "heartbeat":
            return
        if kind == "tools_changed":
            self._tools_changed(registration, request.tools_changed.tools)
        elif kind == "sign_in_status":
            self._sign_in_status(registration, request.sign_in_status)
        elif kind == "progress":
            self._progress(connection, request.progress)
        elif kind == "interaction_request":
            self._interaction_request(connection, request.interaction_request)
        elif kind == "interaction_received":
            self._interaction_received(connection, request.interaction_received)
        elif kind == "result":
            self._result(connection, request.result)
        elif kind == "failure":
            self._failure(connection, request.failure)
        else:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, "", "empty or unknown frame")

    def _register(self, connection: Connection, register: broker_pb2.Register) -> None:
        if connection.registration is not None:
            raise FrameRejection(RR.REJECT_REASON_ALREADY_REGISTERED, "", "this stream is already registered")
        if self._shutting_down:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, "", "the broker is shutting down")
        problem = _check_id("provider_id", register.provider_id)
        tools: dict[str, broker_pb2.ToolDescriptor] = {}
        if problem is None:
            tools, problem = _check_tools(register.tools)
        if problem is not None:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, "", problem)
        old = self._registrations.get(register.provider_id)
        if old is not None:
            self._counters["replacements"] += 1
            self._retire(old, "provider registration replaced")
            old.connection.outbox.close()
        registration = Registration(
            registration_id=_mint("reg"),
            provider_id=register.provider_id,
            display_name=register.display_name[:MAX_ID_CHARS] or register.provider_id,
            connection=connection,
            tools=tools,
        )
        connection.registration = registration
        self._registrations[registration.provider_id] = registration
        for name in tools:
            self._tools[name] = registration
        self._counters["registrations"] += 1
        log.info(
            "provider_registered",
            extra={
                "provider_id": registration.provider_id,
                "registration_id": registration.registration_id,
                "connection_id": connection.connection_id,
                "tools": len(tools),
            },
        )
        interval = duration_pb2.Duration()
        interval.FromNanoseconds(int(self._heartbeat_seconds * 1e9))
        self._send(
            connection,
            broker_pb2.ConnectResponse(
                registered=broker_pb2.Registered(
                    registration_id=registration.registration_id,
                    connection_id=connection.connection_id,
                    heartbeat_interval=interval,
                )
            ),
        )

    def _tools_changed(self, registration: Registration, descriptors: Iterable[broker_pb2.ToolDescriptor]) -> None:
        tools, problem = _check_tools(descriptors)
        if problem is not None:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, "", problem)
        for name in registration.tools:
            if self._tools.get(name) is registration:
                del self._tools[name]
        changed = {n for n, d in registration.tools.items() if tools.get(n) != d}
        registration.tools = tools
        for name in tools:
            self._tools[name] = registration
        for invocation in list(registration.invocations.values()):
            if invocation.qualified_name in changed:
                self._settle(
                    invocation,
                    InvocationState.LOST,
                    broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason="the Tool binding changed")),
                    form_close=CR.CLOSE_REASON_SUPERSEDED,
                    cancel_reason="tool binding changed",
                )

    def _sign_in_status(self, registration: Registration, status: broker_pb2.SignInStatus) -> None:
        problem = _check_id("server", status.server)
        if problem is None and ":" in status.server:
            problem = "server must not contain ':'"
        if problem is None and len(status.authorization_url) > MAX_AUTHORIZATION_URL_CHARS:
            problem = "authorization_url is too long"
        if problem is None and (status.state == SIS.SIGN_IN_STATE_REQUIRED) != bool(status.authorization_url):
            problem = "authorization_url is required with SIGN_IN_STATE_REQUIRED and only then"
        if problem is not None:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, "", problem)
        registration.sign_in = status if status.state != SIS.SIGN_IN_STATE_UNSPECIFIED else None
        log.info(
            "sign_in_status",
            extra={
                "provider_id": registration.provider_id,
                "server": status.server,
                "sign_in_state": SIS.Name(status.state),
            },
        )

    def list_sign_ins(self) -> list[broker_pb2.SignInStatus]:
        """The sign-in status every live registration published, sorted by server (never a token)."""
        found = [r.sign_in for r in self._registrations.values() if r.live and r.sign_in is not None]
        return sorted(found, key=lambda status: status.server)

    def complete_sign_in(self, request: broker_pb2.CompleteSignInRequest) -> str:
        """Forward an OAuth redirect to the provider whose pending sign-in minted ``request.state``.

        Returns the server name. Raises :class:`NotFound` ``NOT_FOUND`` when no pending sign-in has
        that state (a stale, replayed or forged redirect: nothing is forwarded).
        """
        for registration in self._registrations.values():
            status = registration.sign_in
            if not registration.live or status is None or status.state != SIS.SIGN_IN_STATE_REQUIRED:
                continue
            states = parse_qs(urlsplit(status.authorization_url).query).get("state", [])
            if request.state and states and secrets.compare_digest(states[0], request.state):
                callback = broker_pb2.SignInCallback(
                    server=status.server,
                    code=request.code,
                    state=request.state,
                    iss=request.iss,
                    error=request.error,
                )
                self._send(registration.connection, broker_pb2.ConnectResponse(sign_in_callback=callback))
                log.info("sign_in_forwarded", extra={"provider_id": registration.provider_id, "server": status.server})
                return status.server
        raise NotFound("NOT_FOUND", "no pending sign-in matches this redirect", domain=DOMAIN)

    def sign_out(self, server: str) -> None:
        """Ask the provider of ``server`` to forget its tokens. Raises :class:`NotFound` ``NOT_FOUND``."""
        for registration in self._registrations.values():
            if registration.live and registration.sign_in is not None and registration.sign_in.server == server:
                self._send(
                    registration.connection,
                    broker_pb2.ConnectResponse(sign_out=broker_pb2.SignOutRequest(server=server)),
                )
                return
        raise NotFound("NOT_FOUND", f"no provider reported a sign-in for {server}", domain=DOMAIN)

    def _sign_in_hint(self, server: str) -> str | None:
        for registration in self._registrations.values():
            status = registration.sign_in
            if (
                registration.live
                and status is not None
                and status.server == server
                and status.state == SIS.SIGN_IN_STATE_REQUIRED
            ):
                return f"sign in to {server} first: open {status.authorization_url} (or run `maka auth login {server}`)"
        return None

    def _retire(self, registration: Registration, reason: str) -> None:
        registration.live = False
        if self._registrations.get(registration.provider_id) is registration:
            del self._registrations[registration.provider_id]
        for name in registration.tools:
            if self._tools.get(name) is registration:
                del self._tools[name]
        for other in self._registrations.values():
            for name in other.tools:
                self._tools.setdefault(name, other)
        for invocation in list(registration.invocations.values()):
            invocation.late_form_close = CR.CLOSE_REASON_PROVIDER_LOST
            self._settle(
                invocation,
                InvocationState.LOST,
                broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason=reason)),
                form_close=CR.CLOSE_REASON_PROVIDER_LOST,
                cancel_reason=reason,
            )
        log.info(
            "provider_retired",
            extra={"provider_id": registration.provider_id, "registration_id": registration.registration_id},
        )

    def _send(self, connection: Connection, frame: broker_pb2.ConnectResponse) -> None:
        if connection.outbox.push(frame) or connection.outbox.closed:
            return
        # The provider does not read its stream: treat it as lost rather than buffer without bound.
        self._counters["provider_queue_overflows"] += 1
        connection.outbox.close()
        registration = connection.registration
        if registration is not None and registration.live:
            asyncio.get_running_loop().call_soon(self._retire_if_live, registration, "provider stream overflowed")

    def _retire_if_live(self, registration: Registration, reason: str) -> None:
        if registration.live:
            self._retire(registration, reason)

    async def _sweep_liveness(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            deadline = time.monotonic() - 3 * self._heartbeat_seconds
            for registration in list(self._registrations.values()):
                if registration.connection.last_seen < deadline:
                    self._counters["providers_timed_out"] += 1
                    self._retire(registration, "provider heartbeat missed")
                    registration.connection.outbox.close()

    # --- provider frames for invocations --------------------------------------------------------

    def _owned(self, connection: Connection, invocation_id: str) -> Invocation:
        """The live invocation ``invocation_id`` of this connection, or a FrameRejection."""
        invocation = self._invocations.get(invocation_id)
        registration = connection.registration
        if invocation is None:
            owner = self._settled.get(invocation_id)
            if owner is None:
                raise FrameRejection(RR.REJECT_REASON_UNKNOWN_INVOCATION, invocation_id, "no such invocation")
            if owner != connection.connection_id:
                raise FrameRejection(RR.REJECT_REASON_CROSS_CONNECTION, invocation_id, "not this connection's")
            raise FrameRejection(RR.REJECT_REASON_INVOCATION_SETTLED, invocation_id, "the invocation already settled")
        if invocation.registration is not registration or registration is None:
            raise FrameRejection(RR.REJECT_REASON_CROSS_CONNECTION, invocation_id, "not this connection's")
        return invocation

    def _progress(self, connection: Connection, frame: broker_pb2.InvocationProgress) -> None:
        invocation = self._owned(connection, frame.invocation_id)
        event = broker_pb2.CallProgress(progress=frame.progress, message=frame.message[:MAX_MESSAGE_CHARS])
        if frame.HasField("total"):
            event.total = frame.total
        if invocation.state is InvocationState.RUNNING and self._max_execution > 0:
            self._rearm_on_progress(invocation)
        dropped = invocation.log.dropped_progress
        invocation.log.append(broker_pb2.CallToolResponse(progress=event))  # the oldest progress may drop
        self._counters["progress_dropped"] += invocation.log.dropped_progress - dropped

    def _interaction_received(self, connection: Connection, frame: broker_pb2.InteractionReceived) -> None:
        invocation = self._owned(connection, frame.invocation_id)
        if not frame.interaction_id or frame.interaction_id != invocation.undelivered:
            raise FrameRejection(
                RR.REJECT_REASON_NO_INTERACTION_PENDING, invocation.invocation_id, "no answer awaits confirmation"
            )
        self._delivered(invocation)

    def _delivered(self, invocation: Invocation) -> None:
        """The provider has the answer (it confirmed it, or sent a later frame of the invocation):
        record it delivered (docs/security.md "No answer after settlement")."""
        if invocation.undelivered:
            interaction_id, invocation.undelivered = invocation.undelivered, ""
            self._spawn(invocation, self._report_delivery(interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED))

    async def _report_delivery(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = CR.CLOSE_REASON_UNSPECIFIED,
    ) -> None:
        recorded = await self._host.report_delivery(interaction_id, delivery, lost_reason)
        if recorded is None:  # fenced by a newer epoch, which records it lost (host_restarted)
            log.warning("delivery_report_dropped", extra={"interaction_id": interaction_id})

    def _interaction_request(self, connection: Connection, frame: broker_pb2.InteractionRequest) -> None:
        invocation = self._owned(connection, frame.invocation_id)
        self._delivered(invocation)
        if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
            raise FrameRejection(
                RR.REJECT_REASON_INTERACTION_ALREADY_PENDING, invocation.invocation_id, "a form is already pending"
            )
        if not frame.HasField("form"):
            # A field-less form is a valid confirmation; the Interaction service checks the rest.
            raise FrameRejection(RR.REJECT_REASON_INVALID_FORM, invocation.invocation_id, "the request has no form")
        if len(frame.correlation_id) > MAX_ID_CHARS:
            raise FrameRejection(RR.REJECT_REASON_INVALID_FRAME, invocation.invocation_id, "correlation id too long")
        registration = connection.registration
        assert registration is not None
        form = form_pb2.Form()
        form.CopyFrom(frame.form)
        _, _, bare = invocation.qualified_name.partition(":")
        claimed_server = form.requester.claimed_server or invocation.qualified_name.partition(":")[0]
        claimed_tool = form.requester.claimed_tool or bare
        form.requester.CopyFrom(
            form_pb2.Requester(
                provider_id=registration.provider_id,
                provider_display_name=registration.display_name,
                claimed_server=claimed_server[:MAX_ID_CHARS],
                claimed_tool=claimed_tool[:MAX_ID_CHARS],
            )
        )
        binding = interaction_pb2.Binding(
            session_id=invocation.session_id,
            turn_id=invocation.turn_id,
            tool_use_id=invocation.tool_use_id,
            invocation_id=invocation.invocation_id,
            registration_id=registration.registration_id,
            connection_id=connection.connection_id,
            provider_correlation_id=frame.correlation_id,
            tool_name=invocation.qualified_name,
        )
        invocation.state = InvocationState.OPENING
        invocation.correlation_id = frame.correlation_id
        round_info = frame.round if frame.HasField("round") else None
        self._spawn(invocation, self._open(invocation, binding, form, round_info))

    async def _open(
        self,
        invocation: Invocation,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        round_info: interaction_pb2.Round | None = None,
    ) -> None:
        try:
            interaction = await self._host.open(binding, form, self._form_wait, round_info)
        except OpenRefused as refused:
            if invocation.state is not InvocationState.OPENING:
                return
            registration = invocation.registration
            if refused.reason in ("INVALID_FORM", "INVALID_REQUEST", "LIMIT_EXCEEDED"):
                invocation.state = InvocationState.RUNNING
                self._counters["rejected_frames"] += 1
                self._counters["rejected_frames.INVALID_FORM"] += 1
                metrics.FRAMES_REJECTED.labels("INVALID_FORM").inc()
                if registration is not None:
                    rejection = FrameRejection(
                        RR.REJECT_REASON_INVALID_FORM,
                        invocation.invocation_id,
                        f"{refused.reason}: {refused.message}"[:MAX_MESSAGE_CHARS],
                    )
                    self._send(registration.connection, rejection.to_frame())
                return
            code = FC.FAILURE_CODE_HOST_UNAVAILABLE
            if refused.reason == "STALE_EPOCH":
                code = FC.FAILURE_CODE_INTERACTION_CLOSED
            self._fail(invocation, code, f"the Interaction service refused the form: {refused.reason}")
            return
        except HostUnavailable as error:
            if invocation.state is InvocationState.OPENING:
                self._fail(invocation, FC.FAILURE_CODE_HOST_UNAVAILABLE, error.message)
            # The open's outcome is unknown (its reply may have been lost with the link): close
            # whatever form it made and fence the invocation against it before the terminal event
            # (this task is part of the settle barrier).
            closed = await self._host.close_invocation_durably(invocation.invocation_id, invocation.late_form_close)
            await self._after_close(closed, invocation.late_form_close)
            return
        interaction_id = interaction.interaction_id
        self._counters["interactions_opened"] += 1
        if invocation.state is not InvocationState.OPENING:
            # Settled while the open was in flight: never leave the form orphaned. The terminal
            # event waits for this task (see _settle), so it follows the durable close.
            await self._close_form(interaction_id, invocation.late_form_close)
            return
        invocation.state = InvocationState.AWAITING
        invocation.interaction_id = interaction_id
        invocation.interaction_expires_at = interaction.expires_at if interaction.HasField("expires_at") else None
        invocation.interaction_ids.append(interaction_id)
        self._disarm(invocation)
        self._by_interaction[interaction_id] = invocation
        awaiting = broker_pb2.AwaitingInteraction(
            interaction_id=interaction_id,
            message=interaction.form.message[:MAX_MESSAGE_CHARS],
            field_count=len(interaction.form.fields),
        )
        if invocation.interaction_expires_at is not None:
            awaiting.expires_at.CopyFrom(invocation.interaction_expires_at)
        invocation.emit(broker_pb2.CallToolResponse(awaiting_interaction=awaiting))
        log.info(
            "awaiting_interaction",
            extra={"invocation_id": invocation.invocation_id, "interaction_id": interaction_id},
        )
        early = self._early_settled.pop(interaction_id, None)
        if early is not None:
            self.interaction_settled(early)

    def _result(self, connection: Connection, frame: broker_pb2.InvocationResult) -> None:
        invocation = self._owned(connection, frame.invocation_id)
        self._delivered(invocation)
        if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
            self._fail(
                invocation,
                FC.FAILURE_CODE_INCONSISTENT_PROVIDER,
                "the provider returned a final result while its form was pending",
                form_close=CR.CLOSE_REASON_INVOCATION_SETTLED,
                cancel=False,
            )
            return
        try:
            result = json.loads(frame.call_tool_result_json)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            raise FrameRejection(
                RR.REJECT_REASON_INVALID_FRAME, invocation.invocation_id, "call_tool_result_json is not a JSON object"
            )
        self._settle(
            invocation,
            InvocationState.SUCCEEDED,
            broker_pb2.CallToolResponse(
                result=broker_pb2.CallResult(
                    call_tool_result_json=frame.call_tool_result_json, is_error=result.get("isError") is True
                )
            ),
            form_close=None,
            cancel_reason=None,
        )

    def _failure(self, connection: Connection, frame: broker_pb2.InvocationFailure) -> None:
        invocation = self._owned(connection, frame.invocation_id)
        self._delivered(invocation)
        code = frame.code if frame.code != FC.FAILURE_CODE_UNSPECIFIED else FC.FAILURE_CODE_PROVIDER_ERROR
        self._fail(
            invocation,
            code,
            frame.message[:MAX_MESSAGE_CHARS],
            form_close=CR.CLOSE_REASON_INVOCATION_SETTLED,
            cancel=False,
        )

    # --- the Interaction service's side ---------------------------------------------------------

    def interaction_settled(self, interaction: interaction_pb2.Interaction) -> None:
        """A form stopped being pending (HostLink ``settled``). Delivered only to the exact
        invocation, registration and connection it was bound to, and only while it awaits it."""
        interaction_id = interaction.interaction_id
        invocation = self._by_interaction.get(interaction_id)
        if invocation is None:
            if interaction.binding.invocation_id in self._invocations:
                pending = self._invocations[interaction.binding.invocation_id]
                if pending.state is InvocationState.OPENING:
                    self._early_settled[interaction_id] = interaction
                    while len(self._early_settled) > SETTLED_MEMORY:
                        self._early_settled.popitem(last=False)
            return
        registration = invocation.registration
        binding = interaction.binding
        if (
            invocation.state is not InvocationState.AWAITING
            or registration is None
            or not registration.live
            or binding.invocation_id != invocation.invocation_id
            or binding.registration_id != registration.registration_id
            or binding.connection_id != registration.connection.connection_id
        ):
            self._counters["settlements_ignored"] += 1
            return
        del self._by_interaction[interaction_id]
        invocation.interaction_id = ""
        invocation.interaction_expires_at = None
        connection = registration.connection
        if interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
            invocation.state = InvocationState.RUNNING
            invocation.emit(
                broker_pb2.CallToolResponse(
                    interaction_settled=broker_pb2.InteractionSettledEvent(
                        interaction_id=interaction_id,
                        action=interaction.answer.action,
                        close_reason=CR.CLOSE_REASON_ANSWERED,
                    )
                )
            )
            invocation.undelivered = interaction_id
            self._send(
                connection,
                broker_pb2.ConnectResponse(
                    interaction_result=broker_pb2.InteractionResult(
                        invocation_id=invocation.invocation_id,
                        correlation_id=invocation.correlation_id,
                        interaction_id=interaction_id,
                        answer=interaction.answer,
                        close_reason=CR.CLOSE_REASON_ANSWERED,
                    )
                ),
            )
            self._arm(invocation)
            return
        reason = interaction.close_reason
        invocation.emit(
            broker_pb2.CallToolResponse(
                interaction_settled=broker_pb2.InteractionSettledEvent(
                    interaction_id=interaction_id, close_reason=reason
                )
            )
        )
        self._send(
            connection,
            broker_pb2.ConnectResponse(
                interaction_result=broker_pb2.InteractionResult(
                    invocation_id=invocation.invocation_id,
                    correlation_id=invocation.correlation_id,
                    interaction_id=interaction_id,
                    close_reason=reason,
                )
            ),
        )
        if reason == CR.CLOSE_REASON_STOPPED:
            self._settle(
                invocation,
                InvocationState.STOPPED,
                broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
                form_close=None,
                cancel_reason="interaction stopped",
            )
            return
        code = (
            FC.FAILURE_CODE_INTERACTION_TIMED_OUT
            if reason in (CR.CLOSE_REASON_TIMED_OUT, CR.CLOSE_REASON_LEASE_EXPIRED, CR.CLOSE_REASON_ROUND_EXPIRED)
            else FC.FAILURE_CODE_INTERACTION_CLOSED
        )
        why = CR.Name(reason).removeprefix("CLOSE_REASON_").lower()
        if reason == CR.CLOSE_REASON_ROUND_EXPIRED:
            why += " (the server's requestState for this round expired before every form was answered)"
        self._fail(invocation, code, f"the form closed: {why}")

    def host_stale(self) -> None:
        """The HostLink resume was refused as stale: fail every form-bound invocation closed."""
        for invocation in list(self._invocations.values()):
            if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
                self._by_interaction.pop(invocation.interaction_id, None)
                invocation.interaction_id = ""
                self._fail(invocation, FC.FAILURE_CODE_INTERACTION_CLOSED, "the Host epoch ended")

    # --- the caller's side ----------------------------------------------------------------------

    def call_tool(self, request: broker_pb2.CallToolRequest, owner: str = "") -> Invocation:
        """Start one invocation for principal ``owner`` and return it (follow it with :meth:`follow`).

        A malformed request (ids empty or over 256 code points, arguments not a JSON object, a
        live duplicate tool-use id in the session, a ``call_id`` reused for a different request) or
        an unknown Tool yields an invocation whose only event is ``failure`` (FAILURE_CODE_INVALID_REQUEST
        / UNKNOWN_TOOL / RESOURCE_EXHAUSTED / HOST_UNAVAILABLE when shutting down). A ``call_id``
        that names a live or retained invocation of ``owner`` in the session returns that one
        (idempotent start). Otherwise events start with ``accepted`` and end with exactly one of
        result, failure, lost, stopped.
        """
        invocation = Invocation(
            invocation_id=_mint("inv"),
            session_id=request.session_id,
            turn_id=request.turn_id,
            tool_use_id=request.tool_use_id,
            qualified_name=request.tool_name,
            arguments_json=request.arguments_json or "{}",
            registration=None,
            log=CallLog(self._queue_size),
            owner=owner,
            call_id=request.call_id,
        )
        self._prune_retained()
        key = (owner, request.session_id, request.call_id)
        existing = self._by_call_id.get(key) if request.call_id else None
        if existing is not None:
            if (
                existing.qualified_name != invocation.qualified_name
                or existing.arguments_json != invocation.arguments_json
                or existing.turn_id != invocation.turn_id
            ):
                self._settle(
                    invocation,
                    InvocationState.FAILED,
                    _failure(FC.FAILURE_CODE_INVALID_REQUEST, "call_id was already used for a different request"),
                )
                return invocation
            self._counters["calls_reattached_by_call_id"] += 1
            return existing
        self._counters["invocations_started"] += 1
        try:
            registration = self._route(request, invocation.arguments_json)
        except InvalidRequest as error:
            self._settle(invocation, InvocationState.FAILED, _failure(FC.FAILURE_CODE_INVALID_REQUEST, error.message))
            return invocation
        except _Refused as refused:
            self._settle(invocation, InvocationState.FAILED, _failure(refused.code, refused.message))
            return invocation
        invocation.registration = registration
        registration.invocations[invocation.invocation_id] = invocation
        self._invocations[invocation.invocation_id] = invocation
        if request.call_id:
            self._by_call_id[key] = invocation
        self._idle.clear()
        invocation.emit(
            broker_pb2.CallToolResponse(
                accepted=broker_pb2.CallAccepted(
                    invocation_id=invocation.invocation_id, provider_id=registration.provider_id
                )
            )
        )
        timeout = duration_pb2.Duration()
        timeout.FromNanoseconds(int(self._execution_timeout * 1e9))
        _, _, bare = invocation.qualified_name.partition(":")
        self._arm(invocation)
        log.info(
            "invocation_started",
            extra={
                "invocation_id": invocation.invocation_id,
                "session_id": invocation.session_id,
                "turn_id": invocation.turn_id,
                "tool": invocation.qualified_name,
                "provider_id": registration.provider_id,
            },
        )
        self._send(
            registration.connection,
            broker_pb2.ConnectResponse(
                invoke=broker_pb2.Invoke(
                    invocation_id=invocation.invocation_id,
                    tool_name=bare,
                    arguments_json=invocation.arguments_json,
                    execution_timeout=timeout,
                )
            ),
        )
        return invocation

    def _route(self, request: broker_pb2.CallToolRequest, arguments_json: str) -> Registration:
        for name, value in (
            ("session_id", request.session_id),
            ("turn_id", request.turn_id),
            ("tool_use_id", request.tool_use_id),
            ("tool_name", request.tool_name),
        ):
            problem = _check_id(name, value)
            if problem is not None:
                raise InvalidRequest(problem)
        if request.call_id:
            problem = _check_id("call_id", request.call_id)
            if problem is not None:
                raise InvalidRequest(problem)
        server, sep, tool = request.tool_name.partition(":")
        if not sep or not server or not tool:
            raise InvalidRequest("tool_name must be qualified as SERVER:TOOL")
        try:
            arguments = json.loads(arguments_json)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise InvalidRequest("arguments_json must be a JSON object")
        for other in self._invocations.values():
            if other.session_id == request.session_id and other.tool_use_id == request.tool_use_id:
                raise InvalidRequest("a live invocation already has this tool_use_id in the session")
        if self._shutting_down:
            raise _Refused(FC.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is shutting down")
        if self._draining:
            raise _Refused(FC.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is draining for a restart: retry shortly")
        registration = self._tools.get(request.tool_name)
        if registration is None or not registration.live:
            hint = self._sign_in_hint(server)
            if hint is not None:
                raise _Refused(FC.FAILURE_CODE_AUTH_REQUIRED, hint)
            reported = self.servers.find(server)
            if reported is not None and not any(name.partition(":")[0] == server for name in self._tools):
                raise _Refused(FC.FAILURE_CODE_SERVER_UNAVAILABLE, unavailable_message(reported))
            raise _Refused(FC.FAILURE_CODE_UNKNOWN_TOOL, f"no registered provider offers {request.tool_name}")
        hint = self._sign_in_hint(server)
        if hint is not None:  # e.g. a scope step-up is pending on the live connection: nothing is sent
            raise _Refused(FC.FAILURE_CODE_AUTH_REQUIRED, hint)
        if len(registration.invocations) >= self._max_invocations:
            raise _Refused(FC.FAILURE_CODE_RESOURCE_EXHAUSTED, "the provider has too many live invocations")
        if not request.skip_argument_validation:
            problems = argument_problems(registration.tools[request.tool_name].input_schema_json, arguments)
            if problems:
                raise _Refused(
                    FC.FAILURE_CODE_INVALID_ARGUMENTS,
                    f"the arguments do not match the inputSchema of {request.tool_name}: " + "; ".join(problems),
                )
        return registration

    async def stop(self, session_id: str = "", turn_id: str = "", *, all_sessions: bool = False) -> int:
        """Stop the live invocations of a turn, a session, or (``all_sessions``) the Host.

        Each one ends ``stopped``; its pending form closes ``stopped`` (awaited, bounded) and the
        provider gets ``cancel``; no interaction result is delivered to it afterwards, so no retry
        can follow (RFC criterion 7). Returns how many invocations were stopped.

        Raises:
            InvalidRequest: ``all_sessions`` together with ids, or neither (INVALID_ARGUMENT).
        """
        if all_sessions and (session_id or turn_id):
            raise InvalidRequest("a global stop takes no session_id or turn_id")
        if not all_sessions and not session_id:
            raise InvalidRequest("session_id is required unless all is set")
        targets = [
            inv
            for inv in self._invocations.values()
            if all_sessions or (inv.session_id == session_id and (not turn_id or inv.turn_id == turn_id))
        ]
        work: set[asyncio.Task[Any]] = set()
        for invocation in targets:
            self.stop_invocation(invocation, "stopped")
            work |= invocation.tasks
        await self._wait(work, 10.0)
        return len(targets)

    def stop_invocation(self, invocation: Invocation, reason: str) -> None:
        """Stop one invocation now (also used when no caller reattached within the grace)."""
        invocation.late_form_close = CR.CLOSE_REASON_STOPPED
        self._settle(
            invocation,
            InvocationState.STOPPED,
            broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
            form_close=CR.CLOSE_REASON_STOPPED,
            cancel_reason=reason,
        )

    def watch(self, invocation_id: str, token: str, owner: str) -> tuple[Invocation, int]:
        """The live or retained invocation ``invocation_id`` of ``owner`` and the sequence its events
        are replayed after (``token`` = the resume token of the last event seen; empty = all).

        Raises:
            InvalidRequest: a malformed resume token (INVALID_ARGUMENT).
            CallNotFound: no such invocation, or it settled longer ago than the retention (NOT_FOUND).
            NotPermitted: another principal started it (PERMISSION_DENIED).
        """
        after = parse_resume_token(token)
        if after is None:
            raise InvalidRequest("resume_token is malformed")
        self._prune_retained()
        invocation = self._invocations.get(invocation_id)
        if invocation is None:
            retained = self._retained.get(invocation_id)
            if retained is None:
                raise CallNotFound(f"no live or retained invocation {invocation_id[:MAX_ID_CHARS]!r}")
            invocation = retained[1]
        if invocation.owner != owner:
            raise NotPermitted("only the principal that started a call may reattach to it")
        if after > invocation.log.last_sequence:
            raise InvalidRequest("resume_token is ahead of the invocation's events")
        return invocation, after

    async def follow(
        self, invocation: Invocation, after: int = 0, *, status_first: bool = False
    ) -> AsyncGenerator[broker_pb2.CallToolResponse, None]:
        """One caller stream of ``invocation``: its events after sequence ``after``, then live ones,
        with ``status`` keepalives. While it runs the invocation counts it as attached; when the last
        stream ends before the terminal event, the reattach grace starts (docs/clients.md)."""
        self._attach(invocation)
        try:
            async for event in invocation.log.follow(
                after, keepalive=self._keepalive, status=invocation.status, status_first=status_first
            ):
                yield event
        finally:
            self._detach(invocation)

    def _attach(self, invocation: Invocation) -> None:
        invocation.watchers += 1
        if invocation.grace is not None:
            invocation.grace.cancel()
            invocation.grace = None

    def _detach(self, invocation: Invocation) -> None:
        invocation.watchers -= 1
        if invocation.watchers > 0 or invocation.is_terminal:
            return
        self._counters["callers_detached"] += 1
        log.info("caller_detached", extra={"invocation_id": invocation.invocation_id})
        if self._reattach_grace <= 0:
            self._grace_ended(invocation)
            return
        invocation.grace = asyncio.get_running_loop().call_later(self._reattach_grace, self._grace_ended, invocation)

    def _grace_ended(self, invocation: Invocation) -> None:
        invocation.grace = None
        if invocation.watchers > 0 or invocation.is_terminal:
            return
        self._counters["detached_stops"] += 1
        self.stop_invocation(invocation, "caller did not reattach")

    def _retain(self, invocation: Invocation) -> None:
        """Keep a settled invocation reattachable (WatchCall, call id) for the reattach grace."""
        if invocation.grace is not None:
            invocation.grace.cancel()
            invocation.grace = None
        if invocation.registration is None or self._reattach_grace <= 0:
            self._forget_call_id(invocation)
            return
        self._retained[invocation.invocation_id] = (time.monotonic() + self._reattach_grace, invocation)
        while len(self._retained) > SETTLED_MEMORY:
            _, (_, dropped) = self._retained.popitem(last=False)
            self._forget_call_id(dropped)

    def _prune_retained(self) -> None:
        now = time.monotonic()
        while self._retained:
            invocation_id, (deadline, invocation) = next(iter(self._retained.items()))
            if deadline > now:
                return
            del self._retained[invocation_id]
            self._forget_call_id(invocation)

    def _forget_call_id(self, invocation: Invocation) -> None:
        key = (invocation.owner, invocation.session_id, invocation.call_id)
        if invocation.call_id and self._by_call_id.get(key) is invocation:
            del self._by_call_id[key]

    def list_tools(self) -> list[broker_pb2.Tool]:
        """Every Tool of every live registration (the routed one per qualified name)."""
        tools = []
        for name, registration in sorted(self._tools.items()):
            descriptor = registration.tools[name]
            tools.append(
                broker_pb2.Tool(
                    qualified_name=name,
                    description=descriptor.description,
                    input_schema_json=descriptor.input_schema_json,
                    output_schema_json=descriptor.output_schema_json,
                    provider_id=registration.provider_id,
                    provider_display_name=registration.display_name,
                )
            )
        return tools

    # --- transitions ----------------------------------------------------------------------------

    def _fail(
        self,
        invocation: Invocation,
        code: broker_pb2.FailureCode.ValueType,
        message: str,
        *,
        form_close: interaction_pb2.CloseReason.ValueType | None = CR.CLOSE_REASON_INVOCATION_SETTLED,
        cancel: bool = True,
    ) -> None:
        self._settle(
            invocation,
            InvocationState.FAILED,
            _failure(code, message),
            form_close=form_close,
            cancel_reason=FC.Name(code).removeprefix("FAILURE_CODE_").lower() if cancel else None,
        )

    def _settle(
        self,
        invocation: Invocation,
        state: InvocationState,
        event: broker_pb2.CallToolResponse,
        *,
        form_close: interaction_pb2.CloseReason.ValueType | None = None,
        cancel_reason: str | None = None,
    ) -> bool:
        """Move ``invocation`` to terminal ``state`` once: disarm the timer, close its pending form
        with ``form_close``, tell the provider ``cancel`` (when ``cancel_reason``), emit ``event``."""
        if invocation.is_terminal:
            return False
        previous = invocation.state
        invocation.state = state
        if form_close is not None:
            invocation.late_form_close = form_close
        self._disarm(invocation)
        invocation.terminal = event
        self._retain(invocation)
        invocation.ended_at = time.time()
        self._recent.appendleft(invocation)
        self._invocations.pop(invocation.invocation_id, None)
        if not self._invocations:
            self._idle.set()
        self._counters[f"invocations.{state.value}"] += 1
        metrics.TOOL_CALLS.labels(state.value).inc()
        registration = invocation.registration
        if registration is not None:
            registration.invocations.pop(invocation.invocation_id, None)
            self._settled[invocation.invocation_id] = registration.connection.connection_id
            while len(self._settled) > SETTLED_MEMORY:
                self._settled.popitem(last=False)
        # The settle barrier (docs/security.md "No answer after settlement"): the terminal event is
        # emitted only after the form's close is durable (or its winning answer is recorded lost),
        # an in-flight open has been closed, and delivery reports are in Redis.
        barrier = set(invocation.tasks)
        if previous is InvocationState.AWAITING and invocation.interaction_id:
            self._by_interaction.pop(invocation.interaction_id, None)
            barrier.add(
                self._spawn(invocation, self._close_form(invocation.interaction_id, invocation.late_form_close))
            )
        if invocation.undelivered:
            interaction_id, invocation.undelivered = invocation.undelivered, ""
            barrier.add(
                self._spawn(
                    invocation,
                    self._report_delivery(
                        interaction_id, interaction_pb2.DELIVERY_STATE_LOST, invocation.late_form_close
                    ),
                )
            )
        if barrier:
            self._spawn(invocation, self._finish(invocation, barrier))
        else:
            self._log_terminal(invocation)
        if cancel_reason is not None and registration is not None and not registration.connection.outbox.closed:
            self._send(
                registration.connection,
                broker_pb2.ConnectResponse(
                    cancel=broker_pb2.CancelInvocation(invocation_id=invocation.invocation_id, reason=cancel_reason)
                ),
            )
        log.info(
            "invocation_settled",
            extra={"invocation_id": invocation.invocation_id, "outcome": state.value, "from_state": previous.value},
        )
        return True

    @staticmethod
    def _log_terminal(invocation: Invocation) -> None:
        """Log the terminal event (callers see the invocation settled from now on)."""
        assert invocation.terminal is not None
        invocation.log.append(invocation.terminal, terminal=True)

    async def _finish(self, invocation: Invocation, barrier: set[asyncio.Task[Any]]) -> None:
        """Emit the terminal event once every settle-path write in ``barrier`` is done."""
        try:
            await asyncio.gather(*barrier, return_exceptions=True)
        finally:
            self._log_terminal(invocation)

    async def _close_form(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """Close the form durably; when an answer committed first (it won the race) and was never
        delivered, record it lost with ``reason`` before returning."""
        await self._after_close(await self._host.close_durably(interaction_id, reason), reason)

    async def _after_close(self, closed: Any, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """When the close found an answer that won the race and was never delivered, record it lost."""
        if closed is None:  # fenced by a newer epoch: the form can only end host_restarted
            log.warning("form_close_fenced")
            return
        after = closed.interaction
        interaction_id = after.interaction_id
        if (
            not closed.changed
            and after.state == interaction_pb2.INTERACTION_STATE_ANSWERED
            and after.delivery == interaction_pb2.DELIVERY_STATE_PENDING
        ):
            await self._report_delivery(interaction_id, interaction_pb2.DELIVERY_STATE_LOST, reason)

    def _arm(self, invocation: Invocation) -> None:
        """(Re)start the execution timer: ``execution_timeout``, cut to what is left of
        ``max_execution_seconds`` when that is set."""
        self._disarm(invocation)
        invocation.timer_generation += 1
        generation = invocation.timer_generation
        invocation.run_started = time.monotonic()
        delay = self._execution_timeout
        if self._max_execution > 0:
            delay = max(0.0, min(delay, self._max_execution - invocation.run_spent))
        invocation.timer = asyncio.get_running_loop().call_later(delay, self._timer_fired, invocation, generation)

    def _disarm(self, invocation: Invocation) -> None:
        if invocation.timer is not None:
            invocation.timer.cancel()
            invocation.timer = None
            invocation.run_spent += time.monotonic() - invocation.run_started
        invocation.timer_generation += 1

    def _rearm_on_progress(self, invocation: Invocation) -> None:
        """A progress notification re-arms the execution timer (README "Operations"), never past
        ``max_execution_seconds`` of execution in total (time with a form pending does not count)."""
        if invocation.timer is not None:
            self._arm(invocation)

    def _timer_fired(self, invocation: Invocation, generation: int) -> None:
        if generation != invocation.timer_generation or invocation.state not in (
            InvocationState.RUNNING,
            InvocationState.OPENING,
        ):
            return
        used = invocation.run_spent + time.monotonic() - invocation.run_started
        if self._max_execution > 0 and used >= self._max_execution - 0.001:
            message = f"the provider ran {used:.0f} s in total, the maximum execution time ({self._max_execution:g} s)"
        else:
            message = "the provider execution timer fired (no progress within the execution timeout)"
        self._fail(invocation, FC.FAILURE_CODE_EXECUTION_TIMEOUT, message)

    def _spawn(self, invocation: Invocation | None, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if invocation is not None:
            invocation.tasks.add(task)
            task.add_done_callback(invocation.tasks.discard)
        return task

    @staticmethod
    async def _wait(tasks: set[asyncio.Task[Any]], timeout: float) -> None:
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*tasks, return_exceptions=True)


class _Refused(Exception):
    def __init__(self, code: broker_pb2.FailureCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _stamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _summary(invocation: Invocation) -> broker_pb2.CallSummary:
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


def _failure(code: broker_pb2.FailureCode.ValueType, message: str) -> broker_pb2.CallToolResponse:
    return broker_pb2.CallToolResponse(failure=broker_pb2.CallFailure(code=code, message=message))


def _mint(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(12)}"


def _check_id(name: str, value: str) -> str | None:
    if not value:
        return f"{name} is required"
    if len(value) > MAX_ID_CHARS:
        return f"{name} is longer than {MAX_ID_CHARS} characters"
    if not value.isprintable():
        return f"{name} has control characters"
    return None


def _check_tools(
    descriptors: Iterable[broker_pb2.ToolDescriptor],
) -> tuple[dict[str, broker_pb2.ToolDescriptor], str | None]:
    tools: dict[str, broker_pb2.ToolDescriptor] = {}
    for descriptor in descriptors:
        for name, value in (("tool name", descriptor.name), ("claimed_server", descriptor.claimed_server)):
            problem = _check_id(name, value)
            if problem is not None:
                return {}, problem
        if ":" in descriptor.claimed_server:
            return {}, "claimed_server must not contain ':'"
        for field_name, text in (
            ("input_schema_json", descriptor.input_schema_json),
            ("output_schema_json", descriptor.output_schema_json),
        ):
            if text:
                try:
                    schema = json.loads(text)
                except ValueError:
                    schema = None
                if not isinstance(schema, dict):
                    return {}, f"{field_name} of {descriptor.name} is not a JSON object"
        qualified = f"{descriptor.claimed_server}:{descriptor.name}"
        if qualified in tools:
            return {}, f"duplicate Tool {qualified}"
        tools[qualified] = descriptor
    return tools, None
