"""A counting MCP server (official ``mcp`` SDK, low-level ``Server`` over stdio) for the reliability suites.

Usage::

    python -m tests.reliability.counting_server --log CALLS.jsonl

Every ``tools/call`` that reaches this server appends one JSON line to ``CALLS.jsonl`` *before* it is
answered: ``{"pid", "tool", "tag", "leg": "first"|"retry", "state_ok", "action", "value"}``. Tests
count ``tools/call`` requests (and which process got them) from that file; the server never writes
to stdout/stderr beyond the MCP protocol, so it adds nothing to the provider's logs.

Tools:

- ``ask`` (``tag``: str, ``mint``: bool): the first leg answers ``input_required`` with one
  form-mode ``elicitation/create`` under the key ``answer`` (a ``value`` string field) and
  ``requestState`` = ``"st-<tag>"``, or with ``mint`` a fresh canary ``"rs-canary-<hex>"`` that
  exists only here and in the call log (``"minted"``), never in the Tool arguments - the secrecy
  suite looks for it everywhere else; the retry checks the echoed ``requestState`` byte for byte
  (``-32602`` when it differs) and completes with ``{"tag", "action", "digest"}`` where ``digest``
  is the first 16 hex digits of SHA-256 of the accepted value - so the result identifies the answer
  without echoing it (the secrecy suite needs a Tool whose result carries no form value).
- ``echo`` (``tag``): completes at once with ``{"tag"}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"value": {"type": "string", "title": "Value", "maxLength": 200}},
    "required": ["value"],
}
"""The one form the ``ask`` Tool asks."""

TOOLS = (
    Tool(name="ask", description="One form, then a digest of the answer.", input_schema={"type": "object"}),
    Tool(name="echo", description="Completes at once.", input_schema={"type": "object"}),
)


def digest(value: str) -> str:
    """What ``ask`` reports for an accepted ``value``: 16 hex digits of its SHA-256."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def build(log: Path) -> Server[Any]:
    """The server; each ``tools/call`` is logged to ``log`` (one JSON line) before it is answered."""

    minted: dict[str, str] = {}

    def record(entry: dict[str, Any]) -> None:
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")
            out.flush()

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        arguments = dict(params.arguments or {})
        tag = str(arguments.get("tag", ""))
        responses = params.input_responses
        leg = "first" if responses is None and params.request_state is None else "retry"
        if params.name == "echo":
            record({"tool": "echo", "tag": tag, "leg": leg})
            return _done({"tag": tag})
        if params.name != "ask":
            raise MCPError(-32602, f"unknown tool {params.name}")
        if leg == "first":
            expected = f"rs-canary-{secrets.token_hex(12)}" if arguments.get("mint") else f"st-{tag}"
            minted[tag] = expected
            record({"tool": "ask", "tag": tag, "leg": leg, "minted": expected if arguments.get("mint") else None})
            form = ElicitRequest(
                params=ElicitRequestFormParams(message=f"Answer {tag}", requested_schema=ANSWER_SCHEMA)
            )
            return InputRequiredResult(input_requests={"answer": form}, request_state=expected)
        expected = minted.get(tag, f"st-{tag}")
        answer = (responses or {}).get("answer")
        action = answer.action if isinstance(answer, ElicitResult) else None
        value = str((answer.content or {}).get("value", "")) if isinstance(answer, ElicitResult) else ""
        state_ok = params.request_state == expected
        record({"tool": "ask", "tag": tag, "leg": leg, "state_ok": state_ok, "action": action, "value": value})
        if not state_ok:
            raise MCPError(-32602, "Invalid or expired requestState")
        return _done({"tag": tag, "action": action, "digest": digest(value) if action == "accept" else None})

    return Server("maka-counting", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _done(payload: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload))])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path, required=True, help="append one JSON line per tools/call here")
    args = parser.parse_args()
    server = build(args.log)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
