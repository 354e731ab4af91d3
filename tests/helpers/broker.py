"""Integration harness for the broker: the real Interaction service over the real redis-server,
the real broker on loopback, and synthetic providers/callers/surfaces that are real gRPC clients.

The ``make_stack`` and ``stack`` fixtures (tests/services/broker/conftest.py) build a :class:`BrokerStack`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.broker.main import BrokerApp
from services.broker.main import build as build_broker
from services.broker.settings import Settings as BrokerSettings
from services.core.channels import open_channel
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings
from services.interaction.main import build as build_interaction
from services.interaction.settings import Settings as InteractionSettings
from tests.helpers.waiting import eventually

FRAME_TIMEOUT = 10.0
"""Bound on every single wait for a frame or event."""


def deploy_tool(name: str = "deploy", server: str = "examples") -> broker_pb2.ToolDescriptor:
    return broker_pb2.ToolDescriptor(
        name=name,
        description="Deploy an artifact",
        input_schema_json='{"type":"object","properties":{"artifact":{"type":"string"}}}',
        claimed_server=server,
    )


def target_form() -> form_pb2.Form:
    """The RFC's deployment-target form (a select and a boolean), with a forged requester."""
    return form_pb2.Form(
        message="Choose the deployment target",
        fields=[
            form_pb2.Field(
                name="environment",
                label="Environment",
                required=True,
                single_select=form_pb2.SingleSelectField(
                    options=[
                        form_pb2.Option(value="staging", label="staging"),
                        form_pb2.Option(value="production", label="production"),
                    ]
                ),
            ),
            form_pb2.Field(name="confirm", label="Confirm", required=True, boolean=form_pb2.BooleanField()),
        ],
        requester=form_pb2.Requester(
            provider_id="forged-provider", provider_display_name="Forged", claimed_server="examples"
        ),
    )


def accept_staging() -> form_pb2.Answer:
    return form_pb2.Answer(
        action=form_pb2.ACTION_ACCEPT,
        values={"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)},
    )


class Provider:
    """A synthetic Client Capability provider: one real ``Connect`` stream on loopback."""

    def __init__(self, channel: grpc.aio.Channel, provider_id: str, tools: list[broker_pb2.ToolDescriptor]) -> None:
        self.stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        self.provider_id = provider_id
        self.tools = tools
        self.outgoing: asyncio.Queue[broker_pb2.ConnectRequest | None] = asyncio.Queue()
        self.frames: asyncio.Queue[broker_pb2.ConnectResponse] = asyncio.Queue()
        self.received: list[broker_pb2.ConnectResponse] = []
        self.ended = asyncio.Event()
        self.error: grpc.aio.AioRpcError | None = None
        self.registered = broker_pb2.Registered()
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self) -> broker_pb2.Registered:
        async def requests() -> AsyncIterator[broker_pb2.ConnectRequest]:
            while True:
                item = await self.outgoing.get()
                if item is None:
                    return
                yield item

        self._call = self.stub.Connect(requests())
        self._reader = asyncio.create_task(self._read())
        await self.send(
            broker_pb2.ConnectRequest(
                register=broker_pb2.Register(provider_id=self.provider_id, display_name="Examples", tools=self.tools)
            )
        )
        self.registered = (await self.next("registered")).registered
        return self.registered

    async def _read(self) -> None:
        try:
            async for frame in self._call:
                self.received.append(frame)
                await self.frames.put(frame)
        except grpc.aio.AioRpcError as error:
            self.error = error
        finally:
            self.ended.set()

    async def send(self, request: broker_pb2.ConnectRequest) -> None:
        await self.outgoing.put(request)

    async def next(self, kind: str | None = None) -> broker_pb2.ConnectResponse:
        """The next frame (asserting its kind); raises ``ConnectionError`` once the stream ended."""
        async with asyncio.timeout(FRAME_TIMEOUT):
            getter = asyncio.ensure_future(self.frames.get())
            ended = asyncio.ensure_future(self.ended.wait())
            await asyncio.wait([getter, ended], return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if not getter.done():
                getter.cancel()
                raise ConnectionError(f"the Connect stream ended: {self.error!r}")
            frame = getter.result()
        if kind is not None:
            assert frame.WhichOneof("frame") == kind, frame
        return frame

    async def invoked(self) -> broker_pb2.Invoke:
        return (await self.next("invoke")).invoke

    async def ask(self, invocation_id: str, correlation_id: str = "corr-1", form: form_pb2.Form | None = None) -> None:
        await self.send(
            broker_pb2.ConnectRequest(
                interaction_request=broker_pb2.InteractionRequest(
                    invocation_id=invocation_id, correlation_id=correlation_id, form=form or target_form()
                )
            )
        )

    async def finish(self, invocation_id: str, result_json: str = '{"content":[{"type":"text","text":"ok"}]}') -> None:
        await self.send(
            broker_pb2.ConnectRequest(
                result=broker_pb2.InvocationResult(invocation_id=invocation_id, call_tool_result_json=result_json)
            )
        )

    def kill(self) -> None:
        """Cancel the stream as a crashed provider would."""
        self._call.cancel()

    async def close(self) -> None:
        await self.outgoing.put(None)
        if self._call is not None:
            self._call.cancel()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


class Call:
    """One ``CallTool`` stream from the model side (or, with ``watch``, one ``WatchCall`` reattach),
    events collected in a queue."""

    def __init__(
        self,
        stub: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
        request: broker_pb2.CallToolRequest,
        *,
        watch: broker_pb2.WatchCallRequest | None = None,
    ):
        self.request = request
        self.events: asyncio.Queue[broker_pb2.CallToolResponse] = asyncio.Queue()
        self.all: list[broker_pb2.CallToolResponse] = []
        self.error: grpc.aio.AioRpcError | None = None
        self.done = asyncio.Event()
        self._call: Any = stub.CallTool(request) if watch is None else stub.WatchCall(watch)
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for item in self._call:
                event = item.event if isinstance(item, broker_pb2.WatchCallResponse) else item
                self.all.append(event)
                await self.events.put(event)
        except grpc.aio.AioRpcError as error:
            self.error = error
        finally:
            self.done.set()

    async def next(self, kind: str | None = None) -> broker_pb2.CallToolResponse:
        """The next event (skipping ``accepted`` and keepalive ``status`` unless asked for), asserting its kind."""
        async with asyncio.timeout(FRAME_TIMEOUT):
            event = await self.events.get()
            while kind not in (None, "status") and event.WhichOneof("event") == "status":
                event = await self.events.get()
            if kind not in (None, "accepted") and event.WhichOneof("event") == "accepted":
                event = await self.events.get()
        if kind is not None:
            assert event.WhichOneof("event") == kind, event
        return event

    async def terminal(self) -> broker_pb2.CallToolResponse:
        """Wait for the stream to end; return its last event (asserting it is terminal)."""
        async with asyncio.timeout(FRAME_TIMEOUT):
            await self.done.wait()
        assert self.all, self.error
        last = self.all[-1]
        assert last.WhichOneof("event") in ("result", "failure", "lost", "stopped"), last
        terminals = [e for e in self.all if e.WhichOneof("event") in ("result", "failure", "lost", "stopped")]
        assert len(terminals) == 1
        return last

    def cancel(self) -> None:
        self._call.cancel()


@dataclass
class BrokerStack:
    """The running Interaction service and broker plus clients of both."""

    interaction_settings: InteractionSettings
    interaction: RunningServer
    broker_settings: BrokerSettings
    broker_server: RunningServer
    app: BrokerApp
    channels: list[grpc.aio.Channel] = field(default_factory=list)
    providers: list[Provider] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def broker_target(self) -> str:
        return f"127.0.0.1:{self.broker_server.port}"

    @property
    def interaction_target(self) -> str:
        return f"127.0.0.1:{self.interaction.port}"

    def channel(self, target: str, token: str | None = None) -> grpc.aio.Channel:
        channel = open_channel(target, token=token, tls=ClientTlsSettings())
        self.channels.append(channel)
        return channel

    @property
    def broker(self) -> broker_pb2_grpc.CapabilityBrokerServiceAsyncStub:
        return broker_pb2_grpc.CapabilityBrokerServiceStub(self.channel(self.broker_target))

    @property
    def surface(self) -> interaction_service_pb2_grpc.InteractionServiceAsyncStub:
        return interaction_service_pb2_grpc.InteractionServiceStub(self.channel(self.interaction_target))

    async def provider(
        self, provider_id: str = "mcp:examples", tools: list[broker_pb2.ToolDescriptor] | None = None
    ) -> Provider:
        provider = Provider(self.channel(self.broker_target), provider_id, tools or [deploy_tool()])
        self.providers.append(provider)
        await provider.connect()
        return provider

    def call(
        self,
        tool: str = "examples:deploy",
        *,
        session: str = "s1",
        turn: str = "t1",
        tool_use: str | None = None,
        call_id: str = "",
        arguments_json: str = '{"artifact":"build-42"}',
    ) -> Call:
        call = Call(
            self.broker,
            broker_pb2.CallToolRequest(
                session_id=session,
                turn_id=turn,
                tool_use_id=tool_use or f"tu{next(self._ids)}",
                tool_name=tool,
                arguments_json=arguments_json,
                call_id=call_id,
            ),
        )
        self.calls.append(call)
        return call

    def watch(self, invocation_id: str, resume_token: str = "", token: str | None = None) -> Call:
        """A ``WatchCall`` reattach to ``invocation_id`` after ``resume_token``."""
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(self.channel(self.broker_target, token))
        call = Call(
            stub,
            broker_pb2.CallToolRequest(),
            watch=broker_pb2.WatchCallRequest(invocation_id=invocation_id, resume_token=resume_token),
        )
        self.calls.append(call)
        return call

    async def pending(self, session: str = "s1") -> list[interaction_pb2.Interaction]:
        response = await self.surface.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=[session]))
        return list(response.pending)

    async def get(self, interaction_id: str, session: str = "s1") -> interaction_pb2.Interaction:
        response = await self.surface.GetInteraction(
            interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id, session_id=session)
        )
        return response.interaction

    async def answer(
        self, interaction_id: str, answer: form_pb2.Answer, session: str = "s1"
    ) -> interaction_service_pb2.AnswerResponse:
        return await self.surface.Answer(
            interaction_service_pb2.AnswerRequest(
                interaction_id=interaction_id,
                session_id=session,
                submission_id=f"sub-{next(self._ids)}",
                answer=answer,
            )
        )

    async def close_reason(self, interaction_id: str) -> int:
        """Wait until the form is no longer pending; return its close reason."""

        async def reason() -> int | None:
            record = await self.get(interaction_id)
            return None if record.state == interaction_pb2.INTERACTION_STATE_PENDING else int(record.close_reason)

        return await eventually(reason, what=f"{interaction_id} settled")

    async def aclose(self) -> None:
        for call in self.calls:
            call.cancel()
        for provider in self.providers:
            await provider.close()
        await self.broker_server.stop()
        await stop_interaction(self.interaction)
        for channel in self.channels:
            await channel.close()


StackFactory = Callable[..., Awaitable[BrokerStack]]


async def stop_interaction(running: RunningServer) -> None:
    """Stop the Interaction service (its app stops its reaper, then closes Redis)."""
    await running.stop()


async def start_interaction(redis_url: str, **overrides: Any) -> tuple[InteractionSettings, RunningServer]:
    settings = InteractionSettings(
        redis_url=redis_url,
        listen=overrides.pop("listen", "127.0.0.1:0"),
        reaper_interval_seconds=overrides.pop("reaper_interval_seconds", 0.05),
        grace_seconds=0.5,
        **overrides,
    )
    app = await build_interaction(settings)
    return settings, await start_server(app, settings)


async def start_broker(interaction_target: str, **overrides: Any) -> tuple[BrokerSettings, RunningServer, BrokerApp]:
    settings = BrokerSettings(interaction_target=interaction_target, grace_seconds=0.5, **overrides)
    app = await build_broker(settings)
    running = await start_server(app, settings)
    await app.host_link.wait_connected(FRAME_TIMEOUT)
    return settings, running, app
