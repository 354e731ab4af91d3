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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.interaction.v1 import interaction_pb2
from services.core import json_text
from services.core.form import Answer, Form
from services.core.form.protobuf import answer_from_proto, form_to_proto
from services.mcp_provider.connection import ConnectionSnapshot, McpConnection, ServerState, SignIn
from services.mcp_provider.errors import FAILURE_CODES, CallErrorCode, InteractionAborted, McpToolCallError
from services.mcp_provider.manager import McpClientManager, RoundSlot, current_round
from services.mcp_provider.status import StatusReporter, server_status, timestamp

log = logging.getLogger("maka.mcp_provider.provider")


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


MAX_TOOL_NAME_CHARS = 256
"""The broker's id cap (``services.broker.validation.MAX_ID_CHARS``)."""


def registrable(name: str) -> bool:
    """True when the broker accepts ``name`` as a Tool name: 1-256 printable code points, no ``:``."""
    return 0 < len(name) <= MAX_TOOL_NAME_CHARS and name.isprintable() and ":" not in name


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
    calls: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = field(default_factory=dict)
    forms: dict[tuple[str, str], asyncio.Future[broker_pb2.InteractionResult]] = field(default_factory=dict)
    counter: int = 0

    def send(self, frame: broker_pb2.ConnectRequest) -> None:
        if self.alive:
            self.outbox.put_nowait(frame)


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
        self._initial = reconnect_initial_seconds
        self._max = reconnect_max_seconds
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

    async def close(self) -> None:
        """Stop in-flight calls (sending nothing more), end the stream, stop the task."""
        self._closing.set()
        self._changed.set()
        stream = self._stream
        if stream is not None:
            await self._end(stream)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

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
        delay = self._initial
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
                delay = self._initial
            if self._closing.is_set():
                break
            if self.connection.generation == stream.generation and (
                self.connection.connected or self.connection.sign_in_state()[0] is SignIn.REQUIRED
            ):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._closing.wait()
                delay = min(delay * 2, self._max)

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
        kind = response.WhichOneof("frame")
        if kind == "registered":
            interval = response.registered.heartbeat_interval.ToTimedelta().total_seconds()
            if interval > 0:
                stream.heartbeat_seconds = interval
            stream.registered.set()
            self.registrations += 1
            log.info(
                "provider_registered",
                extra={"provider_id": self.provider_id, "registration_id": response.registered.registration_id},
            )
        elif kind == "invoke":
            invoke = response.invoke
            if invoke.invocation_id in stream.calls:
                return
            stop = asyncio.Event()
            task = asyncio.create_task(self._invoke(stream, invoke, stop))
            stream.calls[invoke.invocation_id] = (task, stop)
            self._calls_changed()
        elif kind == "interaction_result":
            result = response.interaction_result
            future = stream.forms.pop((result.invocation_id, result.correlation_id), None)
            if future is not None and not future.done():
                future.set_result(result)
        elif kind == "cancel":
            entry = stream.calls.get(response.cancel.invocation_id)
            if entry is not None:
                entry[1].set()
        elif kind == "sign_in_callback":
            callback = response.sign_in_callback
            if not self.connection.complete_sign_in(callback.code, callback.state, callback.iss, callback.error):
                log.info("oauth_callback_ignored", extra={"server": self.connection.name})
        elif kind == "sign_out":
            task = asyncio.create_task(self.connection.sign_out())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif kind == "rejected":
            rejected = response.rejected
            log.warning(
                "provider_frame_rejected",
                extra={
                    "provider_id": self.provider_id,
                    "invocation_id": rejected.invocation_id,
                    "reject_reason": broker_pb2.RejectReason.Name(rejected.reason),
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

    async def _invoke(self, stream: _Stream, invoke: broker_pb2.Invoke, stop: asyncio.Event) -> None:
        invocation_id = invoke.invocation_id
        server = self.connection.name

        async def form_handler(form: Form) -> Answer:
            stream.counter += 1
            correlation_id = f"{invocation_id}/{stream.counter}"
            future: asyncio.Future[broker_pb2.InteractionResult] = asyncio.get_running_loop().create_future()
            stream.forms[(invocation_id, correlation_id)] = future
            request = broker_pb2.InteractionRequest(
                invocation_id=invocation_id, correlation_id=correlation_id, form=form_to_proto(form)
            )
            slot = current_round()
            if slot is not None:
                request.round.CopyFrom(round_to_proto(slot))
            stream.send(broker_pb2.ConnectRequest(interaction_request=request))
            try:
                result = await future
            finally:
                stream.forms.pop((invocation_id, correlation_id), None)
            if result.close_reason == interaction_pb2.CLOSE_REASON_ANSWERED and result.HasField("answer"):
                # Confirm receipt before the retry: the broker records the answer delivered
                # (docs/security.md "No answer after settlement").
                stream.send(
                    broker_pb2.ConnectRequest(
                        interaction_received=broker_pb2.InteractionReceived(
                            invocation_id=invocation_id,
                            correlation_id=correlation_id,
                            interaction_id=result.interaction_id,
                        )
                    )
                )
                return answer_from_proto(result.answer)
            code = _CLOSE_CODES.get(result.close_reason, CallErrorCode.INTERACTION_CLOSED)
            raise InteractionAborted(code, f"the form closed: {interaction_pb2.CloseReason.Name(result.close_reason)}")

        async def report(progress: float, total: float | None, message: str | None) -> None:
            frame = broker_pb2.InvocationProgress(invocation_id=invocation_id, progress=progress, message=message or "")
            if total is not None:
                frame.total = total
            stream.send(broker_pb2.ConnectRequest(progress=frame))

        try:
            try:
                arguments = json_text.loads(invoke.arguments_json or "{}")
            except json_text.JsonTextError:
                arguments = None
            if not isinstance(arguments, dict):
                raise McpToolCallError(CallErrorCode.INVALID_REQUEST, "arguments_json must be a JSON object")
            outcome = await self.manager.call_tool(
                server,
                invoke.tool_name,
                arguments,
                form_handler=form_handler,
                progress=report,
                stop=stop,
                link_alive=lambda: stream.alive,
            )
            if stop.is_set():
                return
            stream.send(
                broker_pb2.ConnectRequest(
                    result=broker_pb2.InvocationResult(
                        invocation_id=invocation_id,
                        call_tool_result_json=json.dumps(outcome.result, ensure_ascii=False),
                    )
                )
            )
        except InteractionAborted as aborted:
            log.info("invocation_aborted", extra={"invocation_id": invocation_id, "code": aborted.code.value})
        except McpToolCallError as error:
            log.info("invocation_failed", extra={"invocation_id": invocation_id, "code": error.code.value})
            if error.code is CallErrorCode.STOPPED or stop.is_set():
                return
            stream.send(
                broker_pb2.ConnectRequest(
                    failure=broker_pb2.InvocationFailure(
                        invocation_id=invocation_id, code=FAILURE_CODES[error.code], message=error.message
                    )
                )
            )
        except Exception as error:
            # No traceback: an unexpected SDK exception's text could quote MCP params (requestState).
            log.error("invocation_crashed", extra={"invocation_id": invocation_id, "error_type": type(error).__name__})
            stream.send(
                broker_pb2.ConnectRequest(
                    failure=broker_pb2.InvocationFailure(
                        invocation_id=invocation_id,
                        code=broker_pb2.FAILURE_CODE_PROVIDER_ERROR,
                        message=f"provider error ({type(error).__name__})",
                    )
                )
            )
        finally:
            stream.calls.pop(invocation_id, None)
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


class McpProvider:
    """Every :class:`BrokerLink` of this process over one broker channel, and the status report.

    :meth:`add_server` / :meth:`remove_server` let a config reload change the set of servers while
    the others keep serving (their links and connections are not touched).
    """

    def __init__(
        self,
        manager: McpClientManager,
        channel: grpc.aio.Channel,
        *,
        reporter_id: str = "",
        **link_options: float,
    ) -> None:
        self.manager = manager
        self.channel = channel
        self._stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        self._link_options = link_options
        self.reporter_id = reporter_id or f"mcp-provider@{socket.gethostname()}:{os.getpid()}"
        self.config_generation = 1
        self.config_errors: list[str] = []
        self.config_changes: list[str] = []
        self.config_reload_time: float | None = None
        """When the last reload was applied or rejected (``time.time()``); None before any reload."""
        self.reporter = StatusReporter(
            self._stub,
            self.report,
            reconnect_initial_seconds=link_options.get("reconnect_initial_seconds", 0.5),
            reconnect_max_seconds=link_options.get("reconnect_max_seconds", 30.0),
        )
        self.links: dict[str, BrokerLink] = {}
        for connection in manager.connections.values():
            self._link(connection)

    def _link(self, connection: McpConnection) -> BrokerLink:
        link = BrokerLink(connection, self.manager, self._stub, **self._link_options)
        link.on_calls_changed = self.reporter.poke_calls
        connection.on_status(self.reporter.poke)
        connection.subscribe(self._poke_async)
        self.links[connection.name] = link
        return link

    async def _poke_async(self, snapshot: ConnectionSnapshot) -> None:
        self.reporter.poke()

    def report(self) -> broker_pb2.ReportServersRequest:
        """The current ``ReportServersRequest`` snapshot of every server."""
        servers = [
            server_status(connection, self.links[name].live_calls if name in self.links else 0)
            for name, connection in sorted(self.manager.connections.items())
        ]
        return broker_pb2.ReportServersRequest(
            reporter_id=self.reporter_id,
            servers=servers,
            config_generation=self.config_generation,
            config_errors=self.config_errors,
            config_changes=self.config_changes,
            config_reload_time=None if self.config_reload_time is None else timestamp(self.config_reload_time),
        )

    async def start(self) -> None:
        """Start the MCP connections, the broker links and the status report."""
        await self.manager.start()
        for link in self.links.values():
            await link.start()
        await self.reporter.start()

    async def add_server(self, connection: McpConnection) -> None:
        """Manage, connect and register a new server (config reload: added or changed)."""
        self.manager.add(connection)
        link = self._link(connection)
        await connection.start()
        await link.start()
        self.reporter.poke()

    async def remove_server(self, name: str, *, drain_seconds: float = 0.0) -> None:
        """Stop serving ``name``: with ``drain_seconds`` its calls in flight may finish first (new calls
        fail ``SERVER_UNAVAILABLE``), then its link and connection close (what is left ends lost)."""
        connection = self.manager.connections.get(name)
        link = self.links.get(name)
        if connection is None:
            return
        if drain_seconds > 0 and link is not None:
            connection.set_state(ServerState.DRAINING)
            await link.wait_idle(drain_seconds)
        if link is not None:
            await link.close()
            if self.links.get(name) is link:
                del self.links[name]
        await connection.close()
        if self.manager.connections.get(name) is connection:  # not a server re-added while draining
            self.manager.remove(name)
        self.reporter.poke()

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until no call is in flight on any link (the broker, draining too,
        sends no new ones); True when every call finished. In-flight calls are left untouched."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for link in self.links.values():
            await link.wait_idle(max(0.0, deadline - loop.time()))
        return all(link.live_calls == 0 for link in self.links.values())

    async def close(self) -> None:
        """Stop the status report and the links (in-flight calls send nothing more), then the MCP
        connections and the channel."""
        await self.reporter.close()
        for link in self.links.values():
            await link.close()
        await self.manager.close()
        await self.channel.close()
