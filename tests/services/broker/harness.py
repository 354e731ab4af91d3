"""The broker's unit-test harness: :class:`RecordingHost` (an in-memory recorder of the opens and closes the
broker asks of the Interaction service; pure logic only) and helpers that register a provider, start a call and
read what the broker queued (tests/services/broker/test_broker.py, test_sign_in.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.broker.broker import Broker
from services.broker.errors import HostUnavailable, OpenRefused
from services.broker.invocation import Invocation
from services.broker.model import ProviderStream


class RecordingHost:
    """Records opens and closes; opens succeed with minted ids unless ``refuse`` is set."""

    def __init__(self) -> None:
        self.opened: list[tuple[interaction_pb2.Binding, form_pb2.Form]] = []
        self.closed: list[tuple[str, int]] = []
        self.refuse: OpenRefused | None = None
        self.gate: asyncio.Event | None = None
        self.close_gate: asyncio.Event | None = None
        self.answered_first = False
        self.deliveries: list[tuple[str, int, int]] = []
        self.fenced: list[tuple[str, int]] = []
        self.unavailable = False

    async def open(
        self,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait_seconds: float,
        round_info: interaction_pb2.Round | None = None,
    ) -> interaction_pb2.Interaction:
        if self.gate is not None:
            await self.gate.wait()
        if self.refuse is not None:
            raise self.refuse
        if self.unavailable:
            raise HostUnavailable("the link dropped before the reply")
        self.opened.append((binding, form))
        return interaction_pb2.Interaction(
            interaction_id=f"ix_{len(self.opened)}",
            binding=binding,
            form=form,
            state=interaction_pb2.INTERACTION_STATE_PENDING,
        )

    async def close_durably(self, interaction_id: str, reason: int) -> interaction_service_pb2.InteractionClosed:
        if self.close_gate is not None:
            await self.close_gate.wait()
        self.closed.append((interaction_id, reason))
        if self.answered_first:  # an answer committed before the close reached the service
            return interaction_service_pb2.InteractionClosed(
                interaction_id=interaction_id,
                changed=False,
                interaction=interaction_pb2.Interaction(
                    interaction_id=interaction_id,
                    state=interaction_pb2.INTERACTION_STATE_ANSWERED,
                    delivery=interaction_pb2.DELIVERY_STATE_PENDING,
                ),
            )
        return interaction_service_pb2.InteractionClosed(interaction_id=interaction_id, changed=True)

    async def close_invocation_durably(
        self, invocation_id: str, reason: int
    ) -> interaction_service_pb2.InteractionClosed:
        self.fenced.append((invocation_id, reason))
        return interaction_service_pb2.InteractionClosed(invocation_id=invocation_id, changed=False)

    async def report_delivery(self, interaction_id: str, delivery: int, lost_reason: int = 0) -> object:
        self.deliveries.append((interaction_id, delivery, lost_reason))
        return interaction_service_pb2.DeliveryRecorded(interaction_id=interaction_id, changed=True)


def tool_descriptor(name: str = "deploy", server: str = "examples") -> broker_pb2.ToolDescriptor:
    return broker_pb2.ToolDescriptor(name=name, description="d", input_schema_json="{}", claimed_server=server)


def provider_frames(stream: ProviderStream) -> list[broker_pb2.ConnectResponse]:
    """The frames queued for the provider since the last read, taken as its stream would take them."""
    items: list[broker_pb2.ConnectResponse] = []
    while (frame := stream.outbox.pop()) is not None:
        items.append(frame)
    return items


async def all_events(invocation: Invocation) -> list[broker_pb2.CallToolResponse]:
    return [e async for e in invocation.log.follow(0, keepalive=3600, status=invocation.status)]


def register_provider(
    broker: Broker, provider_id: str = "mcp:examples", *tools: broker_pb2.ToolDescriptor
) -> ProviderStream:
    stream = broker.open_provider_stream()
    broker.handle_frame(
        stream,
        broker_pb2.ConnectRequest(
            register=broker_pb2.Register(
                provider_id=provider_id, display_name="Examples", tools=tools or [tool_descriptor()]
            )
        ),
    )
    return stream


def start_call(broker: Broker, tool: str = "examples:deploy", tool_use: str = "tu1", **kw: Any) -> Invocation:
    return broker.call_tool(
        broker_pb2.CallToolRequest(
            session_id=kw.get("session", "s1"),
            turn_id=kw.get("turn", "t1"),
            tool_use_id=tool_use,
            tool_name=tool,
            arguments_json=kw.get("args", '{"artifact":"build-42"}'),
        )
    )
