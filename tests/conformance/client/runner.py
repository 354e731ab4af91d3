"""Run one MCP conformance-harness client scenario through the whole Maka stack.

``run(server_url, scenario_name, protocol_version)``:

1. writes a temporary ``mcpServers`` file naming the harness server ``conformance`` (``url`` = the
   harness URL, ``era`` from :func:`tests.conformance.client.scenarios.era_for`);
2. starts :class:`tests.conformance.client.stack.InProcessStack` (private redis-server, Interaction
   service, broker, MCP provider);
3. attaches :class:`tests.conformance.client.auto_answer.AutoAnswerer` (accepts every form);
4. waits until the provider connected to the harness server (era negotiated, Tools listed) and
   registered the scenario's Tools with the broker (``ListTools``); for the JSON Schema scenarios it
   also lists them with ``maka tools --json`` (the CLI as a process) and requires the same schemas, then
   makes each :class:`tests.conformance.client.scenarios.Step` as a broker ``CallTool`` and checks its
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
import os
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.keepalive import KEEPALIVE_OPTIONS
from services.core.key_file import generate_key_file
from surfaces.common.interactions import Interactions, InteractionView
from tests.conformance.client.auto_answer import AutoAnswerer
from tests.conformance.client.scenarios import Scenario, Step, era_for, scenario_for
from tests.conformance.client.sign_in import AutoSignIn
from tests.conformance.client.stack import InProcessStack
from tests.helpers.waiting import eventually, none_while_unavailable

log = logging.getLogger("maka.tests.conformance.client.runner")

ROOT = Path(__file__).resolve().parents[3]
"""The repository root (``maka tools --json`` runs from it as ``python -m surfaces.cli.main``)."""

CONTEXT_ENV = "MCP_CONFORMANCE_CONTEXT"
"""Scenario data the harness passes (JSON), e.g. the arguments of ``http-custom-headers``."""

SERVER_NAME = "conformance"
"""The ``mcpServers`` name of the harness server: Tools are ``conformance:<tool>``."""


Progress = tuple[float, float | None, str]
"""One ``progress`` event of a call: ``(progress, total, message)``."""


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
    progress: list[tuple[float, float | None, str]] = field(
        default_factory=lambda: list[tuple[float, float | None, str]]()
    )
    """Every ``progress`` event: ``(progress, total, message)``."""
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
        if which == "progress":
            total = event.progress.total if event.progress.HasField("total") else None
            outcome.progress.append((event.progress.progress, total, event.progress.message))
        elif which == "awaiting_interaction":
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

    Raises ``AssertionError`` after ``timeout`` seconds (the provider could not connect or list).
    """
    listing = none_while_unavailable(lambda: broker.ListTools(broker_pb2.ListToolsRequest(), timeout=5))

    async def registered() -> list[broker_pb2.Tool] | None:
        listed = await listing()
        tools = list(listed.tools) if listed is not None else []
        return tools if names <= {tool.qualified_name for tool in tools} else None

    return await eventually(registered, timeout=timeout, interval=0.1, what=f"the Tools {sorted(names)} listed")


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
    elif outcome.is_error and not step.allow_error:
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
        *,
        tools: Sequence[broker_pb2.Tool] = (),
        cli_tools: Mapping[str, Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self._broker = broker
        self._holds = holds
        self._out = out
        self._session_id = session_id
        self._tools = {tool.qualified_name: tool for tool in tools}
        self._cli_tools = cli_tools or {}
        self._context = context or {}
        self.ok = True

    def arguments(self, step: Step) -> dict[str, Any]:
        """The arguments of ``step``: literal, from the harness context, or an echoed input schema (as
        ``maka tools --json`` printed it when the scenario listed through the CLI, else ``ListTools``)."""
        if step.echo_schema_of:
            name = f"{SERVER_NAME}:{step.echo_schema_of}"
            printed = self._cli_tools.get(name)
            if printed is not None:
                return {"schema": printed.get("inputSchema", {})}
            listed = self._tools.get(name)
            return {"schema": json.loads(listed.input_schema_json or "{}") if listed is not None else {}}
        if step.arguments_from_context:
            for call in self._context.get("toolCalls", []):
                if isinstance(call, dict) and call.get("name") == step.tool and isinstance(call.get("arguments"), dict):
                    return dict(call["arguments"])
            return {}
        return dict(step.arguments)

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
                arguments=self.arguments(step),
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
        line.pop("progress")
        print(json.dumps(line), file=self._out, flush=True)


def write_mcp_config(directory: Path, server_url: str, era: str, context: Mapping[str, Any] | None = None) -> Path:
    """Write ``{"mcpServers": {"conformance": {"url": ..., "era": ...}}}`` into ``directory``; returns its path.

    A ``client_id`` (and ``client_secret``) in the harness ``context`` becomes the server's
    pre-registered OAuth client (``"oauth": {"clientId": ..., "clientSecret": ...}``: auth/pre-registration).
    """
    entry: dict[str, Any] = {"url": server_url, "era": era}
    context = context or {}
    if isinstance(context.get("client_id"), str) and context["client_id"]:
        oauth = {"clientId": context["client_id"]}
        if isinstance(context.get("client_secret"), str) and context["client_secret"]:
            oauth["clientSecret"] = context["client_secret"]
        entry["oauth"] = oauth
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {SERVER_NAME: entry}}))
    return path


REDIRECT_URI = "http://localhost:3000/callback"
"""The OAuth redirect URI the provider registers (the harness's authorization servers accept it; the
automatic sign-in surface reads the redirect's ``Location`` instead of following it)."""

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document URL offered where the harness's server supports CIMD (auth/basic-cimd)."""


def oauth_options(directory: Path) -> dict[str, Any]:
    """Provider Settings for OAuth: redirect URI, metadata URL and an encrypted vault in ``directory``."""
    key_file = directory / "oauth.key"
    generate_key_file(key_file)
    return {
        "oauth_redirect_uri": REDIRECT_URI,
        "oauth_client_metadata_url": CLIENT_METADATA_URL,
        "oauth_key_file": key_file,
        "oauth_token_dir": directory / "oauth",
    }


def conformance_context() -> dict[str, Any]:
    """``MCP_CONFORMANCE_CONTEXT`` decoded (``{}`` when unset or not a JSON object)."""
    try:
        context = json.loads(os.environ.get(CONTEXT_ENV) or "{}")
    except ValueError:
        return {}
    return context if isinstance(context, dict) else {}


def schema_problems(scenario: Scenario, tools: Sequence[broker_pb2.Tool], listed: Mapping[str, str]) -> list[str]:
    """Why the registered Tools break ``scenario``'s listing rules (empty when they do not).

    ``listed`` is bare Tool name → the input schema JSON text the provider got from the server's
    ``tools/list``. A rejected Tool must not be registered; with ``preserve_schema_refs`` every
    registered input schema must equal the listed one exactly (a ``$ref`` is never resolved or dropped).
    """
    problems: list[str] = []
    registered = {tool.qualified_name.partition(":")[2]: tool for tool in tools}
    for name in scenario.reject_tools:
        if name in registered:
            problems.append(f"Tool {name} has an invalid x-mcp-header but was registered")
    if scenario.preserve_schema_refs:
        for name, tool in registered.items():
            if json.loads(tool.input_schema_json or "{}") != json.loads(listed.get(name, "null")):
                problems.append(f"the input schema of {name} changed on its way to the broker")
    return problems


async def cli_tools_listing(broker_target: str, *, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """``maka tools --json --broker TARGET`` run as a process: qualified Tool name -> its printed object.

    Raises ``RuntimeError`` when the command fails or prints something other than a JSON array.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "surfaces.cli.main", "tools", "--json", "--broker", broker_target,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(timeout):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        raise RuntimeError(f"maka tools --json exited {process.returncode}: {stderr.decode()[-500:]}")
    printed = json.loads(stdout)
    if not isinstance(printed, list):
        raise RuntimeError("maka tools --json did not print a JSON array")
    return {str(tool["name"]): tool for tool in printed if isinstance(tool, dict) and "name" in tool}


def cli_schema_problems(tools: Sequence[broker_pb2.Tool], printed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why ``maka tools --json`` (``printed``) differs from the broker's ``ListTools`` (``tools``): every
    Tool must be printed with its input schema and its output schema (when it has one) unchanged."""
    problems: list[str] = []
    for tool in tools:
        entry = printed.get(tool.qualified_name)
        if entry is None:
            problems.append(f"maka tools --json does not list {tool.qualified_name}")
            continue
        if entry.get("inputSchema") != json.loads(tool.input_schema_json or "{}"):
            problems.append(f"maka tools --json changed the input schema of {tool.qualified_name}")
        output = json.loads(tool.output_schema_json) if tool.output_schema_json else None
        if entry.get("outputSchema") != output:
            problems.append(f"maka tools --json changed the output schema of {tool.qualified_name}")
    return problems


async def run_scenario(
    scenario: Scenario, server_url: str, version: str, *, out: TextIO, connect_timeout: float = 30.0
) -> bool:
    """Run ``scenario`` against the harness server at ``server_url``; True when every step met its plan.

    Raises :class:`stack.errors.StackError` when the stack cannot start or the provider
    cannot connect to ``server_url``, and ``TimeoutError`` when the Tools are never registered.
    """
    session_id = f"conformance-{uuid.uuid4().hex[:12]}"
    context = conformance_context()
    with tempfile.TemporaryDirectory(prefix="maka-conf-cfg-") as tmp:
        config = write_mcp_config(Path(tmp), server_url, era_for(version), context)
        async with (
            InProcessStack(config, provider_options=oauth_options(Path(tmp))) as stack,
            contextlib.AsyncExitStack() as exits,
        ):
            holds = _Holds()
            interaction = Interactions.connect(stack.interaction_target)
            exits.push_async_callback(interaction.close)
            answerer = AutoAnswerer(interaction, [session_id], gate=holds.gate)
            answering = asyncio.create_task(answerer.run(), name="auto-answerer")
            exits.push_async_callback(_cancel, answering)
            await answerer.wait_subscribed()

            channel = grpc.aio.insecure_channel(stack.broker_target, options=list(KEEPALIVE_OPTIONS))
            exits.push_async_callback(channel.close)
            broker = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            sign_in = AutoSignIn(broker)
            signing_in = asyncio.create_task(sign_in.run(), name="auto-sign-in")
            exits.push_async_callback(_cancel, signing_in)
            await stack.wait_mcp_connected(SERVER_NAME, connect_timeout)
            # Every Tool the provider holds from the server's listing must be registered (the sign-in-only
            # registration before the connection has none), except those the scenario wants refused.
            listed = set(scenario.expect_tools) | (set(stack.listed_schemas(SERVER_NAME)) - set(scenario.reject_tools))
            tools = await wait_for_tools(broker, {f"{SERVER_NAME}:{name}" for name in listed})
            print(json.dumps({"scenario": scenario.name, "protocol_version": version,
                              "tools": sorted(t.qualified_name for t in tools)}), file=out, flush=True)  # fmt: skip

            if sign_in.completed or sign_in.failures:
                print(json.dumps({"sign_ins": sign_in.completed, "sign_in_failures": sign_in.failures}), file=out,
                      flush=True)  # fmt: skip
            problems = schema_problems(scenario, tools, stack.listed_schemas(SERVER_NAME))
            printed: dict[str, dict[str, Any]] = {}
            if scenario.preserve_schema_refs:
                printed = await cli_tools_listing(stack.broker_target)
                problems += cli_schema_problems(tools, printed)
                print(json.dumps({"listed_by_cli": sorted(printed)}), file=out, flush=True)
            run = ScenarioRun(broker, holds, out, session_id, tools=tools, cli_tools=printed, context=context)
            if problems:
                run.ok = False
                print(json.dumps({"listing_problems": problems}), file=out, flush=True)
            steps = list(scenario.steps)
            if scenario.call_first_tool and tools:
                steps.append(Step(tools[0].qualified_name.partition(":")[2], allow_error=True))
            for step in steps:
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
