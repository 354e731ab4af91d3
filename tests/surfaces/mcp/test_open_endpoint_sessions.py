"""The MCP front door without tokens (loopback, served on a socket): every client is the principal ``local``, so
2025-11-25 sessions keep working there and share ``local``'s session cap (``MAKA_MCP_MAX_SESSIONS_PER_CLIENT``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from surfaces.mcp.settings import McpSettings
from tests.surfaces.mcp.stack import serving_door

pytestmark = pytest.mark.asyncio
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
async def door() -> AsyncIterator[str]:
    async with serving_door(McpSettings(mcp_listen="127.0.0.1:0", mcp_max_sessions_per_client=1)) as base:
        yield f"{base}/mcp"


async def test_an_open_endpoints_clients_are_local_and_share_its_session_cap(door: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        first = await http.post(door, json=INIT, headers=ACCEPT)
        second = await http.post(door, json=INIT, headers=ACCEPT)
        assert (first.status_code, second.status_code) == (200, 200)
        ids = [first.headers["mcp-session-id"], second.headers["mcp-session-id"]]
        ended = [
            (await http.delete(door, headers={**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}))
            for sid in ids
        ]
    assert [response.status_code for response in ended] == [404, 200]  # the idle first one made room
