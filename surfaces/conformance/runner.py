"""Run one MCP conformance-harness client scenario through the whole Maka stack.

``run(server_url, scenario_name, protocol_version)``:

1. writes a temporary ``mcpServers`` file naming the harness server ``conformance`` (``url`` = the
   harness URL, ``era`` from :func:`surfaces.conformance.scenarios.era_for`);
2. starts :class:`surfaces.conformance.stack.InProcessStack` (private redis-server, Interaction
   service, broker, MCP provider);
3. attaches :class:`surfaces.conformance.auto_answer.AutoAnswerer` (accepts every form);
4. waits until the provider connected to the harness server (era negotiated, Tools listed) and
   registered the scenario's Tools with the broker (``ListTools``), then
   makes each :class:`surfaces.conformance.scenarios.Step` as a broker ``CallTool`` and checks its
   final event; every step prints one JSON line to ``out``;
5. stops everything.

Only Tool names, counts, outcome kinds, failure codes and the server's result text are printed:
never ``requestState`` (it never leaves the provider) nor form values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.serving import KEEPALIVE_OPTIONS
from surfaces.common.interaction_client import InteractionClient, InteractionView
from surfaces.conformance.auto_answer import AutoAnswerer
from surfaces.conformance.scenarios import Scenario, Step, era_for, scenario_for
from surfaces.conformance.stack import InProcessStack

log = logging.getLogger("maka.surfaces.conformance.runner")

SERVER_NAME = "conformance"
"""The ``mcpServers`` name of the harness server: Tools are ``conformance:<tool>``."""


@dataclass
class CallOutcome:
    """How one broker ``CallTool`` ended.

    ``kind`` is ``result``, ``failure``, ``lost``, ``stopped`` or ``no_final_event``; ``code`` the
    ``FailureCode`` name for failures; ``text`` the result's text content joined with newlines;
    ``forms`` how many ``awaiting_interaction`` events the call showed.
    """

    tool: str
    kind: str = "no_final_event"
    is_error: bool = False
    text: str = ""
    code: str = ""
    message: str = ""
    forms: int = 0
    result: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())


def result_text(result: dict[str, Any]) -> str:
    """The ``text`` of every ``type: "text"`` content block of a ``CallToolResult``, joined by newlines."""
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
    )


async def call_tool(
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
    *,
    session_id: str,
    qualified_tool: str,
    arguments: dict[str, Any],
    on_form: Callable[[], Awaitable[None]] | None = None,
    turn_id: str = "turn-1",
    tool_use_id: str = "",
) -> CallOutcome:
    """One logical Tool call through ``broker.CallTool``; returns its final event as a :class:`CallOutcome`.

    ``on_form`` is awaited at the first ``awaiting_interaction`` event (the stream is read on
    afterwards). ``tool_use_id`` defaults to a fresh ``toolu-...`` id. Raises ``grpc.aio.AioRpcError``
    when the broker refuses the RPC itself (e.g. INVALID_ARGUMENT, UNAVAILABLE).
    """
    outcome = CallOutcome(tool=qualified_tool)
    request = broker_pb2.CallToolRequest(
        session_id=session_id,
        turn_id=turn_id,
        tool_use_id=tool_use_id or f"toolu-{uuid.uuid4().hex[:16]}",
        tool_name=qualified_tool,
        arguments_json=json.dumps(arguments),
    )
    async for event in broker.CallTool(request):
        which = event.WhichOneof("event")
        if which == "awaiting_interaction":
            outcome.forms += 1
            if outcome.forms == 1 and on_form is not None:
                await on_form()
        elif which == "result":
            outcome.kind = "result"
            outcome.is_error = event.result.is_error
            outcome.result = json.loads(event.result.call_tool_result_json or "{}")
            outcome.text = result_text(outcome.result)
        elif which == "failure":
            outcome.kind = "failure"
            outcome.code = broker_pb2.FailureCode.Name(event.failure.code)
            outcome.message = event.failure.message
        elif which == "lost":
            outcome.kind = "lost"
            outcome.message = event.lost.reason
        elif which == "stopped":
            outcome.kind = "stopped"
    return outcome


async def wait_for_tools(
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, names: set[str], *, timeout: float = 30.0
) -> list[broker_pb2.Tool]:
    """Poll ``ListTools`` until every qualified name in ``names`` is registered; returns the listing.

    Raises ``TimeoutError`` after ``timeout`` seconds (the provider could not connect or list).
    """
    delay = 0.02
    async with asyncio.timeout(timeout):
        while True:
            try:
                tools = list((await broker.ListTools(broker_pb2.ListToolsRequest(), timeout=5)).tools)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
            else:
                if names <= {tool.qualified_name for tool in tools}:
                    return tools
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)


class _Holds:
    """Forms the auto answerer must hold pending until a driver releases them (keyed by tool_use_id)."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def hold(self, tool_use_id: str) -> asyncio.Event:
        return self._events.setdefault(tool_use_id, asyncio.Event())

    async def gate(self, view: InteractionView) -> None:
        event = self._events.get(view.tool_use_id)
        if event is not None:
            await event.wait()


def check_step(step: Step, outcome: CallOutcome) -> list[str]:
    """Why ``outcome`` does not meet ``step`` (empty when it does)."""
    problems: list[str] = []
    if outcome.kind != "result":
        problems.append(f"ended with {outcome.kind} {outcome.code} {outcome.message}".rstrip())
    elif outcome.is_error:
        problems.append("the result has isError: true")
    if step.expect_text and step.expect_text not in outcome.text:
        problems.append(f"result text does not contain {step.expect_text!r}")
    if outcome.forms != step.expect_forms:
        problems.append(f"showed {outcome.forms} forms, expected {step.expect_forms}")
    return problems


class ScenarioRun:
    """Executes a :class:`Scenario`'s steps against a started stack and prints one JSON line per step."""

    def __init__(
        self,
        broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
        holds: _Holds,
        out: TextIO,
        session_id: str,
    ) -> None:
        self._broker = broker
        self._holds = holds
        self._out = out
        self._session_id = session_id
        self.ok = True

    async def step(self, step: Step) -> None:
        """Run ``step`` (and its ``during_form`` steps while its form is held pending)."""
        tool_use_id = f"toolu-{uuid.uuid4().hex[:16]}"
        release = self._holds.hold(tool_use_id) if step.during_form else None

        async def on_form() -> None:
            for inner in step.during_form:
                await self.step(inner)
            if release is not None:
                release.set()

        try:
            outcome = await call_tool(
                self._broker,
                session_id=self._session_id,
                qualified_tool=f"{SERVER_NAME}:{step.tool}",
                arguments=step.arguments,
                on_form=on_form,
                tool_use_id=tool_use_id,
            )
        finally:
            if release is not None:
                release.set()
        problems = check_step(step, outcome)
        self.ok = self.ok and not problems
        line = {"step": step.tool, "ok": not problems, "problems": problems, **asdict(outcome)}
        line.pop("result")
        print(json.dumps(line), file=self._out, flush=True)


def write_mcp_config(directory: Path, server_url: str, era: str) -> Path:
    """Write ``{"mcpServers": {"conformance": {"url": ..., "era": ...}}}`` into ``directory``; returns its path."""
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {SERVER_NAME: {"url": server_url, "era": era}}}))
    return path


async def run_scenario(
    scenario: Scenario, server_url: str, version: str, *, out: TextIO, connect_timeout: float = 30.0
) -> bool:
    """Run ``scenario`` against the harness server at ``server_url``; True when every step met its plan.

    Raises :class:`surfaces.conformance.stack.StackError` when the stack cannot start or the provider
    cannot connect to ``server_url``, and ``TimeoutError`` when the Tools are never registered.
    """
    session_id = f"conformance-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="maka-conf-cfg-") as tmp:
        config = write_mcp_config(Path(tmp), server_url, era_for(version))
        async with InProcessStack(config) as stack, contextlib.AsyncExitStack() as exits:
            holds = _Holds()
            interaction = InteractionClient.connect(stack.interaction_target)
            exits.push_async_callback(interaction.close)
            answerer = AutoAnswerer(interaction, [session_id], gate=holds.gate)
            answering = asyncio.create_task(answerer.run(), name="auto-answerer")
            exits.push_async_callback(_cancel, answering)
            await answerer.wait_subscribed()

            channel = grpc.aio.insecure_channel(stack.broker_target, options=list(KEEPALIVE_OPTIONS))
            exits.push_async_callback(channel.close)
            broker = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            await stack.wait_mcp_connected(SERVER_NAME, connect_timeout)
            expected = {f"{SERVER_NAME}:{name}" for name in scenario.expect_tools}
            tools = await wait_for_tools(broker, expected)
            print(json.dumps({"scenario": scenario.name, "protocol_version": version,
                              "tools": sorted(t.qualified_name for t in tools)}), file=out, flush=True)  # fmt: skip

            run = ScenarioRun(broker, holds, out, session_id)
            for step in scenario.steps:
                await run.step(step)
            if answerer.failures:
                run.ok = False
                print(json.dumps({"auto_answer_failures": answerer.failures}), file=out, flush=True)
            return run.ok


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def run(
    server_url: str,
    scenario_name: str,
    version: str,
    *,
    out: TextIO,
    timeout: float = 90.0,
    connect_timeout: float = 30.0,
) -> bool:
    """Look up the scenario plan (:func:`scenario_for`, raises ``UnsupportedScenario``) and run it,
    bounded by ``timeout`` seconds (``TimeoutError``); the provider gets ``connect_timeout`` seconds
    to connect to ``server_url`` (``StackError``)."""
    scenario = scenario_for(scenario_name, version)
    async with asyncio.timeout(timeout):
        return await run_scenario(scenario, server_url, version, out=out, connect_timeout=connect_timeout)
