"""``maka call SERVER:TOOL --args JSON``: call one Tool through the broker, like a model would.

``maka call SERVER:TOOL [--args JSON] [--session S] [--turn T] [--tool-use-id U] [--json]``

Streams the broker's ``CallTool`` events (``maka.broker.v1``): progress and form notices go to
stderr ("waiting for your answer in <web URL> (or `maka tui`)"), the final MCP ``CallToolResult``
to stdout - its text content blocks joined by newlines, or the whole result as JSON with ``--json``.
Ctrl-C stops the call's turn (broker ``Stop``) before exiting.

Exit codes (stable, see :mod:`surfaces.cli.main`): 0 the Tool completed; 1 the Tool reported an
error (``isError``); 2 usage error (bad ``SERVER:TOOL``, ``--args`` not a JSON object); 3 the call
failed, was lost or stopped, or no stack runs - with a stable code first on stderr: ``NO_STACK``,
``UNAVAILABLE`` (or another gRPC status name), the broker's ``FailureCode`` without its
``FAILURE_CODE_`` prefix (``UNKNOWN_TOOL``, ``INTERACTION_TIMED_OUT``, ...), ``LOST``, ``STOPPED``,
``NO_RESULT``. After ``UNKNOWN_TOOL`` the Tools the broker knows are listed on stderr (``maka tools``).

The bearer token for the broker's ``caller`` role is read from ``MAKA_CALLER_TOKEN`` when set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from typing import Any, TextIO

import grpc
import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.channels import open_channel
from surfaces.cli.commands.tools import fetch_tools
from surfaces.cli.endpoints import Endpoints, add_state_dir_argument, read_endpoints

NAME = "call"
HELP = "call a Tool (SERVER:TOOL) through the broker and print its result"

TOKEN_ENV = "MAKA_CALLER_TOKEN"
DEFAULT_SESSION = "default"
STOP_TIMEOUT_SECONDS = 5.0

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``SERVER:TOOL``, ``--args``, ``--session``, ``--turn``, ``--tool-use-id``, ``--json``, ``--broker``
    and ``--state-dir``."""
    parser.add_argument("tool", metavar="SERVER:TOOL", help="qualified Tool name, e.g. examples:deploy")
    parser.add_argument("--args", default="{}", metavar="JSON", help="Tool arguments as a JSON object (default {})")
    parser.add_argument("--session", default=DEFAULT_SESSION, metavar="S", help="session id (default: default)")
    parser.add_argument("--turn", default=None, metavar="T", help="turn id (default: a fresh one, printed on stderr)")
    parser.add_argument("--tool-use-id", default=None, metavar="U", help="tool use id (default: a fresh one)")
    parser.add_argument("--json", action="store_true", help="print the whole CallToolResult as JSON")
    parser.add_argument(
        "--broker", default=None, metavar="HOST:PORT", help="broker address (default: from endpoints.json)"
    )
    add_state_dir_argument(parser)


def parse_tool(text: str) -> tuple[str, str]:
    """Split ``SERVER:TOOL``; raises ``ValueError`` when either side is empty or the colon is missing."""
    server, sep, tool = text.partition(":")
    if not sep or not server or not tool:
        raise ValueError(f"expected SERVER:TOOL (e.g. examples:deploy), got {text!r}")
    return server, tool


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse ``--args``; raises ``ValueError`` unless it is a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--args is not JSON: {error.msg} at position {error.pos}") from error
    if not isinstance(value, dict):
        raise ValueError("--args must be a JSON object")
    return value


def result_text(result: dict[str, Any]) -> str:
    """The text of an MCP ``CallToolResult``: text blocks joined by newlines; other blocks as ``[type]``;
    ``structuredContent`` as JSON when there is no content."""
    parts: list[str] = []
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'content')}]")
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)


def _enum_name(enum_type: Any, value: int, prefix: str) -> str:
    name: str = enum_type.Name(value)
    return name.removeprefix(prefix).lower()


class _Reporter:
    """Writes progress/form notices (stderr) and the final result (stdout)."""

    def __init__(self, out: TextIO, err: TextIO, endpoints: Endpoints, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.endpoints = endpoints
        self.as_json = as_json
        self.failure_code: int = broker_pb2.FAILURE_CODE_UNSPECIFIED
        """The broker's ``FailureCode`` when the call ended with ``failure``."""

    def note(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def fail(self, code: str, message: str) -> int:
        self.note(f"{code}: {message}")
        return EXIT_FAILED

    def where_to_answer(self) -> str:
        if self.endpoints.web:
            return f"{self.endpoints.web} (or `maka tui`)"
        return "`maka tui` (or `maka pending` / `maka answer`)"

    def event(self, event: broker_pb2.CallToolResponse) -> int | None:
        """Handle one event; returns the exit code on the terminal event."""
        kind = event.WhichOneof("event")
        if kind == "accepted":
            self.note(
                f"call accepted (invocation {event.accepted.invocation_id}, provider {event.accepted.provider_id})"
            )
        elif kind == "progress":
            total = f"/{event.progress.total:g}" if event.progress.HasField("total") else ""
            self.note(f"progress {event.progress.progress:g}{total} {event.progress.message}".rstrip())
        elif kind == "awaiting_interaction":
            awaiting = event.awaiting_interaction
            self.note(f"form {awaiting.interaction_id}: {awaiting.message}")
            self.note(f"waiting for your answer in {self.where_to_answer()}")
        elif kind == "interaction_settled":
            settled = event.interaction_settled
            if settled.action != form_pb2.ACTION_UNSPECIFIED:
                outcome = _enum_name(form_pb2.Action, settled.action, "ACTION_")
            else:
                outcome = _enum_name(interaction_pb2.CloseReason, settled.close_reason, "CLOSE_REASON_")
            self.note(f"form {settled.interaction_id} settled: {outcome}")
        elif kind == "result":
            return self.result(event.result)
        elif kind == "failure":
            code = broker_pb2.FailureCode.Name(event.failure.code).removeprefix("FAILURE_CODE_")
            self.failure_code = event.failure.code
            return self.fail(code, event.failure.message or "the call failed")
        elif kind == "lost":
            reason = event.lost.reason or "the provider went away"
            return self.fail("LOST", f"{reason}; the outcome is unknown and nothing was replayed")
        elif kind == "stopped":
            return self.fail("STOPPED", "the call was stopped")
        return None

    def result(self, result: broker_pb2.CallResult) -> int:
        try:
            parsed = json.loads(result.call_tool_result_json or "{}")
        except json.JSONDecodeError:
            return self.fail("INVALID_RESULT", "the broker returned a result that is not JSON")
        if not isinstance(parsed, dict):
            return self.fail("INVALID_RESULT", "the broker returned a result that is not a JSON object")
        if self.as_json:
            print(json.dumps(parsed, indent=2, ensure_ascii=False), file=self.out, flush=True)
        else:
            print(result_text(parsed), file=self.out, flush=True)
        is_error = result.is_error or parsed.get("isError") is True
        return EXIT_TOOL_ERROR if is_error else EXIT_OK


async def _list_known_tools(broker: str, reporter: _Reporter) -> None:
    """After ``UNKNOWN_TOOL``: the names the broker does know, on stderr (best effort, bounded)."""
    try:
        tools = await fetch_tools(broker, timeout=STOP_TIMEOUT_SECONDS)
    except grpc.aio.AioRpcError as error:
        reporter.note(f"(could not list the known Tools: {error.code().name})")
        return
    if not tools:
        reporter.note("no Tools are registered (is the MCP provider connected?)")
        return
    reporter.note("known Tools: " + ", ".join(tool.qualified_name for tool in tools))
    reporter.note("(`maka tools` lists them with descriptions)")


async def _stop_turn(broker: str, session: str, turn: str) -> None:
    async with open_channel(broker, token=os.environ.get(TOKEN_ENV) or None) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        await stub.Stop(broker_pb2.StopRequest(session_id=session, turn_id=turn), timeout=STOP_TIMEOUT_SECONDS)


async def execute(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run ``maka call`` with parsed ``args``; returns the exit code (see the module docstring)."""
    try:
        parse_tool(args.tool)
        arguments = parse_arguments(args.args)
    except ValueError as error:
        print(f"USAGE: {error}", file=err)
        return EXIT_USAGE
    try:
        endpoints = read_endpoints(args.state_dir)
    except FileNotFoundError as error:
        if args.broker is None:
            print(f"NO_STACK: {error}", file=err)
            return EXIT_FAILED
        endpoints = Endpoints(interaction="", broker=args.broker)
    broker = args.broker or endpoints.broker
    turn = args.turn or f"turn-{uuid.uuid4().hex[:12]}"
    request = broker_pb2.CallToolRequest(
        session_id=args.session,
        turn_id=turn,
        tool_use_id=args.tool_use_id or f"call-{uuid.uuid4().hex[:12]}",
        tool_name=args.tool,
        arguments_json=json.dumps(arguments),
    )
    reporter = _Reporter(out, err, endpoints, args.json)
    if args.turn is None:
        reporter.note(f"session {args.session}, turn {turn}")
    try:
        async with open_channel(broker, token=os.environ.get(TOKEN_ENV) or None) as channel:
            stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            async for event in stub.CallTool(request, wait_for_ready=False):
                code = reporter.event(event)
                if code is not None:
                    if reporter.failure_code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL:
                        await _list_known_tools(broker, reporter)
                    return code
    except grpc.aio.AioRpcError as error:
        return reporter.fail(error.code().name, error.details() or "the broker refused the call")
    except asyncio.CancelledError:
        try:
            await _stop_turn(broker, args.session, turn)
        except grpc.aio.AioRpcError as error:
            return reporter.fail("STOPPED", f"interrupted; stopping the turn failed: {error.code().name}")
        return reporter.fail("STOPPED", f"interrupted; turn {turn} stopped")
    return reporter.fail("NO_RESULT", "the broker ended the call without a result")


async def _main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    inner = asyncio.ensure_future(execute(args))
    loop.add_signal_handler(signal.SIGINT, inner.cancel)  # Ctrl-C: stop the turn, then exit 3
    try:
        return await inner
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``maka call``."""
    return asyncio.run(_main(args))
