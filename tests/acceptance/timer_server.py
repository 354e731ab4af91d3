"""A real MCP server (official ``mcp`` SDK, low-level ``Server`` over stdio) for the execution-timer criterion.

Usage::

    python -m tests.acceptance.timer_server

Tools:

- ``hang``: never answers (the provider execution timer must end it).
- ``ask_then_hang``: the first leg answers ``input_required`` with one form-mode
  ``elicitation/create`` under the key ``go`` (a boolean ``ok``) and ``requestState`` ``"hang"``;
  the retry never answers - so a timer that was suspended while the form was pending and re-armed
  after the answer ends the retry leg with the execution timeout (RFC criterion 10).
"""

from __future__ import annotations

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
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)

GO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Go on?"}},
    "required": ["ok"],
}

TOOLS = (
    Tool(name="hang", description="Never answers.", input_schema={"type": "object"}),
    Tool(name="ask_then_hang", description="One form, then the retry never answers.", input_schema={"type": "object"}),
)


def build() -> Server[Any]:
    """The server (see the module docstring)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        if params.name == "ask_then_hang" and params.input_responses is None:
            form = ElicitRequest(params=ElicitRequestFormParams(message="Go on?", requested_schema=GO_SCHEMA))
            return InputRequiredResult(input_requests={"go": form}, request_state="hang")
        if params.name in ("hang", "ask_then_hang"):
            await anyio.sleep_forever()
        raise MCPError(-32602, f"unknown tool {params.name}")

    return Server("maka-acceptance-timer", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    server = build()

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
