"""The MCP front door keeps its clients apart (a stack with a tokens file, real ``maka up``, raw HTTP and the
official Python SDK client): a 2025-11-25 ``Mcp-Session-Id`` is its opener's (anyone else's request with it is
answered as for an unknown session, and the id never reaches the log in full), a ``requestState`` answers
nothing for another principal even in the same Maka session, and one principal can neither fill the endpoint's
calls in flight nor its sessions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import httpx2
import pytest
import pytest_asyncio
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult

from tests.helpers.waiting import eventually
from tests.surfaces.mcp.stack import Up, maka_up

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

STACK = "iso-stack-secret"
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivy", "jack", "kate")
TOKENS = {name: f"iso-{name}-secret" for name in NAMES}
SCOPED = ("carol", "dave")
"""Two callers scoped to the door's own session (``default``): their calls share the Maka session."""
CALLS_CAP = 2
SESSIONS_CAP = 2
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY = "2025-11-25"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    tmp = tmp_path_factory.mktemp("front-door-isolation")
    tokens = tmp / "tokens.json"
    entries: list[dict[str, Any]] = [{"name": "stack", "token": STACK, "roles": ["admin"], "acts_for": True}]
    for name, token in TOKENS.items():
        entry: dict[str, Any] = {"name": name, "token": token, "roles": ["caller"]}
        if name in SCOPED:
            entry["sessions"] = ["default"]
        entries.append(entry)
    tokens.write_text(json.dumps({"tokens": entries}))
    env = {"MAKA_AUTH_TOKENS_FILE": str(tokens)}
    env |= {name: STACK for name in ("MAKA_CALLER_TOKEN", "MAKA_SURFACE_TOKEN", "MAKA_INTERACTION_TOKEN")}
    env["MAKA_BROKER_TOKEN"] = STACK
    env["MAKA_MCP_MAX_CALLS_PER_CLIENT"] = str(CALLS_CAP)
    env["MAKA_MCP_MAX_SESSIONS_PER_CLIENT"] = str(SESSIONS_CAP)
    async with maka_up(tmp, env=env) as running:
        yield running


def _headers(name: str, session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKENS[name]}", **extra}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": LEGACY}
    return headers


def _rpc(method: str, params: Mapping[str, Any] | None = None, id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    if id is not None:
        message["id"] = id
    return message


async def _open_session(http: httpx.AsyncClient, up: Up, name: str) -> str:
    """A 2025-11-25 session of ``name`` (initialize, then initialized): its ``Mcp-Session-Id``."""
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}
    opened = await http.post(up.endpoints.mcp, json=_rpc("initialize", params), headers=_headers(name))
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = await http.post(
        up.endpoints.mcp, json=_rpc("notifications/initialized", id=None), headers=_headers(name, session)
    )
    assert ready.status_code == 202, ready.text
    return session


async def _list(http: httpx.AsyncClient, up: Up, name: str, session: str) -> httpx.Response:
    return await http.post(up.endpoints.mcp, json=_rpc("tools/list", {}), headers=_headers(name, session))


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_another_principal_with_a_session_id_is_answered_as_for_an_unknown_session(up: Up) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        session = await _open_session(http, up, "alice")
        unknown = await _list(http, up, "bob", "0" * 32)
        assert (unknown.status_code, unknown.json()["error"]["message"]) == (404, "Session not found")

        ping = _rpc("tools/call", {"name": "examples.ping", "arguments": {}}, id=2)
        cancel = _rpc("notifications/cancelled", {"requestId": 2, "reason": "bob"}, id=None)
        refused = [
            await _list(http, up, "bob", session),
            await http.post(up.endpoints.mcp, json=ping, headers=_headers("bob", session)),
            await http.post(up.endpoints.mcp, json=cancel, headers=_headers("bob", session)),
            await http.get(up.endpoints.mcp, headers=_headers("bob", session, **{"last-event-id": "0" * 32})),
            await http.delete(up.endpoints.mcp, headers=_headers("bob", session)),
        ]
        assert [(r.status_code, r.content) for r in refused] == [(404, unknown.content)] * len(refused)

        still = await _list(http, up, "alice", session)  # bob's DELETE ended nothing
        assert still.status_code == 200
        assert "examples.deploy" in still.text
        ended = await http.delete(up.endpoints.mcp, headers=_headers("alice", session))
        assert ended.status_code == 200
        assert (await _list(http, up, "alice", session)).status_code == 404
    log = (up.state_dir.parent / "up.log").read_text()
    assert f"Rejecting request for session {session[:8]}…" in log  # the SDK's warning, the id cut short
    assert session not in log


async def _accept(context: object, params: object) -> ElicitResult:
    return ElicitResult(action="accept", content={"environment": "staging", "confirm": True})


def _client(up: Up, name: str, http: httpx2.AsyncClient, mode: str = "auto") -> Client:
    return Client(streamable_http_client(up.endpoints.mcp, http_client=http), mode=mode, elicitation_callback=_accept)


def _http(name: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[name]}"}, timeout=60)


async def _deploy_waiting(client: Client, artifact: str) -> InputRequiredResult:
    first = await client.session.call_tool("examples.deploy", {"artifact": artifact}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult)
    return first


async def _answer(client: Client, artifact: str, first: InputRequiredResult, environment: str) -> Any:
    assert first.input_requests is not None
    (key,) = first.input_requests
    answer = ElicitResult(action="accept", content={"environment": environment, "confirm": True})
    return await client.session.call_tool(
        "examples.deploy",
        {"artifact": artifact},
        input_responses={key: answer},
        request_state=first.request_state,
        allow_input_required=True,
    )


async def test_a_request_state_answers_nothing_for_another_principal_scoped_to_the_same_session(up: Up) -> None:
    async with (
        _http("carol") as carol_http,
        _http("dave") as dave_http,
        _client(up, "carol", carol_http) as carol,
        _client(up, "dave", dave_http) as dave,
    ):
        first = await _deploy_waiting(carol, "carols")
        with pytest.raises(MCPError) as raised:
            await _answer(dave, "carols", first, "production")
        assert raised.value.error.data == {"reason": "invalid_request_state"}
        done = await _answer(carol, "carols", first, "staging")
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed carols to staging."  # dave's production answer was not taken


async def test_a_call_past_its_principals_cap_is_a_resource_exhausted_tool_error_and_others_still_call(
    up: Up,
) -> None:
    async with (
        _http("erin") as erin_http,
        _http("frank") as frank_http,
        _client(up, "erin", erin_http) as erin,
        _client(up, "frank", frank_http) as frank,
    ):
        waiting = [await _deploy_waiting(erin, f"erin-{n}") for n in range(CALLS_CAP)]  # detached, counted
        refused = await erin.call_tool("examples.ping", {})
        assert refused.is_error
        assert _text(refused).startswith("RESOURCE_EXHAUSTED:")
        assert f"{CALLS_CAP} calls" in _text(refused)
        async with _http("erin") as legacy_http, _client(up, "erin", legacy_http, mode="legacy") as legacy:
            old = await legacy.call_tool("examples.ping", {})  # the cap counts both eras
        assert _text(old).startswith("RESOURCE_EXHAUSTED:")
        assert _text(await frank.call_tool("examples.ping", {})) == "pong"

        done = await _answer(erin, "erin-0", waiting[0], "staging")
        assert isinstance(done, CallToolResult)
        assert _text(done) == "Deployed erin-0 to staging."
        assert _text(await erin.call_tool("examples.ping", {})) == "pong"  # room again
        await _answer(erin, "erin-1", waiting[1], "staging")


async def test_an_initialize_past_the_principals_session_cap_closes_its_oldest_idle_session(up: Up) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        sessions = [await _open_session(http, up, "gina") for _ in range(SESSIONS_CAP + 1)]
        statuses = [(await _list(http, up, "gina", session)).status_code for session in sessions]
        assert statuses == [404] + [200] * SESSIONS_CAP
        other = await _open_session(http, up, "hank")  # another principal's sessions are its own
        assert (await _list(http, up, "hank", other)).status_code == 200
        assert (await _list(http, up, "gina", sessions[-1])).status_code == 200


async def test_an_initialize_past_the_session_cap_is_429_while_every_session_of_the_principal_is_busy(
    up: Up,
) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        sessions = [await _open_session(http, up, "ivy") for _ in range(SESSIONS_CAP)]
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "ivy", "version": "1"}}
        initialize = _rpc("initialize", params)
        async with (
            http.stream("GET", up.endpoints.mcp, headers=_headers("ivy", sessions[0])) as first,
            http.stream("GET", up.endpoints.mcp, headers=_headers("ivy", sessions[1])) as second,
        ):
            assert (first.status_code, second.status_code) == (200, 200)  # both sessions have a request in flight
            refused = await http.post(up.endpoints.mcp, json=initialize, headers=_headers("ivy"))
            assert refused.status_code == 429
            assert refused.json()["error"]["message"].startswith("Too many open sessions for this client")
            assert "mcp-session-id" not in refused.headers
        for session in sessions:  # nothing was closed for the refused one
            assert (await _list(http, up, "ivy", session)).status_code == 200

        async def opened() -> str | None:
            response = await http.post(up.endpoints.mcp, json=initialize, headers=_headers("ivy"))
            return response.headers.get("mcp-session-id") if response.status_code == 200 else None

        assert await eventually(opened, timeout=30, what="a session once the streams closed")


async def test_parallel_initializes_of_one_principal_leave_at_most_its_cap_of_sessions_open(up: Up) -> None:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "jack", "version": "1"}}

    async def initialize() -> httpx.Response:
        return await http.post(up.endpoints.mcp, json=_rpc("initialize", params), headers=_headers("jack"))

    async with httpx.AsyncClient(timeout=60) as http:
        answers = await asyncio.gather(*(initialize() for _ in range(4 * SESSIONS_CAP)))
        assert {answer.status_code for answer in answers} <= {200, 429}  # 429: every session busy at that moment
        opened = [answer.headers["mcp-session-id"] for answer in answers if answer.status_code == 200]
        assert opened
        ended = [(await http.delete(up.endpoints.mcp, headers=_headers("jack", sid))).status_code for sid in opened]
    assert 0 < ended.count(200) <= SESSIONS_CAP  # any others were closed as newer ones opened
    assert ended.count(404) == len(opened) - ended.count(200)


async def test_a_session_opening_whose_body_trickles_in_does_not_hold_up_its_principals_other_openings(
    up: Up,
) -> None:
    url = httpx.URL(up.endpoints.mcp)
    assert url.port is not None
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "kate", "version": "1"}}
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nAuthorization: Bearer {TOKENS['kate']}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 1000\r\n\r\n{"
    )
    _reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(head.encode())  # the headers and one byte of a 1000-byte body; the rest never comes
        await writer.drain()
        async with httpx.AsyncClient(timeout=60) as http:
            answer = await http.post(up.endpoints.mcp, json=_rpc("initialize", params), headers=_headers("kate"))
            assert answer.status_code == 200, answer.text  # not held behind the trickling one (nor 503 after it)
            session = answer.headers["mcp-session-id"]
            assert (await http.delete(up.endpoints.mcp, headers=_headers("kate", session))).status_code == 200
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
