"""The local stack is reachable only by the person who started it (:mod:`stack.access`, docs/security.md "Other
local users"): ``maka up`` as a process, probed by another local user (``runuser``) and by its owner."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import async_playwright

from stack.access import OWNER, TOKENS_FILE, Access, access_for_ports, make_private, read_owner_token, write_owner_token
from stack.state_dir import Endpoints, read_endpoints
from tests.helpers.chromium import CHROMIUM
from tests.helpers.other_user import (
    EMPTY_GRPC_MESSAGE,
    grpc_curl,
    http_curl,
    other_user,
    run,
    world_traversable_dir,
)
from tests.helpers.stack import EXAMPLES_CONFIG

MAKA = [sys.executable, "-m", "surfaces.cli.main"]
ROOT = Path(__file__).resolve().parents[2]
HEALTH = "/grpc.health.v1.Health/Check"
LIST_TOOLS = "/maka.broker.v1.CapabilityBrokerService/ListTools"
LIST_PENDING = "/maka.interaction.v1.InteractionService/ListPending"
MCP_INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
)
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


# --- the state dir's files --------------------------------------------------------------------------------------


def test_maka_up_keeps_grpc_on_unix_sockets_unless_its_ports_name_a_grpc_service() -> None:
    assert access_for_ports(None) is Access.UNIX
    assert access_for_ports("web=0,mcp=0") is Access.UNIX
    assert access_for_ports("ephemeral") is Access.TOKENS
    assert access_for_ports("default") is Access.TOKENS
    assert access_for_ports("web=9000,broker=6052") is Access.TOKENS


def test_the_state_dir_becomes_owner_only_and_the_token_file_is_0600_with_a_fresh_owner_token(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)

    make_private(state)
    first_path, first = write_owner_token(state)
    second_path, second = write_owner_token(state)

    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert first_path == second_path == state / TOKENS_FILE
    assert stat.S_IMODE(second_path.stat().st_mode) == 0o600
    assert first != second
    assert len(second) >= 32
    assert read_owner_token(second_path) == second
    entry = json.loads(second_path.read_text())["tokens"][0]
    assert (entry["name"], entry["roles"], entry["acts_for"]) == (OWNER, ["admin"], True)


def test_no_owner_token_is_read_from_a_missing_or_foreign_file(tmp_path: Path) -> None:
    assert read_owner_token(tmp_path / "absent.json") is None
    (tmp_path / "other.json").write_text(
        json.dumps({"tokens": [{"name": "ci", "token": "x" * 40, "roles": ["admin"]}]})
    )
    assert read_owner_token(tmp_path / "other.json") is None


# --- a real `maka up`, probed by another local user ------------------------------------------------------------


@dataclass
class Up:
    """A running ``maka up``: its ready line, state dir, endpoints and owner token."""

    ready_line: str
    state_dir: Path
    endpoints: Endpoints
    token: str


async def _maka_up(parent: Path, *ports: str) -> AsyncIterator[Up]:
    """``maka up`` (example servers, web page, MCP front door) with its state dir in ``parent``; SIGINT at the end."""
    state_dir = parent / "state"
    log = parent / "up.log"
    with log.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            *MAKA, "up", "--config", str(EXAMPLES_CONFIG), "--state-dir", str(state_dir), *ports,
            stdout=asyncio.subprocess.PIPE, stderr=log_file, cwd=ROOT,
        )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(120):
            ready = (await process.stdout.readline()).decode()
        assert ready.startswith("maka is ready: "), ready + log.read_text()[-4000:]
        endpoints = read_endpoints(state_dir)
        token = read_owner_token(Path(endpoints.tokens))
        assert token is not None
        yield Up(ready, state_dir, endpoints, token)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await process.wait()


@pytest_asyncio.fixture
async def parent() -> AsyncIterator[Path]:
    folder = world_traversable_dir("maka-access-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _maka(state_dir: Path, *argv: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKA_")}
    process = await asyncio.create_subprocess_exec(
        *MAKA, *argv, "--state-dir", str(state_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _grpc_status(headers: str) -> str:
    return next((line.split(":", 1)[1].strip() for line in headers.splitlines() if line.startswith("grpc-status:")), "")


async def _owner_uses_web_and_mcp(up: Up) -> None:
    """The owner's browser: the printed URL signs in (cookie, token gone from the address); the owner's MCP client
    with the bearer token initializes."""
    assert f"{up.endpoints.web}/?token={up.token} " in up.ready_line
    async with httpx.AsyncClient(base_url=up.endpoints.web, timeout=10) as browser:
        signed_in = await browser.get(f"/?token={up.token}")
        assert (signed_in.status_code, signed_in.headers["location"]) == (303, "/")
        assert "httponly" in signed_in.headers["set-cookie"].lower()
        assert up.token not in signed_in.headers["set-cookie"]
        assert (await browser.get("/api/session")).status_code == 200
        page = await browser.get("/")
        assert page.status_code == 200
        assert "<html" in page.text.lower()
    async with httpx.AsyncClient(timeout=10) as client:
        answered = await client.post(
            up.endpoints.mcp, content=MCP_INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {up.token}"}
        )
        assert answered.status_code == 200, answered.text


async def _other_user_is_refused_by_web_and_mcp(user: str, up: Up) -> None:
    web = up.endpoints.web
    assert (await run(http_curl(f"{web}/api/session"), user=user)).out == "401"
    assert (await run(http_curl(f"{web}/api/pending"), user=user)).out == "401"
    assert (await run(http_curl(f"{web}/"), user=user)).out == "303"  # to /login
    assert (await run(http_curl(f"{web}/?token=not-the-token"), user=user)).out == "303"
    refused = await run(http_curl(up.endpoints.mcp, method="POST", headers=MCP_HEADERS, body=MCP_INITIALIZE), user=user)
    assert refused.out == "401"


async def _owner_opens_the_printed_url_in_chromium(up: Up) -> None:
    """The printed URL signs Chromium in and the page loads with the token gone from the address bar; a browser
    without it gets the login page."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--disable-gpu"])
        try:
            page = await (await browser.new_context()).new_page()
            await page.goto(f"{up.endpoints.web}/?token={up.token}")
            await page.wait_for_selector("body[data-ready='true']", timeout=30_000)
            assert page.url == f"{up.endpoints.web}/"
            stranger = await (await browser.new_context()).new_page()
            await stranger.goto(f"{up.endpoints.web}/")
            assert stranger.url == f"{up.endpoints.web}/login"
        finally:
            await browser.close()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.browser
async def test_another_local_user_reaches_nothing_of_the_default_stack_while_its_owner_uses_all_of_it(
    parent: Path,
) -> None:
    user = other_user()
    async for up in _maka_up(parent, "--ports", "web=0,mcp=0"):
        sockets = {name: getattr(up.endpoints, name) for name in ("interaction", "broker", "provider")}
        assert all(target.startswith(f"unix://{up.state_dir}/sock/") for target in sockets.values()), sockets
        assert stat.S_IMODE(up.state_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(os.stat(up.endpoints.tokens).st_mode) == 0o600
        # the other user may enter the parent folder, but not the state dir: no endpoints, no token, no socket
        assert (await run(["ls", str(parent)], user=user)).code == 0
        assert (await run(["cat", str(up.state_dir / "endpoints.json")], user=user)).code != 0
        assert (await run(["cat", up.endpoints.tokens], user=user)).code != 0
        for name, target in sockets.items():
            method = LIST_PENDING if name == "interaction" else LIST_TOOLS if name == "broker" else HEALTH
            mine = await run(grpc_curl(target, method), stdin=EMPTY_GRPC_MESSAGE)
            assert _grpc_status(mine.out) == "0", (name, mine)
            theirs = await run(grpc_curl(target, method), user=user, stdin=EMPTY_GRPC_MESSAGE)
            assert theirs.code != 0, (name, theirs)
            assert _grpc_status(theirs.out) == "", (name, theirs)
        await _other_user_is_refused_by_web_and_mcp(user, up)

        code, out, err = await _maka(up.state_dir, "status")
        assert code == 0, err
        assert f"broker       serving      {sockets['broker']}" in out
        assert (await _maka(up.state_dir, "call", "examples:ping"))[:2] == (0, "pong\n")
        await _owner_uses_web_and_mcp(up)
        await _owner_opens_the_printed_url_in_chromium(up)


@pytest.mark.e2e
@pytest.mark.slow
async def test_with_tcp_ports_every_service_refuses_another_local_user_without_the_owners_token(
    parent: Path,
) -> None:
    user = other_user()
    async for up in _maka_up(parent, "--ports", "ephemeral"):
        assert up.endpoints.broker.startswith("127.0.0.1:")
        assert up.endpoints.interaction.startswith("127.0.0.1:")
        for target, method in ((up.endpoints.broker, LIST_TOOLS), (up.endpoints.interaction, LIST_PENDING)):
            theirs = await run(grpc_curl(target, method), user=user, stdin=EMPTY_GRPC_MESSAGE)
            assert _grpc_status(theirs.out) == "16", theirs  # UNAUTHENTICATED: the port answers, the service refuses
            with_token = await run(grpc_curl(target, method, token=up.token), stdin=EMPTY_GRPC_MESSAGE)
            assert _grpc_status(with_token.out) == "0", with_token
        await _other_user_is_refused_by_web_and_mcp(user, up)

        # the owner's commands find the token through endpoints.json, unchanged
        assert (await _maka(up.state_dir, "call", "examples:ping"))[:2] == (0, "pong\n")
        code, out, err = await _maka(up.state_dir, "status")
        assert code == 0, err
        assert f"broker       serving      {up.endpoints.broker}" in out, out
        await _owner_uses_web_and_mcp(up)
        # the token went to every child and through every service: it is in no log line
        logs = [parent / "up.log", *sorted((up.state_dir / "logs").glob("*"))]
        assert all(up.token not in path.read_text(errors="replace") for path in logs if path.is_file())
