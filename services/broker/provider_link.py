"""The broker's end of ``Connect`` (the provider stream): one ``_apply_<frame>`` per provider frame kind.

The provider's end is :mod:`services.mcp_provider.broker_link`. Rules (docs/design.md#capability-broker,
docs/design.md#stop-provider-loss-and-supersession):

- A provider stream (``ProviderStream``: one ``Connect`` call) registers once; the broker mints the
  registration and connection ids. A registration with the same provider id replaces the old one: every
  invocation bound to the old one settles ``lost`` (its pending form closes ``provider_lost``) and its
  stream is ended.
- A provider frame is accepted only for a live invocation of its own connection; anything else is
  answered with ``FrameRejected`` (counted) and changes nothing.
- A provider whose stream ends, overflows its queue or stays silent for three heartbeat intervals is
  retired: its invocations settle ``lost``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable

from google.protobuf import duration_pb2

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.errors import FrameRejection
from services.broker.forms import Forms
from services.broker.invocation import Invocation, InvocationState, LiveInvocations
from services.broker.model import Notifier, ProviderStream, Registration, mint_id
from services.broker.registry import ProviderRegistry
from services.broker.settlement import Settlement
from services.broker.timers import ExecutionTimers
from services.broker.validation import (
    MAX_MESSAGE_CHARS,
    check_display_name,
    check_provider_id,
    check_sign_in_status,
    check_tools,
)
from services.core.limits import MAX_ID_CHARS

log = logging.getLogger("maka.broker.broker")


class ProviderLink:
    """The provider streams of one broker: registration, the frames they send, retirement.

    Args:
        registry: provider registrations and Tool routing.
        live: the live invocations (a frame names one of its own connection).
        settlement: settles the invocations a frame or a retirement ends.
        forms: opens the forms providers ask for.
        timers: execution timers (progress re-arms them).
        counters: the broker's counters (``rejected_frames``, ``registrations``, ``replacements``, ...).
        heartbeat_seconds: provider heartbeat interval; a provider silent for 3x is lost.
        queue_size: bound of each provider stream queue.
        on_registrations: called whenever a registration came or went (readiness may change).
        shutting_down: whether the broker is shutting down (no registration is taken then).
    """

    def __init__(
        self,
        registry: ProviderRegistry,
        live: LiveInvocations,
        settlement: Settlement,
        forms: Forms,
        timers: ExecutionTimers,
        counters: Counter[str],
        *,
        heartbeat_seconds: float,
        queue_size: int,
        on_registrations: Callable[[], None],
        shutting_down: Callable[[], bool],
    ) -> None:
        self._registry = registry
        self._live = live
        self._settlement = settlement
        self._forms = forms
        self._timers = timers
        self._counters = counters
        self.heartbeat_seconds = heartbeat_seconds
        self._queue_size = queue_size
        self._on_registrations = on_registrations
        self._shutting_down = shutting_down
        self._streams: set[ProviderStream] = set()

    # --- streams --------------------------------------------------------------------------------

    def open_stream(self) -> ProviderStream:
        """A new provider stream; the broker mints its connection id."""
        stream = ProviderStream(
            connection_id=mint_id("conn"), outbox=Notifier(self._queue_size), on_overflow=self._overflowed
        )
        self._streams.add(stream)
        if self._shutting_down():
            stream.outbox.close()
        return stream

    def stream_lost(self, stream: ProviderStream) -> None:
        """The provider's stream ended (EOF, cancellation, transport failure): its live
        registration is retired, its invocations settle ``lost``, pending forms close ``provider_lost``."""
        self._streams.discard(stream)
        stream.outbox.close()
        registration = stream.registration
        if registration is not None and registration.live:
            self._retire(registration, "provider disconnected")

    def end_streams(self) -> None:
        """End every provider stream (shutdown)."""
        for stream in list(self._streams):
            stream.outbox.close()

    def _overflowed(self, stream: ProviderStream) -> None:
        """The provider does not read its stream: it is lost rather than buffered for without bound."""
        self._counters["provider_queue_overflows"] += 1
        registration = stream.registration
        if registration is not None and registration.live:
            asyncio.get_running_loop().call_soon(self._retire_if_live, registration, "provider stream overflowed")

    def invoke(self, invocation: Invocation, registration: Registration) -> None:
        """The invocation is live: its execution timer runs and the provider gets ``invoke``."""
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
        registration.stream.send(broker_pb2.ConnectResponse(invoke=invoke))

    def _retire(self, registration: Registration, reason: str) -> None:
        """Take ``registration`` out of routing and settle its invocations ``lost`` (forms close ``provider_lost``)."""
        self._registry.remove(registration)
        for invocation in self._live.of(registration):
            self._settlement.lose(invocation, reason, interaction_pb2.CLOSE_REASON_PROVIDER_LOST, cancel_reason=reason)
        log.info(
            "provider_retired",
            extra={"provider_id": registration.provider_id, "registration_id": registration.registration_id},
        )
        self._on_registrations()

    def _retire_if_live(self, registration: Registration, reason: str) -> None:
        if registration.live:
            self._retire(registration, reason)

    def retire_silent_providers(self) -> None:
        """The liveness sweep: a provider silent for three heartbeat intervals is lost."""
        deadline = time.monotonic() - 3 * self.heartbeat_seconds
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
            rejection.count(self._counters)
            log.info(
                "frame_rejected",
                extra={
                    "connection_id": stream.connection_id,
                    "invocation_id": rejection.invocation_id,
                    "reject_reason": broker_pb2.RejectReason.Name(rejection.reason),
                },
            )
            stream.send(rejection.to_frame())

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
        if self._shutting_down():
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
        self._on_registrations()
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
        interval.FromNanoseconds(int(self.heartbeat_seconds * 1e9))
        registered = broker_pb2.Registered(
            registration_id=registration.registration_id,
            connection_id=stream.connection_id,
            heartbeat_interval=interval,
        )
        stream.send(broker_pb2.ConnectResponse(registered=registered))

    def _apply_tools_changed(self, registration: Registration, frame: broker_pb2.ToolsChanged) -> None:
        tools, problem = check_tools(frame.tools)
        if problem is not None:
            raise FrameRejection(broker_pb2.REJECT_REASON_INVALID_FRAME, "", problem)
        self._refuse_claim(registration.provider_id, tools)
        changed = self._registry.replace_tools(registration, tools)
        for invocation in self._live.of(registration):
            if invocation.qualified_name in changed:
                self._settlement.settle(
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
        invocation = self._live.get(invocation_id)
        registration = stream.registration
        if invocation is None:
            owner = self._live.settled_on(invocation_id)
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
        self._settlement.delivered(invocation)

    def _apply_interaction_request(self, stream: ProviderStream, frame: broker_pb2.InteractionRequest) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        self._settlement.delivered(invocation)
        if invocation.form_bound:
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
        self._forms.open(invocation, stream, frame)

    def _apply_result(self, stream: ProviderStream, frame: broker_pb2.InvocationResult) -> None:
        invocation = self._owned(stream, frame.invocation_id)
        self._settlement.delivered(invocation)
        if invocation.form_bound:
            self._settlement.fail(
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
        self._settlement.settle(
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
        self._settlement.delivered(invocation)
        code = (
            frame.code if frame.code != broker_pb2.FAILURE_CODE_UNSPECIFIED else broker_pb2.FAILURE_CODE_PROVIDER_ERROR
        )
        self._settlement.fail(
            invocation,
            code,
            frame.message[:MAX_MESSAGE_CHARS],
            form_close=interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
            cancel=False,
        )
