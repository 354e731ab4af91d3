"""The reliability suites' harness: a real stack of processes around the counting MCP server.

- :func:`reliability_stack` starts :class:`tests.helpers.stack.RunningStack` (embedded Redis with AOF,
  Interaction service, broker, MCP provider) configured with :mod:`tests.reliability.counting_server`,
  per-child environment (tokens, metrics ports) and shared environment (tokens file, tracing).
- :class:`ToolCall` drives one broker ``CallTool`` stream and records every event.
- :func:`wait_pending` / :func:`answer` use the Interaction service like a surface.
- :func:`calls` reads the counting server's log: every ``tools/call`` that reached the MCP server.
- :func:`redis_dump` reads every key and value with SCAN (strings, hashes, lists, sets, zsets, streams).

Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import redis.asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.channels import open_channel
from stack.ports import Ports
from stack.supervisor import ChildSpec
from stack.topology import Stack
from tests.helpers.stack import START_TIMEOUT, STOP_TIMEOUT, RunningStack
from tests.helpers.waiting import eventually, none_while_unavailable

TERMINAL = frozenset({"result", "failure", "lost", "stopped"})
"""``CallToolResponse`` events that end a call."""


def free_port() -> int:
    """A loopback port that was free a moment ago (for ``MAKA_METRICS_LISTEN``)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def write_config(directory: Path) -> tuple[Path, Path]:
    """Write an ``mcpServers`` file naming the counting server ``counter``; returns ``(config, calls log)``."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "calls.jsonl"
    log.touch()
    config = directory / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "tests.reliability.counting_server", "--log", str(log)]}
    config.write_text(json.dumps({"mcpServers": {"counter": server}}))
    return config, log


def calls(log: Path) -> list[dict[str, object]]:
    """Every ``tools/call`` that reached the counting server so far (oldest first)."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


class ReliabilityStack(Stack):
    """A :class:`Stack` whose gRPC children also get their own environment (``child_env[name]``)."""

    def __init__(
        self, config_path: Path, state_dir: Path, *, child_env: Mapping[str, Mapping[str, str]], **kwargs: Any
    ) -> None:
        super().__init__(config_path, state_dir, **kwargs)
        self.child_env = {name: dict(env) for name, env in child_env.items()}

    def _grpc_spec(self, name: str, module: str, configured: int, env: Callable[[], dict[str, str]]) -> ChildSpec:
        own = self.child_env.get(name, {})
        return super()._grpc_spec(name, module, configured, lambda: {**env(), **own})


@asynccontextmanager
async def reliability_stack(
    directory: Path,
    *,
    env: Mapping[str, str] | None = None,
    child_env: Mapping[str, Mapping[str, str]] | None = None,
    echo: bool = True,
    on_stack: Callable[[Stack], object] | None = None,
    stack_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[RunningStack, Path]]:
    """Start the stack with the counting server; yields ``(running stack, calls log)``; always stops it.

    ``on_stack`` sees the :class:`Stack` before it starts (e.g. for a proxy that needs its addresses);
    ``stack_options`` are more :class:`Stack` keyword arguments (e.g. its restart policy).

    Raises ``TimeoutError`` when start or stop exceed their bounds, ``StackError`` when a child fails.
    """
    config, log = write_config(directory / "mcp")
    lines: dict[str, list[str]] = defaultdict(list)

    def sink(name: str, line: str) -> None:
        lines[name].append(line)
        if echo:
            sys.stderr.write(f"[{name}] {line}\n")

    stack = ReliabilityStack(
        config,
        directory / "state",
        ports=Ports.ephemeral(),
        web=False,
        sink=sink,
        ready_timeout=60,
        stop_grace=5,
        extra_env=env,
        child_env=child_env or {},
        **(stack_options or {}),
    )
    if on_stack is not None:
        on_stack(stack)
    async with asyncio.timeout(START_TIMEOUT):
        endpoints = await stack.start()
    try:
        yield RunningStack(stack, endpoints, lines), log
    finally:
        async with asyncio.timeout(STOP_TIMEOUT):
            await stack.stop()


async def tools_ready(running: RunningStack, *, token: str | None = None, timeout: float = 60.0) -> None:
    """Wait (bounded) until the broker lists the counting server's Tools again (after a restart or cut)."""

    async def listed() -> bool:
        try:
            async with open_channel(running.stack.address(Stack.BROKER), token=token) as channel:
                listing = await broker_pb2_grpc.CapabilityBrokerServiceStub(channel).ListTools(
                    broker_pb2.ListToolsRequest(), timeout=5
                )
        except grpc.aio.AioRpcError:
            return False  # the broker is still coming back
        return any(tool.qualified_name == "counter:ask" for tool in listing.tools)

    await eventually(listed, timeout=timeout, interval=0.05, what="the broker listing counter:ask")


class ToolCall:
    """One broker ``CallTool`` stream, read in the background; every event is kept in :attr:`events`.

    The call opens its own channel (with ``token``) unless a shared ``channel`` is given.
    """

    def __init__(
        self,
        broker: str,
        tool: str,
        arguments: Mapping[str, object],
        *,
        session: str = "default",
        turn: str = "turn-1",
        token: str | None = None,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.request = broker_pb2.CallToolRequest(
            session_id=session,
            turn_id=turn,
            tool_use_id=f"use-{turn}",
            tool_name=tool,
            arguments_json=json.dumps(dict(arguments)),
        )
        self._broker = broker
        self._token = token
        self._channel = channel
        self.events: list[broker_pb2.CallToolResponse] = []
        self.error: grpc.aio.AioRpcError | None = None
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ToolCall:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        if self._channel is not None:
            await self._read(self._channel)
            return
        async with open_channel(self._broker, token=self._token) as channel:
            await self._read(channel)

    async def _read(self, channel: grpc.aio.Channel) -> None:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        try:
            async for event in stub.CallTool(self.request, timeout=120):
                async with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        except grpc.aio.AioRpcError as error:
            self.error = error
        finally:
            async with self._changed:
                self._changed.notify_all()

    async def finished(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until the stream ended, with a terminal event or an error (:attr:`error`)."""
        assert self._task is not None
        async with asyncio.timeout(timeout):
            await asyncio.shield(self._task)

    def kinds(self) -> list[str]:
        """The event kinds so far (``accepted``, ``awaiting_interaction``, ``result``, ...)."""
        return [str(event.WhichOneof("event")) for event in self.events]

    async def wait_for(self, *kinds: str, timeout: float = 30.0) -> broker_pb2.CallToolResponse:
        """The first event whose kind is one of ``kinds`` (already seen or arriving within ``timeout`` s).

        Raises ``AssertionError`` when the stream ends (or fails) without one, ``TimeoutError`` after ``timeout``.
        """
        async with asyncio.timeout(timeout), self._changed:
            while True:
                for event in self.events:
                    if event.WhichOneof("event") in kinds:
                        return event
                if self._task is not None and self._task.done():
                    last = str(self.events[-1]).strip() if self.events else ""
                    raise AssertionError(f"CallTool ended without {kinds}: {self.kinds()} {last} error={self.error!r}")
                await self._changed.wait()

    async def terminal(self, timeout: float = 30.0) -> broker_pb2.CallToolResponse:
        """The event that ended the call (result, failure, lost or stopped)."""
        return await self.wait_for(*TERMINAL, timeout=timeout)

    async def awaiting(self, timeout: float = 30.0) -> str:
        """The canonical interaction id the call waits on."""
        event = await self.wait_for("awaiting_interaction", timeout=timeout)
        return event.awaiting_interaction.interaction_id


def interaction_stub(channel: grpc.aio.Channel) -> interaction_service_pb2_grpc.InteractionServiceAsyncStub:
    """An ``InteractionService`` stub on ``channel``."""
    return interaction_service_pb2_grpc.InteractionServiceStub(channel)


async def get_interaction(
    interaction: str, interaction_id: str, *, token: str | None = None, timeout: float = 10.0
) -> interaction_pb2.Interaction:
    """``GetInteraction`` of ``interaction_id`` with a ``timeout`` s deadline (raises ``grpc.aio.AioRpcError``)."""
    async with open_channel(interaction, token=token) as channel:
        response = await interaction_stub(channel).GetInteraction(
            interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id), timeout=timeout
        )
    record: interaction_pb2.Interaction = response.interaction
    return record


async def wait_settled(
    interaction: str, interaction_id: str, *, token: str | None = None, timeout: float = 30.0
) -> interaction_pb2.Interaction:
    """Poll ``GetInteraction`` (bounded) until the record is no longer pending; retries UNAVAILABLE."""
    read = none_while_unavailable(lambda: get_interaction(interaction, interaction_id, token=token))

    async def settled() -> interaction_pb2.Interaction | None:
        record = await read()
        return record if record is not None and record.state != interaction_pb2.INTERACTION_STATE_PENDING else None

    return await eventually(settled, timeout=timeout, interval=0.05, what=f"{interaction_id} settled")


async def answer(
    interaction: str,
    interaction_id: str,
    value: str | None = None,
    *,
    action: form_pb2.Action.ValueType = form_pb2.ACTION_ACCEPT,
    submission_id: str = "sub-1",
    token: str | None = None,
    channel: grpc.aio.Channel | None = None,
) -> interaction_pb2.Interaction:
    """Answer the ``ask`` form (``value`` for accept) through the unary ``Answer``; returns the record.

    Uses ``channel`` when given, else opens one (with ``token``). Raises ``grpc.aio.AioRpcError``.
    """
    values = {"value": form_pb2.Value(string_value=value)} if value is not None else {}
    request = interaction_service_pb2.AnswerRequest(
        interaction_id=interaction_id,
        submission_id=submission_id,
        answer=form_pb2.Answer(action=action, values=values),
    )
    if channel is not None:
        response = await interaction_stub(channel).Answer(request, timeout=30)
    else:
        async with open_channel(interaction, token=token) as own:
            response = await interaction_stub(own).Answer(request, timeout=30)
    record: interaction_pb2.Interaction = response.interaction
    return record


def result_payload(event: broker_pb2.CallToolResponse) -> dict[str, object]:
    """The JSON payload of the counting server's complete result (its first text content)."""
    result = json.loads(event.result.call_tool_result_json)
    payload: dict[str, object] = json.loads(result["content"][0]["text"])
    return payload


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()


async def redis_dump(url: str) -> bytes:
    """Every key and value in Redis (SCAN over all types), concatenated, for secrecy checks."""
    client: Any = redis.asyncio.Redis.from_url(url, decode_responses=False)
    parts: list[object] = []
    try:
        async for key in client.scan_iter(count=500):
            parts.append(key)
            kind = _bytes(await client.type(key)).decode()
            if kind == "string":
                parts.append(await client.get(key) or b"")
            elif kind == "hash":
                for name, value in (await client.hgetall(key)).items():
                    parts += [name, value]
            elif kind == "list":
                parts += await client.lrange(key, 0, -1)
            elif kind == "set":
                parts += list(await client.smembers(key))
            elif kind == "zset":
                parts += [member for member, _score in await client.zrange(key, 0, -1, withscores=True)]
            elif kind == "stream":
                for entry_id, fields in await client.xrange(key):
                    parts.append(entry_id)
                    for name, value in fields.items():
                        parts += [name, value]
            else:
                raise AssertionError(f"unexpected Redis type {kind} for {key!r}")
    finally:
        await client.aclose()
    return b"\n".join(_bytes(part) for part in parts)


async def scrape(port: int) -> str:
    """The ``/metrics`` text of a service's Prometheus endpoint."""
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    response.raise_for_status()
    return response.text


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of sample ``name{labels}`` in exposition ``text`` (0.0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0
