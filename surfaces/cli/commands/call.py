"""``maka call SERVER:TOOL --args JSON``: call one Tool through the broker, like a model would.

``maka call SERVER:TOOL [--args JSON] [--session S] [--turn T] [--tool-use-id U] [--json]``

Streams the broker's ``CallTool`` events through :mod:`maka_client` (which reattaches a dropped stream
with ``WatchCall``; docs/clients.md): progress and form notices go to
stderr ("waiting for your answer in <web URL> (or `maka tui`)"), the final MCP ``CallToolResult``
to stdout - its text content blocks joined by newlines, or the whole result as JSON with ``--json``.
Every server string of the human output (notices, the result text) passes
:func:`surfaces.common.untrusted.display_text`: control, bidi and zero-width characters show as markers;
``--json`` prints the result exactly, JSON-escaped.
Ctrl-C stops the call's turn (broker ``Stop``) before exiting.

Exit codes (stable, see :mod:`surfaces.cli.main`): 0 the Tool completed; 1 the Tool reported an
error (``isError``); 2 usage error (bad ``SERVER:TOOL``, ``--args`` not a JSON object); 3 the call
failed, was lost or stopped, or no stack runs - with a stable code first on stderr: ``NO_STACK``,
``UNAVAILABLE`` (or another gRPC status name), the broker's ``FailureCode`` without its
``FAILURE_CODE_`` prefix (``UNKNOWN_TOOL``, ``INTERACTION_TIMED_OUT``, ...), ``LOST`` (also when the stream
broke and the broker it reattached to no longer knows the call: a restarted broker), ``STOPPED``,
``NO_RESULT``. After ``UNKNOWN_TOOL`` the Tools the broker knows are listed on stderr (``maka tools``).
``SERVER_UNAVAILABLE`` names the server and why it is not connected (``maka status`` has the details);
``SERVER_ERROR`` carries the server's own JSON-RPC error (``MCP error -32602: <its message>``);
``INVALID_ARGUMENTS`` lists each problem by JSON pointer (``/count: must be of type "integer"``) -
``--no-validate`` skips that check and lets the server decide.

The broker is ``--broker HOST:PORT``, else ``MAKA_BROKER_TARGET``, else the local stack's ``endpoints.json``
(a proxy or a cluster address works: the client speaks plain gRPC, TLS from ``MAKA_TLS_*``). A team's pool
of Hosts works the same (``--broker dns:///team-a-hosts:50052``, docs/clients.md "Pools of Hosts"): the call
goes to a Host that takes new calls, "call accepted" names the Host that owns it, and reattaching and Ctrl-C's
``Stop`` go to that Host. The bearer token for the broker's ``caller`` role is read from ``MAKA_CALLER_TOKEN``
when set.
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

from maka.broker.v1 import broker_pb2
from maka_client import (
    Accepted,
    AwaitingInteraction,
    BrokerClient,
    BrokerErrorReason,
    CallEvent,
    Failure,
    InteractionSettled,
    Lost,
    MakaError,
    Progress,
    Reattaching,
    Result,
    Stopped,
)
from services.core import json_text
from services.core.messages import BROKER_FORGOT_CALL, lost_call
from stack.state_dir import Endpoints
from surfaces.common.names import closest_name
from surfaces.common.target import add_broker_argument, add_state_dir_argument, broker_endpoints
from surfaces.common.untrusted import display_text

NAME = "call"
HELP = "call a Tool (SERVER:TOOL) through the broker and print its result"
EXAMPLES = """\
  maka call examples:ping
  maka call examples:deploy --args '{"artifact":"build-42"}'
  maka call examples:deploy --args '{"artifact":"build-42"}' --json     one JSON event per line
  maka call examples:ping --state-dir /path/to/.state                   a stack started elsewhere"""

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
        "--no-validate",
        action="store_true",
        help="do not check the arguments against the Tool's inputSchema first (the server decides)",
    )
    add_broker_argument(parser)
    add_state_dir_argument(parser)


def parse_tool(text: str) -> tuple[str, str]:
    """Split ``SERVER:TOOL``; raises ``ValueError`` when either side is empty or the colon is missing."""
    server, sep, tool = text.partition(":")
    if not sep or not server or not tool:
        dotted = text.partition(".")
        hint = f"; did you mean {dotted[0]}:{dotted[2]}?" if not sep and all(dotted) else ""
        raise ValueError(f"expected SERVER:TOOL (e.g. examples:deploy), got {text!r}{hint}")
    return server, tool


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse ``--args``; raises ``ValueError`` unless it is a strict JSON object (:mod:`services.core.json_text`)."""
    try:
        value = json_text.loads(text)
    except json_text.JsonTextError as error:
        raise ValueError(f"--args is {error}") from None
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


def _failure_code(name: str) -> broker_pb2.FailureCode.ValueType:
    """The ``FailureCode`` named ``name`` (without prefix); UNSPECIFIED for a newer broker's unknown one."""
    try:
        return broker_pb2.FailureCode.Value(f"FAILURE_CODE_{name}")
    except ValueError:
        return broker_pb2.FAILURE_CODE_UNSPECIFIED


class _Reporter:
    """Writes progress/form notices (stderr) and the final result (stdout)."""

    def __init__(self, out: TextIO, err: TextIO, endpoints: Endpoints, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.endpoints = endpoints
        self.as_json = as_json
        self.failure_code: broker_pb2.FailureCode.ValueType = broker_pb2.FAILURE_CODE_UNSPECIFIED
        """The broker's ``FailureCode`` when the call ended with ``failure`` (UNSPECIFIED for one this CLI does
        not know)."""
        self.stream_broke = False
        """Whether the stream broke (a transport error, not the broker ending it) and the client reattached."""

    def note(self, text: str) -> None:
        """One line on stderr. Notices carry server text (progress and form messages, Tool names, server
        errors), so each passes :func:`display_text` as one line."""
        print(display_text(text), file=self.err, flush=True)

    def fail(self, code: str, message: str) -> int:
        self.note(f"{code}: {message}")
        return EXIT_FAILED

    def where_to_answer(self) -> str:
        if self.endpoints.web:
            return f"{self.endpoints.web} (or `maka tui`)"
        return "`maka tui` (or `maka pending` / `maka answer`)"

    def event(self, event: CallEvent) -> int | None:
        """Handle one typed event; returns the exit code on the outcome."""
        if isinstance(event, Accepted):
            host = f", Host {event.host_id}" if event.host_id else ""
            self.note(f"call accepted (invocation {event.invocation_id}, provider {event.provider_id}{host})")
        elif isinstance(event, Progress):
            total = f"/{event.total:g}" if event.total is not None else ""
            self.note(f"progress {event.progress:g}{total} {event.message}".rstrip())
        elif isinstance(event, AwaitingInteraction):
            self.note(f"form {event.interaction_id}: {event.message}")
            self.note(f"waiting for your answer in {self.where_to_answer()}")
        elif isinstance(event, InteractionSettled):
            outcome = event.action.value if event.action is not None else event.close_reason
            self.note(f"form {event.interaction_id} settled: {outcome}")
        elif isinstance(event, Reattaching):
            self.stream_broke = self.stream_broke or event.code != "EOF"
            self.note(f"the broker stream dropped ({event.code}); reattaching (attempt {event.attempt})")
        elif isinstance(event, Result):
            return self.result(event)
        elif isinstance(event, Failure):
            self.failure_code = _failure_code(event.code)
            return self.fail(event.code, event.message or "the call failed")
        elif isinstance(event, Lost):
            reason = event.reason or "the provider went away"
            return self.fail("LOST", lost_call(reason))
        elif isinstance(event, Stopped):
            return self.fail("STOPPED", "the call was stopped")
        return None

    def result(self, result: Result) -> int:
        if self.as_json:
            print(json.dumps(result.result, indent=2, ensure_ascii=False), file=self.out, flush=True)
        else:
            # The human form always passes the untrusted-text rule (a pipe may end on a terminal too);
            # --json is the exact result, JSON-escaped.
            print(display_text(result_text(result.result), multiline=True), file=self.out, flush=True)
        return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def _list_known_tools(broker: BrokerClient, reporter: _Reporter, requested: str) -> None:
    """After ``UNKNOWN_TOOL``: the closest known name (``did you mean``) and the names the broker does know, on
    stderr (best effort, bounded)."""
    try:
        tools = await broker.list_tools(timeout=STOP_TIMEOUT_SECONDS)
    except MakaError as error:
        reporter.note(f"(could not list the known Tools: {error.code})")
        return
    if not tools:
        reporter.note("no Tools are registered (is the MCP provider connected?)")
        return
    names = [tool.name for tool in tools]
    close = closest_name(requested, names)
    if close:
        reporter.note(f"did you mean {close}?")
    reporter.note("known Tools: " + ", ".join(names))
    reporter.note("(`maka tools` lists them with descriptions)")


async def execute(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run ``maka call`` with parsed ``args``; returns the exit code (see the module docstring)."""
    try:
        parse_tool(args.tool)
        arguments = parse_arguments(args.args)
    except ValueError as error:
        print(f"USAGE: {error}", file=err)
        return EXIT_USAGE
    try:
        endpoints, target = broker_endpoints(args)
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=err)
        return EXIT_FAILED
    turn = args.turn or f"turn-{uuid.uuid4().hex[:12]}"
    reporter = _Reporter(out, err, endpoints, args.json)
    if args.turn is None:
        reporter.note(f"session {args.session}, turn {turn}")
    async with BrokerClient.from_env(target, token=os.environ.get(TOKEN_ENV) or None) as broker:
        tool_call = broker.call_tool(
            args.tool,
            arguments,
            session_id=args.session,
            turn_id=turn,
            tool_use_id=args.tool_use_id or f"call-{uuid.uuid4().hex[:12]}",
            skip_argument_validation=bool(getattr(args, "no_validate", False)),
        )
        try:
            async for event in tool_call:
                code = reporter.event(event)
                if code is not None:
                    if reporter.failure_code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL:
                        await _list_known_tools(broker, reporter, args.tool)
                    return code
        except MakaError as error:
            if (
                error.reason in (BrokerErrorReason.CALL_NOT_FOUND, BrokerErrorReason.NOT_FOUND)
                and reporter.stream_broke
            ):
                # A broker that restarted knows none of the calls of its previous Host epoch: their forms closed
                # host_restarted and nothing is replayed (docs/design.md#restart-and-reconnect; docs/clients.md
                # reattach rules).
                return reporter.fail("LOST", lost_call(BROKER_FORGOT_CALL))
            if error.reason in (BrokerErrorReason.CALL_NOT_FOUND, BrokerErrorReason.NOT_FOUND):
                return reporter.fail("NO_RESULT", "the broker ended the call without a result")
            return reporter.fail(error.code, error.message or "the broker refused the call")
        except asyncio.CancelledError:
            try:
                await broker.stop(args.session, turn, timeout=STOP_TIMEOUT_SECONDS, host_address=tool_call.host_address)
            except MakaError as error:
                return reporter.fail("STOPPED", f"interrupted; stopping the turn failed: {error.code}")
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
