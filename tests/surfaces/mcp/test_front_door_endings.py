"""How waiting MCP calls end, through real processes (``maka up`` with the example server, the official SDK
``Client`` with its default HTTP settings): a call answered long after the client's HTTP read timeout (httpx's
default 5 s) still completes, because the door writes SSE keepalive comments while the form waits; and stopping
``maka up`` answers every waiting call ``LOST: ...; the outcome is unknown and nothing was replayed`` at both eras
instead of closing its stream without a response.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
import pytest_asyncio
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult

from tests.helpers.cli import maka
from tests.helpers.waiting import eventually
from tests.surfaces.mcp.stack import INSPECTOR, TS_CLIENT, Up, maka_up, node_env, run_node

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

DEPLOY = "examples.deploy"
CLIENT_READ_TIMEOUT: float = httpx2.AsyncClient().timeout.read or 0.0
"""The read timeout of an HTTP client made without ``timeout=`` (httpx's default, 5 s)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    async with maka_up(tmp_path_factory.mktemp("front-door-endings")) as running:
        yield running


@contextlib.asynccontextmanager
async def default_client(up: Up, **options: object) -> AsyncIterator[Client]:
    """The SDK client as a developer writes it: ``httpx2.AsyncClient(headers=...)``, no ``timeout=``."""
    http = httpx2.AsyncClient(headers=up.auth)
    async with http, Client(streamable_http_client(up.endpoints.mcp, http_client=http), **options) as client:  # type: ignore[arg-type]
        yield client


async def _pending(up: Up) -> list[dict[str, object]]:
    ran = await maka("pending", "--json", state_dir=up.state_dir)
    assert ran.code == 0, ran.err
    forms: list[dict[str, object]] = json.loads(ran.out)
    return forms


async def _forms(up: Up, count: int) -> list[str]:
    """The ids of the ``count`` forms pending, once that many are (the calls' forms opened)."""

    async def found() -> list[str] | None:
        forms = await _pending(up)
        return [str(form["id"]) for form in forms] if len(forms) == count else None

    return await eventually(found, timeout=60, interval=0.2, what=f"{count} pending forms")


async def _answer_staging(up: Up, interaction_id: str) -> None:
    values = json.dumps({"environment": "staging", "confirm": True})
    ran = await maka("answer", interaction_id, "accept", "--values", values, state_dir=up.state_dir)
    assert ran.code == 0, ran.err


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_answered_after_the_clients_default_read_timeout_still_completes(up: Up, mode: str) -> None:
    artifact = f"patient-{mode}"
    async with default_client(up, mode=mode) as client:
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": artifact}))
        started = time.monotonic()
        (interaction_id,) = await _forms(up, 1)
        # deliberate time passage, not synchronisation: the client's read timeout must expire on a waiting stream
        await asyncio.sleep(max(0.0, started + 2 * CLIENT_READ_TIMEOUT + 2 - time.monotonic()))
        assert not call.done(), call
        await _answer_staging(up, interaction_id)
        async with asyncio.timeout(60):
            result = await call
    assert time.monotonic() - started > 2 * CLIENT_READ_TIMEOUT
    assert _text(result) == f"Deployed {artifact} to staging."


async def test_a_waiting_modern_call_writes_keepalive_comments_more_often_than_client_read_timeouts(up: Up) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": DEPLOY,
            "arguments": {"artifact": "keepalive"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        **up.auth,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": DEPLOY,
    }
    gaps: list[float] = []
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(60, read=CLIENT_READ_TIMEOUT)) as http,
        http.stream("POST", up.endpoints.mcp, json=request, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        last = time.monotonic()
        async for line in response.aiter_lines():
            if line.startswith(":"):
                now = time.monotonic()
                gaps.append(now - last)
                last = now
                if len(gaps) >= 3:
                    break  # the client leaves: a call without requestState is stopped
    assert len(gaps) == 3
    assert max(gaps) < CLIENT_READ_TIMEOUT
    await eventually(lambda: _nothing_pending(up), timeout=30, interval=0.2, what="no pending form")


async def _nothing_pending(up: Up) -> bool:
    return not await _pending(up)


async def test_stopping_maka_up_answers_every_waiting_call_lost_at_both_eras(tmp_path: Path) -> None:
    async with (
        maka_up(tmp_path) as fresh,
        default_client(fresh) as modern,
        default_client(fresh, mode="legacy") as legacy,
    ):
        one = asyncio.ensure_future(modern.call_tool(DEPLOY, {"artifact": "stopped-2026"}))
        two = asyncio.ensure_future(legacy.call_tool(DEPLOY, {"artifact": "stopped-2025"}))
        await _forms(fresh, 2)
        fresh.process.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            results = await asyncio.gather(one, two)
    for result in results:
        assert result.is_error
        assert _text(result).startswith("LOST: the MCP endpoint stopped"), _text(result)
        assert _text(result).endswith("the outcome is unknown and nothing was replayed")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unknown_tool_at_the_endpoint_suggests_the_listed_tool_it_resembles(up: Up, mode: str) -> None:
    async with default_client(up, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("examples:release-checklist", {})
    assert raised.value.code == INVALID_PARAMS
    assert "did you mean examples.release_checklist?" in raised.value.error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_python_sdk_client_without_a_token_is_told_it_needs_the_bearer_token_of_the_tokens_file(
    up: Up, mode: str
) -> None:
    http = httpx2.AsyncClient()
    with pytest.raises(BaseException) as raised:  # noqa: PT011 (the SDK's error, as a developer sees it)
        async with http, Client(streamable_http_client(up.endpoints.mcp, http_client=http), mode=mode) as client:
            await client.list_tools()
    assert "needs a bearer token" in repr(raised.value)
    assert "tokens.json" in repr(raised.value)


async def test_the_typescript_client_without_a_token_is_told_where_the_bearer_token_is(up: Up) -> None:
    code, out, err = await run_node(str(TS_CLIENT), up.endpoints.mcp, "list", env=node_env())
    assert code != 0
    assert "needs a bearer token" in out + err
    assert "tokens.json" in out + err


async def test_the_inspector_cli_without_a_token_is_told_where_the_bearer_token_is(up: Up, tmp_path: Path) -> None:
    # as in a terminal (it signs in interactively there; without a TTY it stops before trying to)
    env = {**node_env(catalog=tmp_path / "catalog.json"), "MCP_AUTO_OPEN_ENABLED": "true", "BROWSER": "true"}
    argv = ("--cli", up.endpoints.mcp, "--transport", "http", "--method", "tools/list")
    code, out, err = await run_node(str(INSPECTOR), *argv, env=env)
    assert code != 0
    assert "Bearer" in out + err
    assert "tokens.json" in out + err
