"""A hand-driven Client Capability provider on the real broker's ``Connect`` stream.

The real MCP provider never sends a final result or a failure while its form is pending; RFC
criterion 16 is about what the broker does when a provider does. :class:`RogueProvider` speaks the
real ``maka.broker.v1`` protocol to the stack's broker process and sends exactly the frames a test
scripts. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2

FRAME_TIMEOUT = 30.0

CONFIRM_FORM = form_pb2.Form(
    message="Confirm?",
    fields=[form_pb2.Field(name="ok", label="OK", required=True, boolean=form_pb2.BooleanField())],
)


class RogueProvider:
    """One registered provider claiming server ``claimed_server`` with a single Tool ``tool``."""

    def __init__(self, broker: str, *, provider_id: str, claimed_server: str, tool: str) -> None:
        self.channel = grpc.aio.insecure_channel(broker)
        self.stub = broker_pb2_grpc.CapabilityBrokerServiceStub(self.channel)
        self.register = broker_pb2.Register(
            provider_id=provider_id,
            display_name="Rogue test provider",
            tools=[
                broker_pb2.ToolDescriptor(
                    name=tool, input_schema_json='{"type":"object"}', claimed_server=claimed_server
                )
            ],
        )
        self.outgoing: asyncio.Queue[broker_pb2.ConnectRequest | None] = asyncio.Queue()
        self.frames: asyncio.Queue[broker_pb2.ConnectResponse] = asyncio.Queue()
        self._call: grpc.aio.StreamStreamCall[broker_pb2.ConnectRequest, broker_pb2.ConnectResponse] | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RogueProvider:
        async def requests() -> AsyncIterator[broker_pb2.ConnectRequest]:
            while (item := await self.outgoing.get()) is not None:
                yield item

        self._call = self.stub.Connect(requests())
        self._reader = asyncio.create_task(self._read())
        await self.send(broker_pb2.ConnectRequest(register=self.register))
        await self.next("registered")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.outgoing.put(None)
        if self._call is not None:
            self._call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._reader
        await self.channel.close()

    async def _read(self) -> None:
        assert self._call is not None
        async for frame in self._call:
            await self.frames.put(frame)

    async def send(self, request: broker_pb2.ConnectRequest) -> None:
        await self.outgoing.put(request)

    async def next(self, kind: str) -> broker_pb2.ConnectResponse:
        """The next frame, which must be of ``kind`` (bounded wait)."""
        async with asyncio.timeout(FRAME_TIMEOUT):
            frame = await self.frames.get()
        assert frame.WhichOneof("frame") == kind, frame
        return frame

    async def ask(self, invocation_id: str) -> None:
        """Open one nested form for ``invocation_id``."""
        request = broker_pb2.InteractionRequest(invocation_id=invocation_id, correlation_id="c-1", form=CONFIRM_FORM)
        await self.send(broker_pb2.ConnectRequest(interaction_request=request))

    async def finish(self, invocation_id: str) -> None:
        """Send a final result for ``invocation_id``."""
        result = broker_pb2.InvocationResult(
            invocation_id=invocation_id, call_tool_result_json='{"content":[{"type":"text","text":"done"}]}'
        )
        await self.send(broker_pb2.ConnectRequest(result=result))

    async def fail(self, invocation_id: str) -> None:
        """Send a failure for ``invocation_id``."""
        failure = broker_pb2.InvocationFailure(
            invocation_id=invocation_id, code=broker_pb2.FAILURE_CODE_SERVER_ERROR, message="rogue failure"
        )
        await self.send(broker_pb2.ConnectRequest(failure=failure))
