"""OAuth sign-in end to end in real Chromium (docs/design.md#callers-and-sign-in): an OAuth-protected MCP server (the
official conformance harness's ``auth/metadata-default`` resource and authorization servers), the whole
stack as processes (``maka up`` with the web surface), the Host-owned prompt on the web page, the
redirect back to ``/oauth/callback``, the call succeeding, tokens surviving a restart of the stack, and
the access token found nowhere in logs, Redis or the state directory in plaintext."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path

import grpc.aio
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from playwright.async_api import async_playwright

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from tests.conformance.client.runner import call_tool
from tests.helpers.chromium import CHROMIUM
from tests.helpers.oauth_server import harness_oauth_server
from tests.helpers.stack import running_stack
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SERVER = "remote"


@pytest.fixture
def oauth_server() -> Iterator[str]:
    """The harness's OAuth-protected MCP server; yields its URL."""
    with harness_oauth_server() as url:
        yield url


async def _broker(target: str) -> tuple[grpc.aio.Channel, broker_pb2_grpc.CapabilityBrokerServiceAsyncStub]:
    channel = grpc.aio.insecure_channel(target)
    return channel, broker_pb2_grpc.CapabilityBrokerServiceStub(channel)


async def _tools(broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, *, timeout: float = 30.0) -> list[str]:
    async def names() -> list[str] | None:
        listed = await broker.ListTools(broker_pb2.ListToolsRequest(), timeout=5)
        return [t.qualified_name for t in listed.tools if t.qualified_name.startswith(f"{SERVER}:")] or None

    return await eventually(names, timeout=timeout, interval=0.1, what=f"{SERVER}'s Tools listed")


def _access_tokens(state: Path) -> list[str]:
    """Decrypt the vault (as the provider does) to learn the tokens the canary check looks for."""
    key = base64.b64decode((state / "oauth.key").read_text().strip())
    tokens = []
    for path in (state / "oauth").glob("*.tokens"):
        blob = path.read_bytes()
        aad = f"maka-oauth/v1|local|{SERVER}|{(state.parent / 'server-url').read_text()}".encode()
        record = json.loads(AESGCM(key).decrypt(blob[:12], blob[12:], aad))
        tokens.append(record["tokens"]["access_token"])
    return tokens


def _plaintext_files(directory: Path, needle: str) -> list[Path]:
    return [path for path in directory.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()]


def test_sign_in_through_the_web_page_then_the_call_succeeds_and_survives_a_restart(
    tmp_path: Path, oauth_server: str
) -> None:
    # Its own thread and event loop: the sync Playwright of the other browser tests in this process
    # leaves a running loop behind, on which an async test could not start.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _sign_in_scenario(tmp_path, oauth_server)).result(timeout=170)


async def _sign_in_scenario(tmp_path: Path, oauth_server: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {SERVER: {"url": oauth_server, "era": "auto"}}}))
    (tmp_path / "server-url").write_text(oauth_server)
    state = tmp_path / "state"
    logs: list[str] = []

    async with running_stack(tmp_path, config=config, web=True) as running:
        channel, broker = await _broker(running.endpoints.broker)
        try:
            listing = await broker.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=5)
            [prompt] = listing.sign_ins
            assert (prompt.server, prompt.state) == (SERVER, broker_pb2.SIGN_IN_STATE_REQUIRED)
            assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in prompt.authorization_url

            # A call while the server waits for sign-in fails at once with AUTH_REQUIRED and the hint.
            early = await call_tool(broker, session_id="s-oauth", qualified_tool=f"{SERVER}:test-tool", arguments={})
            assert (early.kind, early.code) == ("failure", "FAILURE_CODE_AUTH_REQUIRED"), early
            assert prompt.authorization_url in early.message

            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--disable-gpu"])
                context = await browser.new_context()
                page = await context.new_page()
                await page.goto(running.endpoints.web)
                card = page.locator(".sign-in", has_text=f"Sign in to {SERVER}")
                await card.wait_for(timeout=15_000)
                assert await card.locator(".sign-in-url").text_content() == prompt.authorization_url
                link = card.get_by_role("link", name="Open sign-in page")
                assert await link.get_attribute("href") == prompt.authorization_url
                async with context.expect_page() as opened:
                    await link.click()
                callback = await opened.value
                await callback.wait_for_load_state()
                assert "/oauth/callback" in callback.url
                assert await callback.locator("h1").text_content() == f"Signed in to {SERVER}"
                await card.wait_for(state="detached", timeout=15_000)  # the prompt goes away
                await browser.close()

            [tool] = await _tools(broker)
            done = await call_tool(broker, session_id="s-oauth", qualified_tool=tool, arguments={})
            assert (done.kind, done.is_error) == ("result", False), done
            signed = await broker.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=5)
            assert [(s.server, s.state) for s in signed.sign_ins] == [(SERVER, broker_pb2.SIGN_IN_STATE_SIGNED_IN)]
        finally:
            await channel.close()
        logs.append(running.all_logs())

    # Restart the whole stack on the same state: no new sign-in, the call works with the stored tokens.
    async with running_stack(tmp_path, config=config, web=True) as running:
        channel, broker = await _broker(running.endpoints.broker)
        try:
            [tool] = await _tools(broker)
            listing = await broker.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=5)
            assert [s.state for s in listing.sign_ins] == [broker_pb2.SIGN_IN_STATE_SIGNED_IN]
            again = await call_tool(broker, session_id="s-oauth", qualified_tool=tool, arguments={})
            assert (again.kind, again.is_error) == ("result", False), again
        finally:
            await channel.close()
        logs.append(running.all_logs())

    [token] = _access_tokens(state)
    assert len(token) >= 8
    for text in logs:
        assert token not in text, "the access token reached a log"
    assert _plaintext_files(state, token) == [], "the access token is on disk (or in Redis's AOF) in plaintext"
    assert list((state / "redis").rglob("*")), "the embedded Redis wrote its AOF into the state dir"
