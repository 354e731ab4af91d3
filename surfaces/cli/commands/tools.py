"""``maka tools``: list the Tools the running stack's broker knows (broker ``ListTools``).

``maka tools [--json] [--broker HOST:PORT] [--state-dir DIR]`` prints one Tool per line: the qualified
``SERVER:TOOL`` name (what ``maka call`` takes), two spaces, and the first line of its description. With
``--json`` the output is a JSON array of ``{"name", "description", "inputSchema", "provider"}`` objects
(``inputSchema`` is the MCP Tool's JSON Schema object, ``outputSchema`` is added when the Tool has one;
both exactly as the server listed them). Exit codes: 0 listed (even when empty); 3 failed,
with a stable code first on stderr (``NO_STACK``, or the gRPC status name, e.g. ``UNAVAILABLE``).

The broker is ``--broker HOST:PORT``, else ``MAKA_BROKER_TARGET``, else ``endpoints.json``. The bearer token
for the broker's ``caller`` role is read from ``MAKA_CALLER_TOKEN`` when set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from maka_client import BrokerClient, MakaError, ToolInfo
from surfaces.common.target import add_broker_argument, add_state_dir_argument, broker_endpoints
from surfaces.common.untrusted import display_text

NAME = "tools"
HELP = "list the Tools the broker knows (SERVER:TOOL, description; --json adds input schemas)"

TOKEN_ENV = "MAKA_CALLER_TOKEN"
LIST_TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--json``, ``--broker`` and ``--state-dir``."""
    parser.add_argument("--json", action="store_true", help="print a JSON array with each input schema")
    add_broker_argument(parser)
    add_state_dir_argument(parser)


async def fetch_tools(broker: str, *, timeout: float = LIST_TIMEOUT_SECONDS) -> list[ToolInfo]:
    """The broker's ``ListTools`` answer, sorted by qualified name.

    Raises :class:`maka_client.MakaError` (e.g. ``UNAVAILABLE`` when no broker answers, ``UNAUTHENTICATED``
    without a valid ``MAKA_CALLER_TOKEN`` where tokens are required).
    """
    async with BrokerClient.from_env(broker, token=os.environ.get(TOKEN_ENV) or None) as client:
        return await client.list_tools(timeout=timeout)


def tool_json(tool: ToolInfo) -> dict[str, Any]:
    """One Tool as ``{"name", "description", "inputSchema", "provider"}`` plus ``outputSchema`` when the Tool
    has one (schemas exactly as the server listed them, never resolved)."""
    out: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "provider": tool.provider_display_name or tool.provider_id,
    }
    if tool.output_schema is not None:
        out["outputSchema"] = tool.output_schema
    return out


def tool_line(tool: ToolInfo) -> str:
    """``SERVER:TOOL  first description line`` (just the name when there is no description), both shown
    through :func:`display_text` (server text: no control, bidi or zero-width character reaches the terminal)."""
    summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
    return display_text(f"{tool.name}  {summary}".rstrip())


def run(args: argparse.Namespace) -> int:
    """List the Tools; see the module docstring for output and exit codes."""
    try:
        _, broker = broker_endpoints(args)
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return 3
    try:
        tools = asyncio.run(fetch_tools(broker))
    except MakaError as error:
        print(f"{error.code}: {error.message or 'the broker refused ListTools'}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps([tool_json(tool) for tool in tools], ensure_ascii=False, indent=2))
    elif tools:
        print("\n".join(tool_line(tool) for tool in tools))
    else:
        print("no Tools registered (is the MCP provider connected? see the [provider] log of `maka up`)")
    return 0
