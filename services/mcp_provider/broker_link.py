"""The provider's side of the broker's ``CapabilityBrokerService.Connect`` (``maka.broker.v1``).

One :class:`BrokerLink` per configured MCP server keeps one ``Connect`` stream registered as provider
``mcp:<server>`` with that server's Tools (``claimed_server`` = the server name, so the broker
qualifies them ``SERVER:TOOL``). Rules:

- A stream is registered for exactly one MCP **connection generation**. When the MCP connection is
  lost or replaced (reconnect = new generation) the stream is closed and, once the server is back, a
  new stream registers again: the broker settles the old invocations as lost (RFC criterion 8).
  A ``tools/list_changed`` refresh within one generation sends ``ToolsChanged``.
- ``Invoke`` runs :meth:`McpClientManager.call_tool` in its own task with a FormHandler that sends
  ``InteractionRequest`` (provider-local correlation id ``<invocation>/<n>``) and awaits the matching
  ``InteractionResult``. A result with a close reason and no answer aborts the call: no retry.
- The outcome is one ``InvocationResult`` (the ``CallToolResult`` JSON) or ``InvocationFailure``
  (stable ``FailureCode``, secret-free message). MCP progress becomes ``InvocationProgress``.
- A ``FrameRejected`` for a pending ``InteractionRequest`` fails the call with ``INVALID_FORM`` (or
  ``INTERACTION_CLOSED``) and an ``InvocationFailure``: the broker changed nothing, so no retry follows.
- ``CancelInvocation`` stops the call: the in-flight MCP request is cancelled and nothing more is
  sent for it (no failure frame either: the broker already settled it).
- Heartbeats go out every ``Registered.heartbeat_interval`` (default ``heartbeat_seconds``).
- :meth:`BrokerLink.close` (shutdown, a server removed by a reload) takes no new invocation, stops the
  calls still in flight, then half-closes the stream behind every frame already queued and waits
  (bounded) for the broker to end it: a result sent just before the close is delivered, never dropped.
- If the stream fails, the link reconnects with exponential backoff, reset by every successful
  registration (so a broker restart is followed by a prompt re-registration); calls in flight on the
  old stream are stopped (their outcome belongs to the broker's ``lost`` settlement).
- An answered ``InteractionResult`` is confirmed with ``InteractionReceived`` before the retry, so the
  broker records the answer delivered (docs/security.md "No answer after settlement").
- OAuth sign-in (docs/security.md "OAuth"): while the server waits for a sign-in and is not connected,
  the link registers with no Tools and publishes ``SignInStatus`` (REQUIRED + authorization URL), so
  the broker fails calls at once with ``AUTH_REQUIRED`` and surfaces can show the prompt. A
  ``SignInCallback`` from the broker completes the SDK's flow; ``SignOutRequest`` forgets the tokens.
  Once connected the stream is re-registered with the Tools and SIGNED_IN.
- A ``Register`` the broker refuses with ``ALREADY_REGISTERED`` (another provider's live registration
  holds the server name) ends that stream: the link keeps the broker's reason as :attr:`BrokerLink.refusal`
  (the status report shows the server failed with ``refused by the broker: <reason>``, so ``maka status``
  and a call's ``SERVER_UNAVAILABLE`` name it) and registers again after the reconnect backoff, in case
  the other provider goes away. The next ``Registered`` clears it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.interaction.v1 import interaction_pb2
from services.core import json_text, messages
from services.core.form import Answer, Form
from services.core.form.protobuf import answer_from_proto, form_to_proto
from services.core.limits import MAX_ID_CHARS
from services.mcp_provider.causes import clean_line
from services.mcp_provider.connection import ConnectionSnapshot, McpConnection, SignIn
from services.mcp_provider.errors import FAILURE_CODES, CallErrorCode, InteractionAborted, McpToolCallError
from services.mcp_provider.manager import McpClientManager, RoundSlot, current_round
from services.mcp_provider.settings import reconnect_backoff
from services.mcp_provider.stop import Stop

log = logging.getLogger("maka.mcp_provider.broker_link")


_CLOSE_CODES: dict[int, CallErrorCode] = {
    interaction_pb2.CLOSE_REASON_STOPPED: CallErrorCode.STOPPED,
    interaction_pb2.CLOSE_REASON_TIMED_OUT: CallErrorCode.INTERACTION_TIMED_OUT,
    interaction_pb2.CLOSE_REASON_LEASE_EXPIRED: CallErrorCode.INTERACTION_TIMED_OUT,
    interaction_pb2.CLOSE_REASON_PROVIDER_LOST: CallErrorCode.CONNECTION_LOST,
    interaction_pb2.CLOSE_REASON_SUPERSEDED: CallErrorCode.BINDING_CHANGED,
    interaction_pb2.CLOSE_REASON_ROUND_EXPIRED: CallErrorCode.ROUND_EXPIRED,
}
"""A form closed without an answer → why the call aborts (everything else: ``INTERACTION_CLOSED``)."""


def round_to_proto(slot: RoundSlot) -> interaction_pb2.Round:
    """A :class:`RoundSlot` as ``maka.interaction.v1.Round`` (deadline to the millisecond)."""
    message = interaction_pb2.Round(position=slot.position, size=slot.size)
    if slot.deadline is not None:
        message.deadline.FromMilliseconds(int(slot.deadline * 1000))
    return message


def provider_id(server: str) -> str:
    """The broker provider id of MCP server ``server``: ``mcp:<server>``."""
    return f"mcp:{server}"


def registrable(name: str) -> bool:
    """True when the broker accepts ``name`` as a Tool name: 1-256 printable code points, no ``:``."""
    return 0 < len(name) <= MAX_ID_CHARS and name.isprintable() and ":" not in name


def descriptors(snapshot: ConnectionSnapshot) -> list[broker_pb2.ToolDescriptor]:
    """The snapshot's Tools as broker descriptors (``claimed_server`` = the server name).

    A Tool whose name the broker would refuse is left out (and logged) rather than failing the
    whole registration: one odd server-side name must not hide the server's other Tools.
    """
    out: list[broker_pb2.ToolDescriptor] = []
    for tool in snapshot.tools:
        if not registrable(tool.name):
            log.warning("tool_not_registrable", extra={"server": snapshot.server, "name_chars": len(tool.name)})
            continue
        out.append(
            broker_pb2.ToolDescriptor(
                name=tool.name,
                description=tool.description,
                input_schema_json=json.dumps(tool.input_schema, ensure_ascii=False),
                claimed_server=snapshot.server,
                output_schema_json=(
                    json.dumps(tool.output_schema, ensure_ascii=False) if tool.output_schema is not None else ""
                ),
                title=tool.title,
                annotations_json=json.dumps(tool.annotations, ensure_ascii=False) if tool.annotations else "",
            )
        )
    return out


SIGN_IN_STATES = {
    SignIn.NONE: broker_pb2.SIGN_IN_STATE_UNSPECIFIED,
    SignIn.REQUIRED: broker_pb2.SIGN_IN_STATE_REQUIRED,
    SignIn.SIGNED_IN: broker_pb2.SIGN_IN_STATE_SIGNED_IN,
}


def sign_in_frame(snapshot: ConnectionSnapshot) -> broker_pb2.ConnectRequest:
    """The ``SignInStatus`` frame of ``snapshot`` (the URL only while REQUIRED)."""
    return broker_pb2.ConnectRequest(
        sign_in_status=broker_pb2.SignInStatus(
            server=snapshot.server,
            state=SIGN_IN_STATES[snapshot.sign_in],
            authorization_url=snapshot.authorization_url,
        )
    )


@dataclass(frozen=True)
class Refusal:
    """The broker refused this link's registration: its cause (``refused by the broker: <reason>``, one
    bounded line) and when the link registers again (epoch seconds; ``None`` until it is scheduled)."""

    cause: str
    time: float
    next_retry_time: float | None = None


@dataclass
class _Stream:
    """One live ``Connect`` stream: its outbox, generation and in-flight calls."""

    generation: int
    outbox: asyncio.Queue[broker_pb2.ConnectRequest | None] = field(default_factory=asyncio.Queue)
    alive: bool = True
    registered: asyncio.Event = field(default_factory=asyncio.Event)
    heartbeat_seconds: float = 10.0
    sign_in_only: bool = False
    """Opened while the server waits for sign-in (no Tools); ends when the connection comes up."""
    sign_in: SignIn = SignIn.NONE
    sign_in_url: str = ""
    refused: str = ""
    """The broker's reason when it refused this stream's ``Register`` (the stream then ends)."""
    calls: dict[str, tuple[asyncio.Task[None], Stop]] = field(default_factory=dict)
    forms: dict[tuple[str, str], asyncio.Future[broker_pb2.InteractionResult]] = field(default_factory=dict)
    counter: int = 0

    def send(self, frame: broker_pb2.ConnectRequest) -> None:
        if self.alive:
            self.outbox.put_nowait(frame)


def _arguments(invoke: broker_pb2.Invoke) -> dict[str, Any]:
    """The call's arguments. Raises :class:`McpToolCallError` ``INVALID_REQUEST`` unless a JSON object."""
    try:
        arguments = json_text.loads(invoke.arguments_json or "{}")
    except json_text.JsonTextError:
        arguments = None
    if not isinstance(arguments, dict):
        raise McpToolCallError(CallErrorCode.INVALID_REQUEST, "arguments_json must be a JSON object")
    return arguments


class _Invocation:
    """One ``Invoke`` on one stream: the :data:`~services.mcp_provider.manager.FormHandler` and progress
    handler the manager runs the call with, and the frames that end it.

    :meth:`ask` sends each form as an ``InteractionRequest`` (provider-local correlation id
    ``<invocation>/<n>``) and awaits the matching ``InteractionResult``.
    """

    def __init__(self, stream: _Stream, invocation_id: str) -> None:
        self.stream = stream
        self.invocation_id = invocation_id

    async def ask(self, form: Form) -> Answer:
        """Put ``form`` to the Host and return the answer. Raises :class:`InteractionAborted` when the
        form closed without one (the call aborts, no retry)."""
        self.stream.counter += 1
        correlation_id = f"{self.invocation_id}/{self.stream.counter}"
        result = await self._interaction(form, correlation_id)
        if result.close_reason == interaction_pb2.CLOSE_REASON_ANSWERED and result.HasField("answer"):
            # Confirm receipt before the retry: the broker records the answer delivered
            # (docs/security.md "No answer after settlement").
            self.stream.send(
                broker_pb2.ConnectRequest(
                    interaction_received=broker_pb2.InteractionReceived(
                        invocation_id=self.invocation_id,
                        correlation_id=correlation_id,
                        interaction_id=result.interaction_id,
                    )
                )
            )
            return answer_from_proto(result.answer)
        code = _CLOSE_CODES.get(result.close_reason, CallErrorCode.INTERACTION_CLOSED)
        raise InteractionAborted(code, f"the form closed: {interaction_pb2.CloseReason.Name(result.close_reason)}")

    async def _interaction(self, form: Form, correlation_id: str) -> broker_pb2.InteractionResult:
        """Send the ``InteractionRequest`` (with the form's MRTR round) and await its result."""
        key = (self.invocation_id, correlation_id)
        future: asyncio.Future[broker_pb2.InteractionResult] = asyncio.get_running_loop().create_future()
        self.stream.forms[key] = future
        request = broker_pb2.InteractionRequest(
            invocation_id=self.invocation_id, correlation_id=correlation_id, form=form_to_proto(form)
        )
        slot = current_round()
        if slot is not None:
            request.round.CopyFrom(round_to_proto(slot))
        self.stream.send(broker_pb2.ConnectRequest(interaction_request=request))
        try:
            return await future
        finally:
            self.stream.forms.pop(key, None)

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        """MCP progress of the call as ``InvocationProgress``."""
        frame = broker_pb2.InvocationProgress(
            invocation_id=self.invocation_id, progress=progress, message=message or ""
        )
        if total is not None:
            frame.total = total
        self.stream.send(broker_pb2.ConnectRequest(progress=frame))

    def send_result(self, result: dict[str, Any]) -> None:
        """The complete ``CallToolResult`` as ``InvocationResult``."""
        self.stream.send(
            broker_pb2.ConnectRequest(
                result=broker_pb2.InvocationResult(
                    invocation_id=self.invocation_id, call_tool_result_json=json.dumps(result, ensure_ascii=False)
                )
            )
        )

    def send_failure(self, code: broker_pb2.FailureCode.ValueType, message: str) -> None:
        """An ``InvocationFailure`` (stable code, secret-free message)."""
        self.stream.send(
            broker_pb2.ConnectRequest(
                failure=broker_pb2.InvocationFailure(invocation_id=self.invocation_id, code=code, message=message)
            )
        )


class BrokerLink:
    """Keeps MCP server ``connection`` registered with the broker (see module docstring)."""

    def __init__(
        self,
        connection: McpConnection,
        manager: McpClientManager,
        stub: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
        *,
        reconnect_initial_seconds: float = 0.5,
        reconnect_max_seconds: float = 30.0,
        heartbeat_seconds: float = 10.0,
    ) -> None:
        self.connection = connection
        self.manager = manager
        self._stub = stub
        self._backoff = reconnect_backoff(reconnect_initial_seconds, reconnect_max_seconds)
        self._heartbeat = heartbeat_seconds
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._stream: _Stream | None = None
        self._task: asyncio.Task[None] | None = None
        self.registrations = 0
        """How many times a stream registered (tests read it)."""
        self.heartbeats = 0
        """How many heartbeat frames were queued (tests read it)."""
        self._background: set[asyncio.Task[None]] = set()
        self.on_calls_changed: Callable[[], None] | None = None
        """Called when a call starts or ends on this link (the status report counts them)."""
        self.on_status_changed: Callable[[], None] | None = None
        """Called when :attr:`refusal` changes (the status report shows it)."""
        self.refusal: Refusal | None = None
        """Why the broker refused the latest registration, until one succeeds."""
        self._idle = asyncio.Event()
        self._idle.set()
        connection.subscribe(self._on_change)

    @property
    def live_calls(self) -> int:
        """Calls in flight on the current stream."""
        stream = self._stream
        return len(stream.calls) if stream is not None and stream.alive else 0

    async def wait_idle(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no call is in flight; True when none is."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.live_calls:
                    self._idle.clear()
                    await self._idle.wait()
        return self.live_calls == 0

    def _set_refusal(self, refusal: Refusal | None) -> None:
        if refusal != self.refusal:
            self.refusal = refusal
            if self.on_status_changed is not None:
                self.on_status_changed()

    def _calls_changed(self) -> None:
        if not self.live_calls:
            self._idle.set()
        if self.on_calls_changed is not None:
            self.on_calls_changed()

    @property
    def provider_id(self) -> str:
        """``mcp:<server>``."""
        return provider_id(self.connection.name)

    @property
    def registered(self) -> bool:
        """True while a stream is registered for the live connection generation."""
        stream = self._stream
        return stream is not None and stream.alive and stream.registered.is_set()

    async def start(self) -> None:
        """Start the link task. Returns at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"broker-link-{self.connection.name}")

    async def close(self, timeout: float = 5.0) -> None:
        """Stop taking invocations, stop the calls still in flight (they send nothing more), half-close
        the stream and wait, at most ``timeout`` s, for the broker to end it; then stop the task.

        The half-close (the request iterator ends: gRPC's ``done_writing``) comes after every frame
        already queued, so a result sent just before the close reaches the broker before it sees the
        provider go; cancelling the call instead could drop it and the broker would settle the call
        ``lost``. A stream the broker never registered carries nothing to wait for.
        """
        self._closing.set()
        self._changed.set()
        stream = self._stream
        if stream is not None:
            await self._end(stream)
        task = self._task
        if task is None:
            return
        if stream is not None and stream.registered.is_set() and timeout > 0:
            # The broker answers the half-close by ending the stream: _serve returns, _run sees _closing.
            await asyncio.wait([task], timeout=timeout)
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _on_change(self, snapshot: ConnectionSnapshot) -> None:
        stream = self._stream
        if stream is not None and stream.alive:
            if stream.sign_in_only and not snapshot.connected and snapshot.generation == stream.generation:
                if snapshot.sign_in is SignIn.NONE:
                    await self._end(stream)  # the prompt went away without a connection: register again later
                else:
                    self._send_sign_in(stream, snapshot)
            elif not snapshot.connected or snapshot.generation != stream.generation:
                log.info("mcp_generation_changed", extra={"provider_id": self.provider_id})
                await self._end(stream)
            elif snapshot.sign_in is not stream.sign_in or snapshot.authorization_url != stream.sign_in_url:
                # A sign-in on a live connection (scope step-up, refresh refused): publish it; the Tools stay.
                self._send_sign_in(stream, snapshot)
            else:  # frames are ordered: a ToolsChanged queued behind a pending Register still applies after it
                stream.send(
                    broker_pb2.ConnectRequest(tools_changed=broker_pb2.ToolsChanged(tools=descriptors(snapshot)))
                )
        self._changed.set()

    async def _run(self) -> None:
        retry = self._backoff.attempts()
        while not self._closing.is_set():
            snapshot = self.connection.snapshot()
            if not snapshot.connected and snapshot.sign_in is not SignIn.REQUIRED:
                self._changed.clear()
                if not self.connection.connected and self.connection.sign_in_state()[0] is not SignIn.REQUIRED:
                    await self._changed.wait()
                continue
            stream = _Stream(
                snapshot.generation, heartbeat_seconds=self._heartbeat, sign_in_only=not snapshot.connected
            )
            self._stream = stream
            try:
                await self._serve(stream, snapshot)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning(
                    "broker_stream_failed", extra={"provider_id": self.provider_id, "error_type": type(error).__name__}
                )
            finally:
                await self._end(stream)
            # A successful registration resets the backoff, so the provider registers again promptly
            # after every broker restart; only attempts that never registered back off further.
            if stream.registered.is_set():
                retry.reset()
            if self._closing.is_set():
                break
            if self.connection.generation == stream.generation and (
                self.connection.connected or self.connection.sign_in_state()[0] is SignIn.REQUIRED
            ):
                delay = retry.next_delay()
                if stream.refused and self.refusal is not None:  # shown as the server's next retry
                    self._set_refusal(Refusal(self.refusal.cause, self.refusal.time, time.time() + delay))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._closing.wait()

    async def _frames(self, stream: _Stream) -> AsyncIterator[broker_pb2.ConnectRequest]:
        while True:
            frame = await stream.outbox.get()
            if frame is None:
                return
            yield frame

    async def _heartbeats(self, stream: _Stream) -> None:
        await stream.registered.wait()
        while stream.alive:
            await asyncio.sleep(stream.heartbeat_seconds)
            stream.send(broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat()))
            self.heartbeats += 1

    async def _serve(self, stream: _Stream, snapshot: ConnectionSnapshot) -> None:
        stream.send(
            broker_pb2.ConnectRequest(
                register=broker_pb2.Register(
                    provider_id=self.provider_id,
                    display_name=f"MCP server {snapshot.server}",
                    tools=descriptors(snapshot),
                )
            )
        )
        if snapshot.sign_in is not SignIn.NONE:
            self._send_sign_in(stream, snapshot)
        call = self._stub.Connect(self._frames(stream))
        heartbeats = asyncio.create_task(self._heartbeats(stream))
        try:
            async for response in call:
                self._handle(stream, response)
                if stream.refused:
                    break  # registering again (after the backoff) is the only way forward
        except grpc.aio.AioRpcError as error:
            log.warning("broker_stream_ended", extra={"provider_id": self.provider_id, "code": error.code().name})
        finally:
            heartbeats.cancel()
            call.cancel()

    def _send_sign_in(self, stream: _Stream, snapshot: ConnectionSnapshot) -> None:
        if snapshot.sign_in is not stream.sign_in or snapshot.authorization_url != stream.sign_in_url:
            stream.sign_in = snapshot.sign_in
            stream.sign_in_url = snapshot.authorization_url
            stream.send(sign_in_frame(snapshot))

    def _handle(self, stream: _Stream, response: broker_pb2.ConnectResponse) -> None:
        """Apply one broker frame: one ``_apply_<frame>`` method per ``ConnectResponse`` kind (others are ignored)."""
        kind = response.WhichOneof("frame")
        if kind == "registered":
            self._apply_registered(stream, response.registered)
        elif kind == "invoke":
            self._apply_invoke(stream, response.invoke)
        elif kind == "interaction_result":
            self._apply_interaction_result(stream, response.interaction_result)
        elif kind == "cancel":
            self._apply_cancel(stream, response.cancel)
        elif kind == "sign_in_callback":
            self._apply_sign_in_callback(response.sign_in_callback)
        elif kind == "sign_out":
            self._apply_sign_out()
        elif kind == "rejected":
            self._apply_rejected(stream, response.rejected)

    def _apply_registered(self, stream: _Stream, registered: broker_pb2.Registered) -> None:
        interval = registered.heartbeat_interval.ToTimedelta().total_seconds()
        if interval > 0:
            stream.heartbeat_seconds = interval
        stream.registered.set()
        self.registrations += 1
        self._set_refusal(None)
        log.info(
            "provider_registered",
            extra={"provider_id": self.provider_id, "registration_id": registered.registration_id},
        )

    def _apply_invoke(self, stream: _Stream, invoke: broker_pb2.Invoke) -> None:
        if not stream.alive or invoke.invocation_id in stream.calls:
            # A stream being closed runs nothing new: it could send no outcome (the broker settles it lost).
            return
        stop = Stop()
        task = asyncio.create_task(self._invoke(stream, invoke, stop))
        stream.calls[invoke.invocation_id] = (task, stop)
        self._calls_changed()

    def _apply_interaction_result(self, stream: _Stream, result: broker_pb2.InteractionResult) -> None:
        future = stream.forms.pop((result.invocation_id, result.correlation_id), None)
        if future is not None and not future.done():
            future.set_result(result)

    def _apply_cancel(self, stream: _Stream, cancel: broker_pb2.CancelInvocation) -> None:
        entry = stream.calls.get(cancel.invocation_id)
        if entry is not None:
            entry[1].set()

    def _apply_sign_in_callback(self, callback: broker_pb2.SignInCallback) -> None:
        if not self.connection.complete_sign_in(callback.code, callback.state, callback.iss, callback.error):
            log.info("oauth_callback_ignored", extra={"server": self.connection.name})

    def _apply_sign_out(self) -> None:
        task = asyncio.create_task(self.connection.sign_out())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _apply_rejected(self, stream: _Stream, rejected: broker_pb2.FrameRejected) -> None:
        if (
            rejected.reason == broker_pb2.REJECT_REASON_ALREADY_REGISTERED
            and not rejected.invocation_id
            and not stream.registered.is_set()
        ):
            self._apply_registration_refused(stream, rejected)
            return
        log.warning(
            "provider_frame_rejected",
            extra={
                "provider_id": self.provider_id,
                "invocation_id": rejected.invocation_id,
                "reject_reason": broker_pb2.RejectReason.Name(rejected.reason),
                "reason": rejected.message[:300],
            },
        )
        code = (
            CallErrorCode.INVALID_FORM
            if rejected.reason == broker_pb2.REJECT_REASON_INVALID_FORM
            else CallErrorCode.INTERACTION_CLOSED
        )
        for (invocation_id, _), future in list(stream.forms.items()):
            if invocation_id == rejected.invocation_id and not future.done():
                # The broker changed nothing: fail the call ourselves (a failure frame follows).
                future.set_exception(McpToolCallError(code, "the broker refused the form request"))

    def _apply_registration_refused(self, stream: _Stream, rejected: broker_pb2.FrameRejected) -> None:
        """The broker refused this stream's ``Register``: another provider holds the server name."""
        reason = clean_line(rejected.message) or "the server name is already registered"
        stream.refused = reason
        log.warning("provider_registration_refused", extra={"provider_id": self.provider_id, "reason": reason})
        self._set_refusal(Refusal(messages.claim_refused(reason), time.time()))

    async def _invoke(self, stream: _Stream, invoke: broker_pb2.Invoke, stop: Stop) -> None:
        call = _Invocation(stream, invoke.invocation_id)
        try:
            outcome = await self.manager.call_tool(
                self.connection.name,
                invoke.tool_name,
                _arguments(invoke),
                form_handler=call.ask,
                progress=call.report,
                stop=stop,
                link_alive=lambda: stream.alive,
            )
            if not stop.is_set():
                call.send_result(outcome.result)
        except InteractionAborted as aborted:
            log.info("invocation_aborted", extra={"invocation_id": call.invocation_id, "code": aborted.code.value})
        except McpToolCallError as error:
            log.info("invocation_failed", extra={"invocation_id": call.invocation_id, "code": error.code.value})
            if error.code is not CallErrorCode.STOPPED and not stop.is_set():
                call.send_failure(FAILURE_CODES[error.code], error.message)
        except Exception as error:
            # No traceback: an unexpected SDK exception's text could quote MCP params (requestState).
            log.error(
                "invocation_crashed", extra={"invocation_id": call.invocation_id, "error_type": type(error).__name__}
            )
            call.send_failure(broker_pb2.FAILURE_CODE_PROVIDER_ERROR, f"provider error ({type(error).__name__})")
        finally:
            stream.calls.pop(call.invocation_id, None)
            self._calls_changed()

    async def _end(self, stream: _Stream) -> None:
        """Close ``stream``: stop its calls (they send nothing more), end the request iterator."""
        if not stream.alive:
            return
        stream.alive = False
        for future in stream.forms.values():
            if not future.done():
                future.set_exception(InteractionAborted(CallErrorCode.CONNECTION_LOST, "the broker stream ended"))
        tasks = []
        for task, stop in list(stream.calls.values()):
            stop.set()
            tasks.append(task)
        stream.outbox.put_nowait(None)
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        self._idle.set()
