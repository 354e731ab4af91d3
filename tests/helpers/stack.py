"""The whole Maka stack as real processes for a test: start, use, stop - every wait bounded.

Use from e2e, fault and acceptance tests::

    async with running_stack(tmp_path) as running:
        running.endpoints.broker            # "127.0.0.1:PORT" (ephemeral ports)
        running.stack.kill("broker")        # fault injection; the supervisor restarts it
        running.log("provider")             # every line that child printed so far
        await running.wait_for("ready", "broker")

Children's output is collected (and echoed to stderr so pytest shows it on failure). Stopping
always runs and is bounded too.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from stack.ports import Ports
from stack.state_dir import Endpoints
from stack.supervisor import StackEvent
from stack.topology import Stack
from tests.helpers.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_CONFIG = ROOT / "examples" / "mcp.json"
"""The bundled example MCP server (``examples:deploy``, ``examples:release_checklist``, ``examples:ping``)."""

START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0


@dataclass
class RunningStack:
    """A started :class:`Stack` with its endpoints and the collected output of every child."""

    stack: Stack
    endpoints: Endpoints
    lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def log(self, name: str) -> str:
        """Everything child ``name`` printed so far (all its restarts), newline-joined."""
        return "\n".join(self.lines[name])

    def all_logs(self) -> str:
        """Every child's output, for secrecy checks (grep for canaries)."""
        return "\n".join(line for lines in self.lines.values() for line in lines)

    async def wait_for(self, kind: str, name: str, *, timeout: float = 60.0) -> StackEvent:
        """The first event of ``kind`` for child ``name`` recorded so far or arriving within ``timeout`` s."""
        events = self.stack.subscribe()
        for event in self.stack.history:
            if event.kind == kind and event.name == name:
                return event
        async with asyncio.timeout(timeout):
            while True:
                event = await events.get()
                if event.kind == kind and event.name == name:
                    return event


@dataclass
class OnStack:
    """What a suite's shared-stack fixture yields: the :class:`RunningStack` and the live addresses of its
    broker and Interaction service (a restarted child may listen on another port)."""

    running: RunningStack = field(repr=False)

    @property
    def broker(self) -> str:
        return self.running.stack.address(Stack.BROKER)

    @property
    def interaction(self) -> str:
        return self.running.stack.address(Stack.INTERACTION)


@asynccontextmanager
async def running_stack(
    tmp_path: Path,
    *,
    config: Path = EXAMPLES_CONFIG,
    web: bool = False,
    redis_url: str | None = None,
    redis_mode: str = "standalone",
    echo: bool = True,
    extra_env: dict[str, str] | None = None,
    child_env: dict[str, dict[str, str]] | None = None,
    stop_grace: float = 10.0,
) -> AsyncIterator[RunningStack]:
    """Start the stack on ephemeral loopback ports with state in ``tmp_path/state``; stop it on exit.

    ``redis_url=None`` runs a private embedded ``redis-server`` (AOF) in the state dir; ``redis_mode`` says
    how the Interaction service reads ``redis_url`` (``maka up --redis-mode``).
    Raises ``TimeoutError`` when start or stop exceed their bounds, ``StackError`` when a child fails.
    """
    lines: dict[str, list[str]] = defaultdict(list)

    def sink(name: str, line: str) -> None:
        lines[name].append(line)
        if echo:
            sys.stderr.write(f"[{name}] {line}\n")

    stack = Stack(
        config,
        tmp_path / "state",
        ports=Ports.ephemeral(),
        web=web,
        redis_url=redis_url,
        redis_mode=redis_mode,
        sink=sink,
        ready_timeout=60,
        extra_env=extra_env,
        child_env=child_env,
        stop_grace=stop_grace,
    )
    async with asyncio.timeout(START_TIMEOUT):
        endpoints = await stack.start()
    try:
        yield RunningStack(stack, endpoints, lines)
    finally:
        async with asyncio.timeout(STOP_TIMEOUT):
            await stack.stop()


async def pending_forms(interaction: str, sessions: Sequence[str] = ("default",)) -> list[interaction_pb2.Interaction]:
    """The pending Interactions of ``sessions`` (Interaction service ``ListPending``)."""
    async with grpc.aio.insecure_channel(interaction) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        response = await stub.ListPending(
            interaction_service_pb2.ListPendingRequest(session_ids=list(sessions)), timeout=10
        )
    return list(response.pending)


async def wait_for_pending(
    interaction: str, session: str = "default", *, timeout: float = 30.0
) -> interaction_pb2.Interaction:
    """The first pending form of ``session``, polling (bounded by ``timeout`` s) until one exists."""

    async def first() -> interaction_pb2.Interaction | None:
        pending = await pending_forms(interaction, [session])
        return pending[0] if pending else None

    return await eventually(first, timeout=timeout, interval=0.05, what=f"a pending form in {session}")


async def answer(
    interaction: str,
    form: interaction_pb2.Interaction,
    action: form_pb2.Action.ValueType,
    values: dict[str, form_pb2.Value] | None = None,
    *,
    submission_id: str = "test-submission",
) -> interaction_pb2.Interaction:
    """Answer ``form`` through the Interaction service's unary ``Answer``; returns the settled record."""
    async with grpc.aio.insecure_channel(interaction) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        response = await stub.Answer(
            interaction_service_pb2.AnswerRequest(
                interaction_id=form.interaction_id,
                session_id=form.binding.session_id,
                submission_id=submission_id,
                answer=form_pb2.Answer(action=action, values=values or {}),
            ),
            timeout=10,
        )
    return response.interaction


async def call_tool(
    broker: str,
    tool: str,
    arguments: dict[str, object] | None = None,
    *,
    session: str = "default",
    turn: str = "turn-1",
    tool_use_id: str = "use-1",
    timeout: float = 120.0,
) -> list[broker_pb2.CallToolResponse]:
    """Every event of one broker ``CallTool`` stream (the last is result, failure, lost or stopped).

    Run it as a task while answering forms: ``task = asyncio.create_task(call_tool(...))``.
    Raises ``TimeoutError`` after ``timeout`` s, ``grpc.aio.AioRpcError`` when the broker refuses.
    """
    request = broker_pb2.CallToolRequest(
        session_id=session,
        turn_id=turn,
        tool_use_id=tool_use_id,
        tool_name=tool,
        arguments_json=json.dumps(arguments or {}),
    )
    events: list[broker_pb2.CallToolResponse] = []
    async with asyncio.timeout(timeout), grpc.aio.insecure_channel(broker) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        async for event in stub.CallTool(request):
            events.append(event)
    return events


def result_text(events: list[broker_pb2.CallToolResponse]) -> str:
    """The joined text content of the final ``result`` event; ``AssertionError`` naming the last event
    when the call did not end with a result."""
    last = events[-1] if events else None
    assert last is not None, "no events"
    assert last.WhichOneof("event") == "result", f"call ended with {last}"
    payload = json.loads(last.result.call_tool_result_json)
    return "\n".join(block["text"] for block in payload.get("content", []) if block.get("type") == "text")
