"""The tee proxy's wire log as tests read it (tests/fixtures/mcp_servers/tee_proxy.py writes one line per
message: ``C->S``/``S->C`` plus the JSON text, and ``HDR`` plus the HTTP headers of a request)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.waiting import eventually


@dataclass(frozen=True)
class Wire:
    """The captured JSON-RPC traffic of one MCP server, oldest first."""

    path: Path

    def lines(self) -> list[tuple[str, str]]:
        """(direction, text) of every logged line, ``HDR`` lines included; split on ``\\n`` only (U+2028 may
        sit inside a JSON string)."""
        if not self.path.exists():
            return []
        out: list[tuple[str, str]] = []
        for line in self.path.read_text(encoding="utf-8").split("\n"):
            if line:
                direction, _, body = line.partition(" ")
                out.append((direction, body))
        return out

    def raw(self) -> list[tuple[str, str]]:
        """(direction, JSON text exactly as logged) of the messages only."""
        return [(d, body) for d, body in self.lines() if d in ("C->S", "S->C") and body.startswith("{")]

    def messages(self) -> list[tuple[str, dict[str, Any]]]:
        """(direction, decoded message) in order."""
        return [(direction, json.loads(body)) for direction, body in self.raw()]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Client requests of ``method`` in order."""
        return [m for d, m in self.messages() if d == "C->S" and m.get("method") == method]

    def tool_calls(self, name: str | None = None, *, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """``tools/call`` legs (of Tool ``name``, whose arguments contain every ``where`` item)."""
        legs = []
        for call in self.requests("tools/call"):
            params = call["params"]
            arguments = params.get("arguments") or {}
            if name is not None and params["name"] != name:
                continue
            if where is not None and any(arguments.get(k) != v for k, v in where.items()):
                continue
            legs.append(call)
        return legs

    def responded(self, request_id: Any) -> bool:
        """Whether the server has answered ``request_id`` yet."""
        return any(d == "S->C" and m.get("id") == request_id and "method" not in m for d, m in self.messages())

    def response(self, request_id: Any) -> dict[str, Any]:
        """The server's response to ``request_id`` (``AssertionError`` when there is none)."""
        return json.loads(self.raw_response(request_id))  # type: ignore[no-any-return]

    def raw_response(self, request_id: Any) -> str:
        """The server's response to ``request_id`` as the exact text that crossed the wire."""
        for direction, body in self.raw():
            if direction == "S->C":
                message = json.loads(body)
                if message.get("id") == request_id and "method" not in message:
                    return body
        raise AssertionError(f"no response to {request_id!r} in {self.path}")

    async def wait_tool_calls(self, count: int, name: str | None = None, **where: Any) -> list[dict[str, Any]]:
        """At least ``count`` matching ``tools/call`` legs, polling (bounded, 30 s) until they are logged."""
        await eventually(
            lambda: len(self.tool_calls(name, where=where)) >= count, what=f"{count} {name} legs", timeout=30
        )
        return self.tool_calls(name, where=where)
