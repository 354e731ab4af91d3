"""The Capability broker's domain: the invocation state machine.

A plain async class with no gRPC in it; :mod:`services.broker.servicer` adapts it. Beside it:
:mod:`services.broker.registry` (provider registrations, Tool routing, sign-in forwarding),
:mod:`services.broker.timers` (execution timers, the liveness sweep) and :mod:`services.broker.attachments`
(caller streams, the reattach grace, retention). Each provider frame is applied by the ``_apply_<frame>``
method named after its ``ConnectRequest`` frame. Rules (RFC
criteria 7, 8, 10, 16; docs/design.md#capability-broker,
docs/design.md#lifecycle):

- A provider stream (``ProviderStream``: one ``Connect`` call) registers once; the broker mints the
  registration and connection ids.
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

The records the state machine keeps (invocations, registrations, provider streams) are in
:mod:`services.broker.model`; the shape checks of what it receives, and its caps, in :mod:`services.broker.validation`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

from google.protobuf import duration_pb2

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.attachments import CallerAttachments
from services.broker.call_log import CallLog, parse_resume_token
from services.broker.errors import (
    CallNotFound,
    CallRefused,
    FrameRejection,
    HostUnavailable,
    InvalidRequest,
    OpenRefused,
)
from services.broker.model import (
    Invocation,
    InvocationState,
    Notifier,
    ProviderStream,
    Registration,
    call_summary,
    mint_id,
)
from services.broker.registry import ProviderRegistry
from services.broker.servers import ServerTable
from services.broker.timers import ExecutionTimers, run_every
from services.broker.validation import (
    MAX_MESSAGE_CHARS,
    check_call_request,
    check_display_name,
    check_provider_id,
    check_sign_in_status,
    check_tools,
)
from services.core import metrics
from services.core.limits import MAX_ID_CHARS
from services.core.reasons import InteractionErrorReason

log = logging.getLogger("maka.broker.broker")


RECENT_CALLS = 200
"""Settled invocations kept for activity lists (``GetStatus.recent_calls``)."""
SETTLED_MEMORY = 4096
"""How many settled invocation ids are remembered to tell late frames from unknown ones."""


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


class Broker:
    """The invocation state machine of one Runtime Host, over its provider registry, timers and callers.

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
        host_id: this Host's id, and host_address: where callers reach it for ``WatchCall`` (empty: the
            target they used); both go into every ``CallAccepted`` (docs/design.md#hosts-pools-and-teams).
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
        host_id: str = "",
        host_address: str = "",
    ) -> None:
        self._host = host
        self._host_id = host_id
        self._host_address = host_address
        self.servers = ServerTable()
        """What providers report of their MCP servers (``ReportServers``)."""
        self._recent: deque[Invocation] = deque(maxlen=RECENT_CALLS)
        self._heartbeat_seconds = heartbeat_seconds
        self._form_wait = form_wait_seconds
        self._queue_size = queue_size
        self._counters: Counter[str] = Counter()
        self._registry = ProviderRegistry(self._send, self.servers, max_invocations=max_invocations_per_provider)
        self._timers = ExecutionTimers(execution_timeout, max_execution_seconds, self._execution_timed_out)
        self._callers = CallerAttachments(
            keepalive_seconds=call_keepalive_seconds,
            grace_seconds=reattach_grace_seconds,
            retained_limit=SETTLED_MEMORY,
            counters=self._counters,
            on_abandoned=lambda invocation: self.stop_invocation(invocation, "caller did not reattach"),
        )
        self._invocations: dict[str, Invocation] = {}
        """live invocations by id."""
        self._by_interaction: dict[str, Invocation] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()
        """recently settled invocation id → connection id."""
        self._early_settled: OrderedDict[str, interaction_pb2.Interaction] = OrderedDict()
        self._streams: set[ProviderStream] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._liveness: asyncio.Task[None] | None = None
        self._shutting_down = False
        self.on_readiness: Callable[[bool], None] | None = None
        """Called with :meth:`takes_new_calls` whenever it changes (the app flips its named health service)."""
        self._ready = False
        self._draining = False
        self._idle = asyncio.Event()
        """Set whenever no invocation is live (what :meth:`drain` waits for)."""
        self._idle.set()
        self._tool_watch_cut = 0
        """Bumped when the listing streams open now must end (drain, shutdown)."""

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the provider liveness sweep."""
        self._liveness = asyncio.create_task(
            run_every(self._heartbeat_seconds, self._retire_silent_providers), name="maka-broker-liveness"
        )

    def takes_new_calls(self) -> bool:
        """Readiness: a provider is registered (a new call can be routed) and the broker is neither draining
        nor shutting down. A Host's new-calls health service follows it, so a balancer or a pool client
        sends no call to a Host that just restarted and whose provider has not registered yet."""
        return not (self._draining or self._shutting_down) and bool(self._registry.registrations())

    def _readiness_changed(self) -> None:
        ready = self.takes_new_calls()
        if ready != self._ready:
            self._ready = ready
            log.info("broker_readiness", extra={"takes_new_calls": ready})
            if self.on_readiness is not None:
                self.on_readiness(ready)

    async def drain(self, timeout: float) -> int:
        """Stop accepting calls and give the live ones up to ``timeout`` s to finish.

        From now on every new ``CallTool`` fails ``HOST_UNAVAILABLE`` ("draining"); calls in flight,
        their forms and their provider legs go on untouched. Once none is live, the drain also waits
        for the callers of settled calls that have not received their outcome yet (a caller whose stream
        dropped is reattaching with ``WatchCall``), each at most its reattach grace. Returns how many
        invocations are still live when the wait ends (:meth:`shutdown` then settles them by the usual
        rules). A rolling update calls this between NOT_SERVING and :meth:`shutdown`
        (docs/design.md#drain-vs-crash).
        """
        self._draining = True
        self._readiness_changed()
        self._end_tool_watches()
        live = len(self._invocations)
        if timeout > 0 and (live or self._callers.undelivered_deadline() is not None):
            log.info("broker_draining", extra={"live_invocations": live, "drain_seconds": timeout})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._idle.wait()
                    await self._outcomes_delivered()
        left = len(self._invocations)
        log.info("broker_drained", extra={"finished": live - left, "live_invocations": left})
        return left

    async def _outcomes_delivered(self) -> None:
        """Until every settled call's outcome reached a caller or its reattach grace ran out."""
        while (deadline := self._callers.undelivered_deadline()) is not None:
            self._callers.delivered.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                    await self._callers.delivered.wait()

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Graceful stop of the Host: live invocations settle ``lost``, pending forms close ``host_restarted``
        (docs/design.md#restart-and-reconnect: a Host that stops closes its forms and never replays a Tool),
        providers get ``cancel`` and their streams end; waits up to ``timeout`` s for the closes."""
        self._shutting_down = True
        self._readiness_changed()
        self._end_tool_watches()
        if self._liveness is not None:
            self._liveness.cancel()
        for invocation in list(self._invocations.values()):
            invocation.late_form_close = interaction_pb2.CLOSE_REASON_HOST_RESTARTED
            self._settle(
                invocation,
                InvocationState.LOST,
                broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason="the broker is shutting down")),
                form_close=interaction_pb2.CLOSE_REASON_HOST_RESTARTED,
                cancel_reason="broker shutting down",
            )
        for stream in list(self._streams):
            stream.outbox.close()
        await self._wait(self._tasks, timeout)

    # --- stats ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters (monotonic) and gauges: ``rejected_frames``, ``rejected_frames.<REASON>``,
        ``invocations_started``, ``invocations.<outcome>``, ``registrations``, ``replacements``,
        ``interactions_opened``, ``live_invocations``, ``live_registrations``, ``pending_forms``."""
        out = dict(self._counters)
        out["live_invocations"] = len(self._invocations)
        out["live_registrations"] = len(self._registry)
        out["pending_forms"] = len(self._by_interaction)
        return out

    def recent_calls(self, visible: Callable[[Invocation], bool], limit: int = 50) -> list[broker_pb2.CallSummary]:
        """Live then recently settled invocations ``visible`` accepts, newest first."""
        live = sorted(self._invocations.values(), key=lambda i: i.started_at, reverse=True)
        out: list[broker_pb2.CallSummary] = []
        for invocation in [*live, *self._recent]:
            if len(out) >= limit:
                break
            if visible(invocation):
                out.append(call_summary(invocation))
        return out

    def status(self, visible: Callable[[Invocation], bool] = lambda _invocation: True) -> broker_pb2.GetStatusResponse:
        """Every reported MCP server, the reporters, the broker's own gauges and the recent calls ``visible``
        accepts (``GetStatus``: :func:`services.broker.access.sees_call` of the caller)."""
        return broker_pb2.GetStatusResponse(
            recent_calls=self.recent_calls(visible),
            servers=self.servers.servers(),
            reporters=self.servers.reporters(),
            live_invocations=len(self._invocations),
            live_registrations=len(self._registry),
            pending_forms=len(self._by_interaction),
            host_id=self._host_id,
            takes_new_calls=self.takes_new_calls(),
            draining=self._draining,
        )

    def live_invocations(self) -> list[Invocation]:
        """The live (not terminal) invocations."""
        return list(self._invocations.values())

    def awaiting_interaction_ids(self) -> list[str]:
        """Canonical ids of the forms the broker waits on (HostLink resume ``watched`` ids)."""
        return list(self._by_interaction)

    # --- the registry's side (services.broker.registry) ---------------------------------------------

    def list_tools(self) -> list[broker_pb2.Tool]:
        """Every Tool of every live registration (the routed one per qualified name)."""
        return self._registry.list_tools()

    async def watch_tools(self) -> AsyncGenerator[broker_pb2.WatchToolsResponse, None]:
        """The Tool listing now, then once per published change (``WatchTools``; coalesced: a reader that falls
        behind gets the latest revision). Ends when the broker starts to drain or shuts down: a stream opened
        before the drain ends then (a pool's reader moves to a Host that takes new calls), one opened during
        it at shutdown."""
        cut = self._tool_watch_cut

        def ended() -> bool:
            return self._shutting_down or self._tool_watch_cut != cut

        sent = 0
        while True:
            changed = self._registry.changed()
            if self._registry.revision != sent:
                sent = self._registry.revision
                yield broker_pb2.WatchToolsResponse(revision=sent, tools=self._registry.listing, host_id=self._host_id)
            if ended():
                return
            await changed.wait()
            if ended():  # not the providers leaving with a stopping broker: the reader reconnects for what follows
                return

    def _end_tool_watches(self) -> None:
        self._tool_watch_cut += 1
        self._registry.wake()

    def list_sign_ins(self) -> list[broker_pb2.SignInStatus]:
        """The sign-in status every live registration published, sorted by server (never a token)."""
        return self._registry.list_sign_ins()

    def complete_sign_in(self, request: broker_pb2.CompleteSignInRequest) -> str:
        """Forward an OAuth redirect to the provider whose pending sign-in minted ``request.state``
        (:meth:`ProviderRegistry.complete_sign_in`); returns the server name."""
        return self._registry.complete_sign_in(request)

    def sign_out(self, server: str) -> None:
        """Ask the provider of ``server`` to forget its tokens (:meth:`ProviderRegistry.sign_out`)."""
        self._registry.sign_out(server)

    # --- provider connections -------------------------------------------------------------------

    def open_provider_stream(self) -> ProviderStream:
        """A new provider stream; the broker mints its connection id."""
        stream = ProviderStream(connection_id=mint_id("conn"), outbox=Notifier(self._queue_size))
        self._streams.add(stream)
        if self._shutting_down:
            stream.outbox.close()
        return stream

    def provider_stream_lost(self, stream: ProviderStream) -> None:
        """The provider's stream ended (EOF, cancellation, transport failure): its live
        registration is retired, its invocations settle ``lost``, pending forms close ``provider_lost``."""
        self._streams.discard(stream)
        stream.outbox.close()
        registration = stream.registration
        if registration is not None and registration.live:
            self._retire(registration, "provider disconnected")

    def _retire(self, registration: Registration, reason: str) -> None:
        """Take ``registration`` out of routing and settle its invocations ``lost`` (forms close ``provider_lost``)."""
        self._registry.remove(registration)
        for invocation in list(registration.invocations.values()):
            invocation.late_form_close = interaction_pb2.CLOSE_REASON_PROVIDER_LOST
            self._settle(
                invocation,
                InvocationState.LOST,
                broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason=reason)),
                form_close=interaction_pb2.CLOSE_REASON_PROVIDER_LOST,
                cancel_reason=reason,
            )
        log.info(
            "provider_retired",
            extra={"provider_id": registration.provider_id, "registration_id": registration.registration_id},
        )
        self._readiness_changed()

    def _send(self, stream: ProviderStream, frame: broker_pb2.ConnectResponse) -> None:
        if stream.outbox.push(frame) or stream.outbox.closed:
            return
        # The provider does not read its stream: treat it as lost rather than buffer without bound.
        self._counters["provider_queue_overflows"] += 1
        stream.outbox.close()
        registration = stream.registration
        if registration is not None and registration.live:
            asyncio.get_running_loop().call_soon(self._retire_if_live, registration, "provider stream overflowed")

    def _retire_if_live(self, registration: Registration, reason: str) -> None:
        if registration.live:
            self._retire(registration, reason)

    def _retire_silent_providers(self) -> None:
        """The liveness sweep: a provider silent for three heartbeat intervals is lost."""
        deadline = time.monotonic() - 3 * self._heartbeat_seconds
        for registration in self._registry.silent_since(deadline):
            self._counters["providers_timed_out"] += 1
            self._retire(registration, "provider heartbeat missed")
            registration.stream.outbox.close()

    # --- provider frames: one _apply_<frame> per ConnectRequest frame ------------------------------

    def handle_frame(self, stream: ProviderStream, request: broker_pb2.ConnectRequest) -> None:
        """Apply one provider frame. A refused frame is answered with ``FrameRejected`` on the same
        stream and counted; it never ends the stream and changes nothing else."""
        stream.last_seen = time.monotonic()
        try:
            self._dispatch_frame(stream, request)
        except FrameRejection as rejection:
            self._count_rejected(broker_pb2.RejectReason.Name(rejection.reason).removeprefix("REJECT_REASON_"))
            log.info(
                "frame_rejected",
                extra={
                    "connection_id": stream.connection_id,
                    "invocation_id": rejection.invocation_id,
                    "reject_reason": broker_pb2.RejectReason.Name(rejection.reason),
                },
            )
            self._send(stream, rejection.to_frame())

    def _count_rejected(self, reason: str) -> None:
        self._counters["rejected_frames"] += 1
        self._counters[f"rejected_frames.{reason}"] += 1
        metrics.FRAMES_REJECTED.labels(reason).inc()

    def _dispatch_frame(self, stream: ProviderStream, request: broker_pb2.ConnectRequest) -> None:
        kind = request.WhichOneof("frame")
        if kind == "register":
            self._apply_register(stream, request.register)
            return
        registration = stream.registration
        if registration is None or not registration.live:
            raise FrameRejection(broker_pb2.REJECT_REASON_NOT_REGISTERED, "", "register first")
        if kind == "heartbeat":
            return  # handle_frame already recorded that the provider is alive
        if kind == "tools_changed":
            self._apply_tools_changed(registration, request.tools_changed)
        elif kind == "sign_in_status":
            self._apply_sign_in_status(registration, request.sign_in_status)
        elif kind == "progress":
            self._apply_progress(stream, request.progress)
        elif kind == "interaction_request":
            self._apply_interaction_request(stream, request.interaction_request)
        elif kind == "interaction_received":
            self._apply_interaction_received(stream, request.interaction_received)
        elif kind == "result":
            self._apply_result(stream, request.result)
        elif kind == "failure":
            self._apply_failure(stream, request.failure)
        else:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", "empty or unknown frame")

    def _apply_register(self, stream: ProviderStream, register: broker_pb2.Register) -> None:
        if stream.registration is not None:
            raise FrameRejection(broker_pb2.REJECT_REASON_ALREADY_REGISTERED, "", "this stream is already registered")
        if self._shutting_down:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", "the broker is shutting down")
        problem = check_provider_id(register.provider_id)
        tools: dict[str, broker_pb2.ToolDescriptor] = {}
        if problem is None:
            tools, problem = check_tools(register.tools)
        if problem is None:
            problem = check_display_name(register.display_name)
        if problem is not None:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", problem)
        self._refuse_claim(register.provider_id, tools)
        old = self._registry.get(register.provider_id)
        if old is not None:
            self._counters["replacements"] += 1
            self._retire(old, "provider registration replaced")
            old.stream.outbox.close()
        registration = self._registry.add(stream, register.provider_id, register.display_name, tools)
        self._counters["registrations"] += 1
        self._readiness_changed()
        log.info(
            "provider_registered",
            extra={
                "provider_id": registration.provider_id,
                "registration_id": registration.registration_id,
                "connection_id": stream.connection_id,
                "tools": len(tools),
            },
        )
        interval = duration_pb2.Duration()
        interval.FromNanoseconds(int(self._heartbeat_seconds * 1e9))
        registered = broker_pb2.Registered(
            registration_id=registration.registration_id,
            connection_id=stream.connection_id,
            heartbeat_interval=interval,
        )
        self._send(stream, broker_pb2.ConnectResponse(registered=registered))

    def _apply_tools_changed(self, registration: Registration, frame: broker_pb2.ToolsChanged) -> None:
        tools, problem = check_tools(frame.tools)
        if problem is not None:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", problem)
        self._refuse_claim(registration.provider_id, tools)
        changed = self._registry.replace_tools(registration, tools)
        for invocation in list(registration.invocations.values()):
            if invocation.qualified_name in changed:
                self._settle(
                    invocation,
                    InvocationState.LOST,
                    broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason="the Tool binding changed")),
                    form_close=interaction_pb2.CLOSE_REASON_SUPERSEDED,
                    cancel_reason="tool binding changed",
                )

    def _apply_sign_in_status(self, registration: Registration, status: broker_pb2.SignInStatus) -> None:
        problem = check_sign_in_status(status)
        if problem is not None:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", problem)
        self._refuse_claim(registration.provider_id, sign_in_server=status.server)
        self._registry.set_sign_in(registration, status)

    def _refuse_claim(
        self, provider_id: str, tools: dict[str, broker_pb2.ToolDescriptor] | None = None, sign_in_server: str = ""
    ) -> None:
        """Refuse (``ALREADY_REGISTERED``, logged) a claim on a server another provider's registration holds."""
        conflict = self._registry.claim_conflict(provider_id, tools or {}, sign_in_server)
        if conflict is not None:
            self._counters["claims_refused"] += 1
            log.warning("provider_claim_refused", extra={"provider_id": provider_id, "reason": conflict})
            raise FrameRejection(broker_pb2.REJECT_REASON_ALREADY_REGISTERED, "", conflict)

    def _owned(self, stream: ProviderStream, invocation_id: str) -> Invocation:
        """The live invocation ``invocation_id`` of this connection, or a FrameRejection."""
        invocation = self._invocations.get(invocation_id)
        registration = stream.registration
        if invocation is None:
            owner = self._settled.get(invocation_id)
            if owner is None:
                raise FrameRejection(broker_pb2.REJECT_REASON_UNKNOWN_INVOCATION, invocation_id, "no such invocation")
            if owner != stream.connection_id:
                raise FrameRejection(broker_pb2.REJECT_REASON_CROSS_CONNECTION, invocation_id, "not this connection's")
            raise FrameRejection(
                broker_pb2.REJECT_REASON_INVOCATION_SETTLED, invocation_id, "the invocation already settled"
            )
        if invocation.registration is not registration or registration is None:
            raise FrameRejection(broker_pb2.REJECT_REASON_CROSS_CONNECTION, invocation_id, "not this connection's")
        return invocation

    def _apply_progress(self, stream: ProviderStream, frame: broker_pb2.InvocationProgress) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        event = broker_pb2.CallProgress(progress=frame.progress, message=frame.message[:MAX_MESSAGE_CHARS])
        if frame.HasField("total"):
            event.total = frame.total
        self._timers.rearm_on_progress(invocation)
        dropped = invocation.log.dropped_progress
        invocation.log.append(broker_pb2.CallToolResponse(progress=event))  # the oldest progress may drop
        self._counters["progress_dropped"] += invocation.log.dropped_progress - dropped

    def _apply_interaction_received(self, stream: ProviderStream, frame: broker_pb2.InteractionReceived) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        if not frame.interaction_id or frame.interaction_id != invocation.undelivered:
            raise FrameRejection(
                broker_pb2.REJECT_REASON_NO_INTERACTION_PENDING,
                invocation.invocation_id,
                "no answer awaits confirmation",
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
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
    ) -> None:
        recorded = await self._host.report_delivery(interaction_id, delivery, lost_reason)
        if recorded is None:  # fenced by a newer epoch, which records it lost (host_restarted)
            log.warning("delivery_report_dropped", extra={"interaction_id": interaction_id})

    def _apply_interaction_request(self, stream: ProviderStream, frame: broker_pb2.InteractionRequest) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        self._delivered(invocation)
        if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
            raise FrameRejection(
                broker_pb2.REJECT_REASON_INTERACTION_ALREADY_PENDING,
                invocation.invocation_id,
                "a form is already pending",
            )
        if not frame.HasField("form"):
            # A field-less form is a valid confirmation; the Interaction service checks the rest.
            raise FrameRejection(
                broker_pb2.REJECT_REASON_INVALID_FORM, invocation.invocation_id, "the request has no form"
            )
        if len(frame.correlation_id) > MAX_ID_CHARS:
            raise FrameRejection(
                broker_pb2.REJECT_REASON_INVALID_FRAME, invocation.invocation_id, "correlation id too long"
            )
        registration = stream.registration
        assert registration is not None
        form = _with_trusted_requester(frame.form, invocation, registration)
        binding = interaction_pb2.Binding(
            session_id=invocation.session_id,
            turn_id=invocation.turn_id,
            tool_use_id=invocation.tool_use_id,
            invocation_id=invocation.invocation_id,
            registration_id=registration.registration_id,
            connection_id=stream.connection_id,
            provider_correlation_id=frame.correlation_id,
            tool_name=invocation.qualified_name,
        )
        if invocation.made_for is not None:
            binding.made_for.CopyFrom(invocation.made_for)
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
        """Publish the form; the invocation awaits it once the Interaction service confirmed it."""
        try:
            interaction = await self._host.open(binding, form, self._form_wait, round_info)
        except OpenRefused as refused:
            self._open_refused(invocation, refused)
            return
        except HostUnavailable as error:
            if invocation.state is InvocationState.OPENING:
                self._settle_failed(invocation, broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, error.message)
            # The open's outcome is unknown (its reply may have been lost with the link): close
            # whatever form it made and fence the invocation against it before the terminal event
            # (this task is part of the settle barrier).
            closed = await self._host.close_invocation_durably(invocation.invocation_id, invocation.late_form_close)
            await self._after_close(closed, invocation.late_form_close)
            return
        self._counters["interactions_opened"] += 1
        if invocation.state is not InvocationState.OPENING:
            # Settled while the open was in flight: never leave the form orphaned. The terminal
            # event waits for this task (see _settle), so it follows the durable close.
            await self._close_form(interaction.interaction_id, invocation.late_form_close)
            return
        self._await_form(invocation, interaction)

    def _open_refused(self, invocation: Invocation, refused: OpenRefused) -> None:
        """The Interaction service refused the form: an invalid one is the provider's to fix (the frame is
        rejected and the invocation keeps running); any other refusal fails the invocation."""
        if invocation.state is not InvocationState.OPENING:
            return
        registration = invocation.registration
        if refused.reason in (
            InteractionErrorReason.INVALID_FORM,
            InteractionErrorReason.INVALID_REQUEST,
            InteractionErrorReason.LIMIT_EXCEEDED,
        ):
            invocation.state = InvocationState.RUNNING
            self._count_rejected("INVALID_FORM")
            if registration is not None:
                rejection = FrameRejection(
                    broker_pb2.REJECT_REASON_INVALID_FORM,
                    invocation.invocation_id,
                    f"{refused.reason}: {refused.message}"[:MAX_MESSAGE_CHARS],
                )
                self._send(registration.stream, rejection.to_frame())
            return
        code = broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
        if refused.reason == InteractionErrorReason.STALE_EPOCH:
            code = broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
        self._settle_failed(invocation, code, f"the Interaction service refused the form: {refused.reason}")

    def _await_form(self, invocation: Invocation, interaction: interaction_pb2.Interaction) -> None:
        """``OPENING`` → ``AWAITING``: the form is pending; the execution timer is suspended until it settles."""
        interaction_id = interaction.interaction_id
        invocation.state = InvocationState.AWAITING
        invocation.interaction_id = interaction_id
        invocation.interaction_expires_at = interaction.expires_at if interaction.HasField("expires_at") else None
        invocation.interaction_ids.append(interaction_id)
        self._timers.disarm(invocation)
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

    def _apply_result(self, stream: ProviderStream, frame: broker_pb2.InvocationResult) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        self._delivered(invocation)
        if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
            self._settle_failed(
                invocation,
                broker_pb2.FAILURE_CODE_INCONSISTENT_PROVIDER,
                "the provider returned a final result while its form was pending",
                form_close=interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
                cancel=False,
            )
            return
        try:
            result = json.loads(frame.call_tool_result_json)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            raise FrameRejection(
                broker_pb2.REJECT_REASON_INVALID_FRAME,
                invocation.invocation_id,
                "call_tool_result_json is not a JSON object",
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

    def _apply_failure(self, stream: ProviderStream, frame: broker_pb2.InvocationFailure) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        self._delivered(invocation)
        code = (
            frame.code if frame.code != broker_pb2.FAILURE_CODE_UNSPECIFIED else broker_pb2.FAILURE_CODE_PROVIDER_ERROR
        )
        self._settle_failed(
            invocation,
            code,
            frame.message[:MAX_MESSAGE_CHARS],
            form_close=interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
            cancel=False,
        )

    # --- the Interaction service's side ---------------------------------------------------------

    def interaction_settled(self, interaction: interaction_pb2.Interaction) -> None:
        """A form stopped being pending (HostLink ``settled``). Delivered only to the exact
        invocation, registration and connection it was bound to, and only while it awaits it."""
        invocation = self._awaiting_invocation(interaction)
        if invocation is None:
            return
        registration = invocation.registration
        assert registration is not None
        del self._by_interaction[interaction.interaction_id]
        invocation.interaction_id = ""
        invocation.interaction_expires_at = None
        if interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
            self._deliver_answer(invocation, registration.stream, interaction)
        else:
            self._deliver_close(invocation, registration.stream, interaction)

    def _awaiting_invocation(self, interaction: interaction_pb2.Interaction) -> Invocation | None:
        """The invocation awaiting this settled form on its bound registration and connection, or None: a
        settlement that overtook its own open is kept until the open returns, any other one is ignored."""
        invocation = self._by_interaction.get(interaction.interaction_id)
        if invocation is None:
            if interaction.binding.invocation_id in self._invocations:
                pending = self._invocations[interaction.binding.invocation_id]
                if pending.state is InvocationState.OPENING:
                    self._early_settled[interaction.interaction_id] = interaction
                    while len(self._early_settled) > SETTLED_MEMORY:
                        self._early_settled.popitem(last=False)
            return None
        registration = invocation.registration
        binding = interaction.binding
        if (
            invocation.state is not InvocationState.AWAITING
            or registration is None
            or not registration.live
            or binding.invocation_id != invocation.invocation_id
            or binding.registration_id != registration.registration_id
            or binding.connection_id != registration.stream.connection_id
        ):
            self._counters["settlements_ignored"] += 1
            return None
        return invocation

    def _deliver_answer(
        self, invocation: Invocation, stream: ProviderStream, interaction: interaction_pb2.Interaction
    ) -> None:
        """``AWAITING`` → ``RUNNING``: the answer goes to the provider and a fresh execution timer starts."""
        interaction_id = interaction.interaction_id
        invocation.state = InvocationState.RUNNING
        invocation.emit(
            broker_pb2.CallToolResponse(
                interaction_settled=broker_pb2.InteractionSettledEvent(
                    interaction_id=interaction_id,
                    action=interaction.answer.action,
                    close_reason=interaction_pb2.CLOSE_REASON_ANSWERED,
                )
            )
        )
        invocation.undelivered = interaction_id
        result = broker_pb2.InteractionResult(
            invocation_id=invocation.invocation_id,
            correlation_id=invocation.correlation_id,
            interaction_id=interaction_id,
            answer=interaction.answer,
            close_reason=interaction_pb2.CLOSE_REASON_ANSWERED,
        )
        self._send(stream, broker_pb2.ConnectResponse(interaction_result=result))
        self._timers.arm(invocation)

    def _deliver_close(
        self, invocation: Invocation, stream: ProviderStream, interaction: interaction_pb2.Interaction
    ) -> None:
        """The form closed unanswered: the provider hears why, and the invocation ends ``stopped`` (someone
        stopped the form) or fails (timed out or closed)."""
        interaction_id = interaction.interaction_id
        reason = interaction.close_reason
        invocation.emit(
            broker_pb2.CallToolResponse(
                interaction_settled=broker_pb2.InteractionSettledEvent(
                    interaction_id=interaction_id, close_reason=reason
                )
            )
        )
        result = broker_pb2.InteractionResult(
            invocation_id=invocation.invocation_id,
            correlation_id=invocation.correlation_id,
            interaction_id=interaction_id,
            close_reason=reason,
        )
        self._send(stream, broker_pb2.ConnectResponse(interaction_result=result))
        if reason == interaction_pb2.CLOSE_REASON_STOPPED:
            self._settle(
                invocation,
                InvocationState.STOPPED,
                broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
                form_close=None,
                cancel_reason="interaction stopped",
            )
            return
        code, message = _closed_form_failure(reason)
        self._settle_failed(invocation, code, message)

    def host_stale(self) -> None:
        """The HostLink resume was refused as stale: fail every form-bound invocation closed."""
        for invocation in list(self._invocations.values()):
            if invocation.state in (InvocationState.OPENING, InvocationState.AWAITING):
                self._by_interaction.pop(invocation.interaction_id, None)
                invocation.interaction_id = ""
                self._settle_failed(invocation, broker_pb2.FAILURE_CODE_INTERACTION_CLOSED, "the Host epoch ended")

    # --- the caller's side ----------------------------------------------------------------------

    def call_tool(
        self,
        request: broker_pb2.CallToolRequest,
        owner: str = "",
        made_for: interaction_pb2.Person | None = None,
        may_act: Callable[[Invocation], bool] = lambda _invocation: True,
    ) -> Invocation:
        """Start one invocation for principal ``owner`` and return it (follow it with :meth:`follow`).

        ``made_for``: the person the call is made for (:func:`made_for` of the caller's principal, never a
        message field); its forms carry it and reach only that person and the approvers a policy names.

        A malformed request (ids empty or over 256 code points, arguments not a JSON object, a live duplicate
        tool-use id in the session among the calls ``may_act`` accepts, a ``call_id`` reused for a different
        request) or an unknown Tool yields an invocation whose only event is ``failure`` (FAILURE_CODE_INVALID_REQUEST
        / UNKNOWN_TOOL / RESOURCE_EXHAUSTED / HOST_UNAVAILABLE when shutting down). A ``call_id``
        that names a live or retained invocation of ``owner`` in the session that ``may_act`` accepts
        (:func:`services.broker.access.may_act_on`) returns that one (idempotent start). Otherwise events
        start with ``accepted`` and end with exactly one of result, failure, lost, stopped.
        """
        invocation = Invocation(
            invocation_id=mint_id("inv"),
            session_id=request.session_id,
            turn_id=request.turn_id,
            tool_use_id=request.tool_use_id,
            qualified_name=request.tool_name,
            arguments_json=request.arguments_json or "{}",
            registration=None,
            log=CallLog(self._queue_size),
            owner=owner,
            made_for=made_for,
            call_id=request.call_id,
        )
        self._callers.prune()
        existing = self._callers.by_call_id(owner, request.session_id, request.call_id)
        if existing is not None and may_act(existing):
            return self._call_again(existing, invocation)
        self._counters["invocations_started"] += 1
        try:
            registration = self._admit(request, invocation.arguments_json, may_act)
        except InvalidRequest as error:
            event = failure_event(broker_pb2.FAILURE_CODE_INVALID_REQUEST, error.message)
            self._settle(invocation, InvocationState.FAILED, event)
            return invocation
        except CallRefused as refused:
            self._settle(invocation, InvocationState.FAILED, failure_event(refused.code, refused.message))
            return invocation
        self._invoke(invocation, registration)
        return invocation

    def _call_again(self, existing: Invocation, invocation: Invocation) -> Invocation:
        """A ``call_id`` already names ``existing``: the same request returns it, a different one fails."""
        if (
            existing.qualified_name != invocation.qualified_name
            or existing.arguments_json != invocation.arguments_json
            or existing.turn_id != invocation.turn_id
        ):
            event = failure_event(
                broker_pb2.FAILURE_CODE_INVALID_REQUEST, "call_id was already used for a different request"
            )
            self._settle(invocation, InvocationState.FAILED, event)
            return invocation
        self._counters["calls_reattached_by_call_id"] += 1
        return existing

    def _admit(
        self, request: broker_pb2.CallToolRequest, arguments_json: str, may_act: Callable[[Invocation], bool]
    ) -> Registration:
        """The registration a new call goes to. Raises InvalidRequest or CallRefused.

        A live tool-use id in the session counts only among the calls the caller may act on: another person's
        call with the same ids neither blocks this one nor is revealed by a refusal.
        """
        arguments, problem = check_call_request(request, arguments_json)
        if problem is not None:
            raise InvalidRequest(problem)
        for other in self._invocations.values():
            if other.session_id == request.session_id and other.tool_use_id == request.tool_use_id and may_act(other):
                raise InvalidRequest("a live invocation already has this tool_use_id in the session")
        if self._shutting_down:
            raise CallRefused(broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is shutting down")
        if self._draining:
            raise CallRefused(
                broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, "the broker is draining for a restart: retry shortly"
            )
        return self._registry.route(request, arguments)

    def _invoke(self, invocation: Invocation, registration: Registration) -> None:
        """The invocation is live: the caller hears ``accepted``, the timer runs, the provider gets ``invoke``."""
        invocation.registration = registration
        registration.invocations[invocation.invocation_id] = invocation
        self._invocations[invocation.invocation_id] = invocation
        self._callers.remember_call_id(invocation)
        self._idle.clear()
        invocation.emit(
            broker_pb2.CallToolResponse(
                accepted=broker_pb2.CallAccepted(
                    invocation_id=invocation.invocation_id,
                    provider_id=registration.provider_id,
                    host_id=self._host_id,
                    host_address=self._host_address,
                )
            )
        )
        timeout = duration_pb2.Duration()
        timeout.FromNanoseconds(int(self._timers.execution_timeout * 1e9))
        _, _, bare = invocation.qualified_name.partition(":")
        self._timers.arm(invocation)
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
        invoke = broker_pb2.Invoke(
            invocation_id=invocation.invocation_id,
            tool_name=bare,
            arguments_json=invocation.arguments_json,
            execution_timeout=timeout,
        )
        self._send(registration.stream, broker_pb2.ConnectResponse(invoke=invoke))

    async def stop(
        self,
        session_id: str = "",
        turn_id: str = "",
        *,
        all_sessions: bool = False,
        invocation_id: str = "",
        may_act: Callable[[Invocation], bool] = lambda _invocation: True,
    ) -> int:
        """Stop the live invocations of a turn, a session, or (``all_sessions``) the Host, or the one live
        invocation ``invocation_id``, each only when ``may_act`` accepts it (:func:`services.broker.access.may_act_on`
        of the caller: one it may not act on counts as absent; none stopped when this Host runs no such call: in a
        pool only its owner does). A draining Host stops its calls the same way.

        Each one ends ``stopped``; its pending form closes ``stopped`` (awaited, bounded) and the
        provider gets ``cancel``; no interaction result is delivered to it afterwards, so no retry
        can follow (RFC criterion 7). Returns how many invocations were stopped.

        Raises:
            InvalidRequest: ``all_sessions`` together with ids, ``invocation_id`` together with a scope,
                or none of them (INVALID_ARGUMENT).
        """
        if invocation_id and (session_id or turn_id or all_sessions):
            raise InvalidRequest("a stop of one invocation takes no session_id, turn_id or all")
        if all_sessions and (session_id or turn_id):
            raise InvalidRequest("a global stop takes no session_id or turn_id")
        if not all_sessions and not session_id and not invocation_id:
            raise InvalidRequest("session_id is required unless all or invocation_id is set")
        if invocation_id:
            one = self._invocations.get(invocation_id)
            named = [one] if one is not None else []
        else:
            named = [
                inv
                for inv in self._invocations.values()
                if all_sessions or (inv.session_id == session_id and (not turn_id or inv.turn_id == turn_id))
            ]
        targets = [invocation for invocation in named if may_act(invocation)]
        work: set[asyncio.Task[Any]] = set()
        for invocation in targets:
            self.stop_invocation(invocation, "stopped")
            work |= invocation.tasks
        await self._wait(work, 10.0)
        return len(targets)

    def stop_invocation(self, invocation: Invocation, reason: str) -> None:
        """Stop one invocation now (also used when no caller reattached within the grace)."""
        invocation.late_form_close = interaction_pb2.CLOSE_REASON_STOPPED
        self._settle(
            invocation,
            InvocationState.STOPPED,
            broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
            form_close=interaction_pb2.CLOSE_REASON_STOPPED,
            cancel_reason=reason,
        )

    def watch(
        self, invocation_id: str, token: str, owner: str, may_act: Callable[[Invocation], bool] = lambda _i: True
    ) -> tuple[Invocation, int]:
        """The live or retained invocation ``invocation_id`` of ``owner`` and the sequence its events
        are replayed after (``token`` = the resume token of the last event seen; empty = all).

        Raises:
            InvalidRequest: a malformed resume token (INVALID_ARGUMENT).
            CallNotFound: no such invocation, it settled longer ago than the retention, another principal started
                it or ``may_act`` refuses it (:func:`services.broker.access.may_act_on`): the same NOT_FOUND.
        """
        after = parse_resume_token(token)
        if after is None:
            raise InvalidRequest("resume_token is malformed")
        self._callers.prune()
        invocation = self._invocations.get(invocation_id) or self._callers.retained(invocation_id)
        if invocation is None or invocation.owner != owner or not may_act(invocation):
            raise CallNotFound(f"no live or retained invocation {invocation_id[:MAX_ID_CHARS]!r}")
        if after > invocation.log.last_sequence:
            raise InvalidRequest("resume_token is ahead of the invocation's events")
        return invocation, after

    def follow(
        self, invocation: Invocation, after: int = 0, *, status_first: bool = False
    ) -> AsyncGenerator[broker_pb2.CallToolResponse, None]:
        """One caller stream of ``invocation``: its events after sequence ``after``, then live ones,
        with ``status`` keepalives (:meth:`CallerAttachments.follow`: the last stream ending before the
        terminal event starts the reattach grace; docs/clients.md)."""
        return self._callers.follow(invocation, after, status_first=status_first)

    # --- transitions ----------------------------------------------------------------------------

    def _execution_timed_out(self, invocation: Invocation, message: str) -> None:
        self._settle_failed(invocation, broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT, message)

    def _settle_failed(
        self,
        invocation: Invocation,
        code: broker_pb2.FailureCode.ValueType,
        message: str,
        *,
        form_close: interaction_pb2.CloseReason.ValueType | None = interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
        cancel: bool = True,
    ) -> None:
        """Settle ``invocation`` ``FAILED`` with ``code``; the provider gets ``cancel`` unless it reported the end."""
        self._settle(
            invocation,
            InvocationState.FAILED,
            failure_event(code, message),
            form_close=form_close,
            cancel_reason=broker_pb2.FailureCode.Name(code).removeprefix("FAILURE_CODE_").lower() if cancel else None,
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
        self._timers.disarm(invocation)
        invocation.terminal = event
        self._callers.retain(invocation)
        self._no_longer_live(invocation, state)
        self._emit_terminal_after_barrier(invocation, previous)
        registration = invocation.registration
        if cancel_reason is not None and registration is not None and not registration.stream.outbox.closed:
            self._send(
                registration.stream,
                broker_pb2.ConnectResponse(
                    cancel=broker_pb2.CancelInvocation(invocation_id=invocation.invocation_id, reason=cancel_reason)
                ),
            )
        log.info(
            "invocation_settled",
            extra={"invocation_id": invocation.invocation_id, "outcome": state.value, "from_state": previous.value},
        )
        return True

    def _no_longer_live(self, invocation: Invocation, state: InvocationState) -> None:
        """Move a settled invocation from the live tables to the recent ones, and count its outcome."""
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
            self._settled[invocation.invocation_id] = registration.stream.connection_id
            while len(self._settled) > SETTLED_MEMORY:
                self._settled.popitem(last=False)

    def _emit_terminal_after_barrier(self, invocation: Invocation, previous: InvocationState) -> None:
        """The settle barrier (docs/security.md "No answer after settlement"): the terminal event is
        emitted only after the form's close is durable (or its winning answer is recorded lost), an
        in-flight open has been closed, and delivery reports are in Redis."""
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


def failure_event(code: broker_pb2.FailureCode.ValueType, message: str) -> broker_pb2.CallToolResponse:
    """The caller's ``failure`` event (counted in ``maka_call_failures_total`` by code)."""
    metrics.child(metrics.CALL_FAILURES, broker_pb2.FailureCode.Name(code).removeprefix("FAILURE_CODE_").lower()).inc()
    return broker_pb2.CallToolResponse(failure=broker_pb2.CallFailure(code=code, message=message))


def _closed_form_failure(reason: interaction_pb2.CloseReason.ValueType) -> tuple[broker_pb2.FailureCode.ValueType, str]:
    """How a form closed unanswered (other than ``stopped``) fails its invocation: timed out or closed."""
    code = (
        broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
        if reason
        in (
            interaction_pb2.CLOSE_REASON_TIMED_OUT,
            interaction_pb2.CLOSE_REASON_LEASE_EXPIRED,
            interaction_pb2.CLOSE_REASON_ROUND_EXPIRED,
        )
        else broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
    )
    why = interaction_pb2.CloseReason.Name(reason).removeprefix("CLOSE_REASON_").lower()
    if reason == interaction_pb2.CLOSE_REASON_ROUND_EXPIRED:
        why += " (the server's requestState for this round expired before every form was answered)"
    return code, f"the form closed: {why}"


def _with_trusted_requester(
    requested: form_pb2.Form, invocation: Invocation, registration: Registration
) -> form_pb2.Form:
    """A copy of the provider's form whose requester is what the broker knows (provider id and name); the
    claimed server and Tool stay display-only, defaulting to the invocation's."""
    form = form_pb2.Form()
    form.CopyFrom(requested)
    server, _, bare = invocation.qualified_name.partition(":")
    claimed_server = form.requester.claimed_server or server
    claimed_tool = form.requester.claimed_tool or bare
    form.requester.CopyFrom(
        form_pb2.Requester(
            provider_id=registration.provider_id,
            provider_display_name=registration.display_name,
            claimed_server=claimed_server[:MAX_ID_CHARS],
            claimed_tool=claimed_tool[:MAX_ID_CHARS],
        )
    )
    return form
