"""The MCP front door through real processes: ``maka up`` with the example server, the official SDK ``Client``
at both protocol eras over the URL in ``endpoints.json``, forms answered with ``maka answer``.

Covers the done-when of docs/mcp-front-door.md: the ``deploy`` Tool called at 2026-07-28 and at 2025-11-25
returns "Deployed … to staging." after the form is answered from the CLI; progress names the form and the web
page; a client that cancels or disconnects mid-form leaves nothing pending; an unknown Tool is a JSON-RPC
error; two concurrent clients are isolated.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
)

from surfaces.mcp.elicit import LEGACY_ASKS
from surfaces.mcp.refusals import ASK_AGAIN
from tests.helpers.cli import maka
from tests.helpers.waiting import eventually
from tests.surfaces.mcp.stack import Up, maka_up, owner_client

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

DEPLOY = "examples.deploy"
GRACE_SECONDS = 10
"""The stack's reattach grace: a client that does not come back is stopped past it."""
GATED = "gated.gated"
ROUTE = "routed.route"
FORM_ID = re.compile(r"\(([^()\s]+)\): answer it")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    """The example server, ``broken`` (one that exits at once), ``gated`` (a form, then a wait at a gate the
    test opens: tests/fixtures/mcp_servers/gated_server.py) and ``routed`` (an argument mirrored into an
    ``Mcp-Param-*`` header: tests/fixtures/mcp_servers/routed_server.py); web on."""
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    gated = {"command": sys.executable, "args": ["-m", "tests.fixtures.mcp_servers.gated_server"]}
    routed = {"command": sys.executable, "args": ["-m", "tests.fixtures.mcp_servers.routed_server"]}
    servers = {"broken": broken, "gated": gated, "routed": routed}
    env = {"MAKA_MCP_REATTACH_GRACE_SECONDS": str(GRACE_SECONDS)}
    async with maka_up(tmp_path_factory.mktemp("front-door"), env=env, extra_servers=servers) as running:
        yield running


async def _pending(up: Up) -> list[dict[str, object]]:
    ran = await maka("pending", "--json", state_dir=up.state_dir)
    assert ran.code == 0, ran.err
    forms: list[dict[str, object]] = json.loads(ran.out)
    return forms


async def _answer_staging(up: Up, interaction_id: str) -> None:
    values = json.dumps({"environment": "staging", "confirm": True})
    ran = await maka("answer", interaction_id, "accept", "--values", values, state_dir=up.state_dir)
    assert ran.code == 0, ran.err


class _Progress:
    """A progress callback that remembers every message and signals the first form it names."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.form = asyncio.get_running_loop().create_future()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        found = FORM_ID.search(message or "")
        if found and not self.form.done():
            self.form.set_result(found.group(1))


async def _deploy_answered_from_the_cli(up: Up, client: Client, artifact: str) -> tuple[str, _Progress]:
    progress = _Progress()
    call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": artifact}, progress_callback=progress))
    async with asyncio.timeout(60):
        interaction_id = await asyncio.shield(progress.form)
    await _answer_staging(up, interaction_id)
    async with asyncio.timeout(60):
        result = await call
    assert not result.is_error
    text = "\n".join(block.text for block in result.content if block.type == "text")
    return text, progress


async def test_the_endpoint_url_is_in_endpoints_json_and_the_ready_line(up: Up) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", up.endpoints.mcp)
    assert f"mcp {up.endpoints.mcp}" in up.ready_line


async def test_maka_status_lists_the_endpoint_as_a_serving_service(up: Up) -> None:
    ran = await maka("status", "--json", state_dir=up.state_dir)

    assert json.loads(ran.out)["services"]["mcp"] == {"address": up.endpoints.mcp, "state": "serving"}


async def test_tools_list_names_the_example_tools_with_server_prefixes_at_both_eras(up: Up) -> None:
    for mode in ("auto", "legacy"):
        async with owner_client(up, mode=mode) as client:
            listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert {"examples.deploy", "examples.release_checklist", "examples.ping"} <= set(tools)
        assert tools[DEPLOY].input_schema["properties"]["artifact"]["type"] == "string"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_keep_their_servers_title_and_annotations_at_both_eras(up: Up, mode: str) -> None:
    async with owner_client(up, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    deploy, ping = tools[DEPLOY], tools["examples.ping"]
    assert deploy.title == "Deploy an artifact"
    assert deploy.annotations is not None
    assert (deploy.annotations.destructive_hint, deploy.annotations.open_world_hint) == (True, False)
    assert ping.annotations is not None
    assert (ping.annotations.read_only_hint, ping.annotations.idempotent_hint) == (True, True)
    assert tools["examples.release_checklist"].annotations is None


async def test_a_modern_client_deploys_to_staging_after_the_form_is_answered_with_maka_answer(up: Up) -> None:
    async with owner_client(up) as client:
        assert client.protocol_version == "2026-07-28"
        text, progress = await _deploy_answered_from_the_cli(up, client, "web-2026")

    assert text == "Deployed web-2026 to staging."
    assert any("Choose the deployment target" in m and up.endpoints.web in m for m in progress.messages)


async def test_a_legacy_client_deploys_to_staging_after_the_form_is_answered_with_maka_answer(up: Up) -> None:
    async with owner_client(up, mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        text, _progress = await _deploy_answered_from_the_cli(up, client, "web-2025")

    assert text == "Deployed web-2025 to staging."


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unknown_tool_is_a_jsonrpc_invalid_params_error(up: Up, mode: str) -> None:
    for name in ("examples.nope", "no-such-name"):
        async with owner_client(up, mode=mode) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, {})
        assert raised.value.code == INVALID_PARAMS
        assert name in raised.value.error.message


async def test_invalid_arguments_are_a_tool_error_naming_the_problem(up: Up) -> None:
    async with owner_client(up) as client:
        result = await client.call_tool(DEPLOY, {"artifact": 7})
    assert result.is_error
    text = "\n".join(block.text for block in result.content if block.type == "text")
    assert text.startswith("INVALID_ARGUMENTS: ")


async def test_a_server_that_is_down_is_a_tool_error_naming_it_and_its_cause(up: Up) -> None:
    async with owner_client(up) as client:
        result = await client.call_tool("broken.anything", {})
    assert result.is_error
    text = "\n".join(block.text for block in result.content if block.type == "text")
    assert text.startswith("SERVER_UNAVAILABLE: ")
    assert "broken" in text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_cancelling_mid_form_leaves_nothing_pending(up: Up, mode: str) -> None:
    async with owner_client(up, mode=mode) as client:
        progress = _Progress()
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": "cancelled"}, progress_callback=progress))
        async with asyncio.timeout(60):
            interaction_id = await asyncio.shield(progress.form)
        assert any(form["id"] == interaction_id for form in await _pending(up))
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call

    await eventually(lambda: _nothing_pending(up), timeout=30, interval=0.2, what="no pending form")


async def _nothing_pending(up: Up) -> bool:
    return not await _pending(up)


async def test_a_client_disconnecting_mid_form_leaves_nothing_pending(up: Up) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": DEPLOY,
            "arguments": {"artifact": "gone"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "progressToken": "p1",
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
    async with (
        httpx.AsyncClient(timeout=60) as http,
        http.stream("POST", up.endpoints.mcp, json=request, headers=headers) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if "Choose the deployment target" in line:
                break  # a form waits: drop the connection
    await eventually(lambda: _nothing_pending(up), timeout=30, interval=0.2, what="no pending form")


async def test_two_concurrent_clients_each_get_their_own_result(up: Up) -> None:
    async with owner_client(up) as modern, owner_client(up, mode="legacy") as legacy:
        first, second = _Progress(), _Progress()
        one = asyncio.ensure_future(modern.call_tool(DEPLOY, {"artifact": "one"}, progress_callback=first))
        two = asyncio.ensure_future(legacy.call_tool(DEPLOY, {"artifact": "two"}, progress_callback=second))
        async with asyncio.timeout(60):
            first_form, second_form = await asyncio.gather(asyncio.shield(first.form), asyncio.shield(second.form))
        assert first_form != second_form
        decline = await maka("answer", second_form, "decline", state_dir=up.state_dir)
        assert decline.code == 0, decline.err
        async with asyncio.timeout(60):
            declined = await two
        assert not one.done()
        await _answer_staging(up, first_form)
        async with asyncio.timeout(60):
            deployed = await one

    assert deployed.content[0].text == "Deployed one to staging."  # type: ignore[union-attr]
    assert declined.content[0].text == "Deployment of two was declined by the user; nothing was deployed."  # type: ignore[union-attr]


async def test_a_modern_call_whose_mcp_param_header_contradicts_its_argument_is_refused(up: Up) -> None:
    async with owner_client(up) as client:
        assert ROUTE in {tool.name for tool in (await client.list_tools()).tools}
        routed = await client.call_tool(ROUTE, {"region": "eu"})  # the SDK mirrors it: Mcp-Param-Region: eu
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": ROUTE,
            "arguments": {"region": "eu"},
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
        "mcp-name": ROUTE,
    }
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(up.endpoints.mcp, json=request, headers={**headers, "mcp-param-region": "us"})
        missing = await http.post(up.endpoints.mcp, json=request, headers=headers)

    assert routed.content[0].text == "routed to eu"  # type: ignore[union-attr]
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == HEADER_MISMATCH
    assert "Mcp-Param-Region" in refused.json()["error"]["message"]
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == HEADER_MISMATCH


async def test_a_foreign_origin_is_refused(up: Up) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            up.endpoints.mcp,
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
            headers={**up.auth, "origin": "http://evil.example", "accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 403


async def test_a_foreign_host_header_is_refused(up: Up) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            up.endpoints.mcp,
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
            headers={**up.auth, "host": "evil.example:80", "accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 421


async def test_a_legacy_session_is_told_when_a_reload_adds_a_server(up: Up) -> None:
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with owner_client(up, mode="legacy", message_handler=on_message) as client:
        assert "more.ping" not in {tool.name for tool in (await client.list_tools()).tools}
        servers = json.loads(up.config.read_text())
        servers["mcpServers"]["more"] = servers["mcpServers"]["examples"]
        up.config.write_text(json.dumps(servers))
        reloaded = await maka("reload", state_dir=up.state_dir)
        assert reloaded.code == 0, reloaded.err

        async with asyncio.timeout(60):
            await changed.wait()
        assert "more.ping" in {tool.name for tool in (await client.list_tools()).tools}


async def test_a_modern_client_listening_is_told_when_a_reload_adds_a_server(up: Up) -> None:
    async with owner_client(up) as client:
        assert client.protocol_version == "2026-07-28"
        tools = client.server_capabilities.tools
        assert tools is not None
        assert tools.list_changed
        async with client.listen(tools_list_changed=True) as subscription:
            assert "extra.ping" not in {tool.name for tool in (await client.list_tools()).tools}
            servers = json.loads(up.config.read_text())
            servers["mcpServers"]["extra"] = servers["mcpServers"]["examples"]
            up.config.write_text(json.dumps(servers))
            reloaded = await maka("reload", state_dir=up.state_dir)
            assert reloaded.code == 0, reloaded.err

            listed = False
            async with asyncio.timeout(60):
                async for _event in subscription:  # each event: "the listing changed, read it again"
                    if "extra.ping" in {tool.name for tool in (await client.list_tools()).tools}:
                        listed = True
                        break
    assert listed


async def test_two_legacy_clients_calls_run_in_their_own_maka_sessions(up: Up) -> None:
    async with owner_client(up, mode="legacy") as one, owner_client(up, mode="legacy") as two:
        first, second = _Progress(), _Progress()
        calls = [
            asyncio.ensure_future(one.call_tool(DEPLOY, {"artifact": "own-1"}, progress_callback=first)),
            asyncio.ensure_future(two.call_tool(DEPLOY, {"artifact": "own-2"}, progress_callback=second)),
        ]
        async with asyncio.timeout(60):
            ids = await asyncio.gather(asyncio.shield(first.form), asyncio.shield(second.form))
        sessions = {str(form["id"]): str(form["session"]) for form in await _pending(up)}
        for interaction_id in ids:
            await _answer_staging(up, interaction_id)
        async with asyncio.timeout(60):
            results = await asyncio.gather(*calls)

    assert sessions[ids[0]] != sessions[ids[1]]
    assert all(sessions[i].startswith("default.owner.") for i in ids), sessions
    assert [_text(result) for result in results] == ["Deployed own-1 to staging.", "Deployed own-2 to staging."]


async def test_a_legacy_client_closing_its_session_mid_form_leaves_nothing_pending(up: Up) -> None:
    progress = _Progress()
    async with owner_client(up, mode="legacy") as client:
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": "closed"}, progress_callback=progress))
        async with asyncio.timeout(60):
            interaction_id = await asyncio.shield(progress.form)
        assert any(form["id"] == interaction_id for form in await _pending(up))
    # the session is closed (HTTP DELETE) with the call still waiting for its form
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await call

    await eventually(lambda: _nothing_pending(up), timeout=30, interval=0.2, what="no pending form")


async def test_a_legacy_client_dropping_the_stream_mid_form_without_cancelling_leaves_nothing_pending(
    up: Up,
) -> None:
    headers = {**up.auth, "accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": DEPLOY, "arguments": {"artifact": "dropped"}, "_meta": {"progressToken": "p"}},
    }
    async with httpx.AsyncClient(timeout=60) as http:
        opened = await http.post(up.endpoints.mcp, json=initialize, headers=headers)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(up.endpoints.mcp, json=initialized, headers=session)
        async with http.stream("POST", up.endpoints.mcp, json=call, headers=session) as response:
            async for line in response.aiter_lines():
                if "Choose the deployment target" in line:
                    break  # a form waits: drop the stream, keep the session, send no cancel

        # nothing resumes the stream: the call is stopped once the grace is over
        await eventually(lambda: _nothing_pending(up), timeout=30 + GRACE_SECONDS, interval=0.2, what="no pending form")


# --------------------------------------------------------------------------- the client as a surface

STAGING = {"environment": "staging", "confirm": True}
PRODUCTION = {"environment": "production", "confirm": True}


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def _staging(context: object, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content=STAGING)


async def _first_round(client: Client, artifact: str) -> InputRequiredResult:
    first = await client.session.call_tool(DEPLOY, {"artifact": artifact}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    return first


def _only_form(first: InputRequiredResult) -> str:
    assert first.input_requests is not None
    assert len(first.input_requests) == 1
    ((key, request),) = first.input_requests.items()
    assert isinstance(request, ElicitRequest)
    assert request.params.message.startswith("Choose the deployment target")
    return key


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_that_declares_elicitation_answers_the_form_itself_and_deploys_to_staging(
    up: Up, mode: str
) -> None:
    async with owner_client(up, mode=mode, elicitation_callback=_staging) as client:
        async with asyncio.timeout(60):
            result = await client.call_tool(DEPLOY, {"artifact": f"self-{mode}"})
    assert _text(result) == f"Deployed self-{mode} to staging."
    assert not await _pending(up)


async def test_a_modern_client_gets_input_required_with_makas_own_request_state(up: Up) -> None:
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await _first_round(client, "state")
        key = _only_form(first)
        assert any(form["id"] == key for form in await _pending(up))
        state = first.request_state or ""
        payload, _mac = state.split(".")
        named = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert set(named) == {"c", "i", "d", "s", "p", "e"}
        assert named["i"] == [key]
        assert named["s"] == "default.owner"  # the client's own session
        assert json.loads(named["p"]) == ["owner", "", ""]  # and its principal
        # the example server's own sealed requestState ("v1." AES-GCM) never reaches the client
        assert not state.startswith("v1.")
        assert "v1." not in first.model_dump_json(by_alias=True, exclude={"request_state"})
        done = await client.session.call_tool(
            DEPLOY,
            {"artifact": "state"},
            input_responses={key: ElicitResult(action="accept", content=STAGING)},
            request_state=state,
            allow_input_required=True,
        )
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed state to staging."


async def test_a_modern_client_answering_after_maka_answer_gets_the_settled_outcome(up: Up) -> None:
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await _first_round(client, "raced")
        key = _only_form(first)
        await _answer_staging(up, key)  # another surface is first
        late = await client.session.call_tool(
            DEPLOY,
            {"artifact": "raced"},
            input_responses={key: ElicitResult(action="accept", content=PRODUCTION)},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(late, CallToolResult)
    assert _text(late) == "Deployed raced to staging."  # the client's production answer changed nothing
    assert not await _pending(up)


async def test_a_tampered_request_state_is_invalid_params_naming_invalid_request_state(up: Up) -> None:
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await _first_round(client, "tampered")
        key = _only_form(first)
        state = first.request_state or ""
        payload, mac = state.split(".")
        forged = f"{payload}.{mac[:-2]}{'AA' if mac[-2:] != 'AA' else 'BB'}"
        with pytest.raises(MCPError) as raised:
            await client.session.call_tool(
                DEPLOY,
                {"artifact": "tampered"},
                input_responses={key: ElicitResult(action="accept", content=STAGING)},
                request_state=forged,
                allow_input_required=True,
            )
        assert raised.value.code == INVALID_PARAMS
        assert raised.value.error.data == {"reason": "invalid_request_state"}
        assert any(form["id"] == key for form in await _pending(up))  # the forged retry answered nothing
        await _answer_staging(up, key)
        done = await client.session.call_tool(
            DEPLOY, {"artifact": "tampered"}, request_state=state, allow_input_required=True
        )
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed tampered to staging."


async def test_a_legacy_client_whose_elicitation_is_outstanding_gets_the_result_of_maka_answer(up: Up) -> None:
    asked = asyncio.Event()
    release = asyncio.Event()

    async def slow(context: object, params: ElicitRequestParams) -> ElicitResult:
        asked.set()
        await release.wait()
        return ElicitResult(action="accept", content=PRODUCTION)

    async with owner_client(up, mode="legacy", elicitation_callback=slow) as client:
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": "legacy-raced"}))
        async with asyncio.timeout(60):
            await asyncio.shield(asked.wait())
        (form,) = await _pending(up)
        await _answer_staging(up, str(form["id"]))
        async with asyncio.timeout(60):
            result = await call
        release.set()
    assert _text(result) == "Deployed legacy-raced to staging."
    assert not await _pending(up)


async def test_a_modern_client_answer_that_does_not_fit_the_form_is_asked_again_naming_the_field_and_its_rule(
    up: Up,
) -> None:
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await _first_round(client, "refit")
        key = _only_form(first)
        again = await client.session.call_tool(
            DEPLOY,
            {"artifact": "refit"},
            input_responses={key: ElicitResult(action="accept", content={"environment": "moon", "confirm": True})},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(again, InputRequiredResult)
        assert again.input_requests is not None
        assert list(again.input_requests) == [key]
        asked = again.input_requests[key]
        assert isinstance(asked, ElicitRequest)
        assert first.input_requests is not None
        first_asked = first.input_requests[key]
        assert isinstance(first_asked, ElicitRequest)
        assert asked.params.message == f"{ASK_AGAIN}\n{MISFIT_RULE}\n\n{first_asked.params.message}"
        assert "moon" not in asked.params.message
        assert any(form["id"] == key for form in await _pending(up))  # the misfit answered nothing
        done = await client.session.call_tool(
            DEPLOY,
            {"artifact": "refit"},
            input_responses={key: ElicitResult(action="accept", content=STAGING)},
            request_state=again.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed refit to staging."


async def test_a_modern_retry_within_the_grace_finds_its_call_after_the_stream_closed_while_it_ran(
    up: Up, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    arguments = {"gate": str(gate)}
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await client.session.call_tool(GATED, arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert first.input_requests is not None
        (key,) = first.input_requests
        forms = {str(form["id"]): form for form in await _pending(up)}
        assert forms[key]["session"] == "default.owner"  # a modern client's session: its principal's
        # The retry answers; the call then runs on (at the gate) while this stream is open: drop it there.
        retry = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": GATED,
                "arguments": arguments,
                "inputResponses": {key: {"action": "accept", "content": {"go": True}}},
                "requestState": first.request_state,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                    "progressToken": "p7",
                },
            },
        }
        headers = {
            **up.auth,
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": GATED,
        }
        async with (
            httpx.AsyncClient(timeout=60) as http,
            http.stream("POST", up.endpoints.mcp, json=retry, headers=headers) as response,
        ):
            assert response.status_code == 200
            async with asyncio.timeout(60):
                async for line in response.aiter_lines():
                    if "waiting at the gate" in line:
                        break  # the call runs at the gate: close the stream mid-call
        # The client comes back with its requestState within the grace: the same call, not a new one.
        again = asyncio.ensure_future(
            client.session.call_tool(GATED, arguments, request_state=first.request_state, allow_input_required=True)
        )
        await asyncio.to_thread(gate.write_text, "open\n")  # blocks until the Tool reads the gate
        async with asyncio.timeout(60):
            done = await again
    assert isinstance(done, CallToolResult)
    assert _text(done) == "gated: accept"


async def test_a_legacy_client_resuming_its_closed_stream_within_the_grace_gets_the_calls_result(up: Up) -> None:
    headers = {**up.auth, "accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": DEPLOY, "arguments": {"artifact": "resumed"}, "_meta": {"progressToken": "p"}},
    }
    async with httpx.AsyncClient(timeout=60) as http:
        opened = await http.post(up.endpoints.mcp, json=initialize, headers=headers)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(
            up.endpoints.mcp, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        last_event_id, interaction_id = "", ""
        async with http.stream("POST", up.endpoints.mcp, json=call, headers=session) as response:
            async with asyncio.timeout(60):
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        last_event_id = line.removeprefix("id:").strip()
                    found = FORM_ID.search(line)
                    if found:
                        interaction_id = found.group(1)
                        break  # a form waits: the stream closes (as a proxy cutting it would)
        assert last_event_id
        assert interaction_id
        resume = {**session, "accept": "text/event-stream", "last-event-id": last_event_id}
        async with http.stream("GET", up.endpoints.mcp, headers=resume) as resumed:
            assert resumed.status_code == 200
            await _answer_staging(up, interaction_id)  # the call still runs: its form is answerable
            async with asyncio.timeout(60):
                async for line in resumed.aiter_lines():
                    if "Deployed resumed to staging." in line:
                        break
                else:
                    pytest.fail("the resumed stream ended without the call's result")


async def test_another_session_cannot_resume_a_legacy_clients_stream(up: Up) -> None:
    headers = {**up.auth, "accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": DEPLOY, "arguments": {"artifact": "not-yours"}, "_meta": {"progressToken": "p"}},
    }
    async with httpx.AsyncClient(timeout=60) as http:
        sessions = []
        for _ in range(2):
            opened = await http.post(up.endpoints.mcp, json=initialize, headers=headers)
            sessions.append(
                {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            )
        last_event_id = ""
        async with http.stream("POST", up.endpoints.mcp, json=call, headers=sessions[0]) as response:
            async with asyncio.timeout(60):
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        last_event_id = line.removeprefix("id:").strip()
                    if "Choose the deployment target" in line:
                        break
        assert last_event_id
        thief = {**sessions[1], "accept": "text/event-stream", "last-event-id": last_event_id}
        async with http.stream("GET", up.endpoints.mcp, headers=thief) as stolen:
            body = b""
            async with asyncio.timeout(30):
                async for chunk in stolen.aiter_bytes():
                    body += chunk
        assert b"Choose the deployment target" not in body
        assert b"not-yours" not in body
        # nobody resumed the first session's stream: its call is stopped past the grace
        await eventually(lambda: _nothing_pending(up), timeout=30 + GRACE_SECONDS, interval=0.2, what="no pending form")


MISFIT = {"environment": "moon", "confirm": True}
"""An answer the example's deploy form refuses (``moon`` is not one of its environments)."""
MISFIT_RULE = "/environment: must be one of the declared options"
"""What a re-ask says of :data:`MISFIT` (the field and the rule, never the value)."""


async def test_a_legacy_client_answer_that_does_not_fit_is_asked_again_naming_the_field_and_rule_then_deploys(
    up: Up,
) -> None:
    messages: list[str] = []

    async def misfit_then_staging(context: object, params: ElicitRequestParams) -> ElicitResult:
        messages.append(params.message)
        return ElicitResult(action="accept", content=MISFIT if len(messages) == 1 else STAGING)

    async with owner_client(up, mode="legacy", elicitation_callback=misfit_then_staging) as client:
        async with asyncio.timeout(60):
            result = await client.call_tool(DEPLOY, {"artifact": "legacy-refit"})
    assert _text(result) == "Deployed legacy-refit to staging."
    assert len(messages) == 2
    assert messages[0].startswith("Choose the deployment target")
    assert messages[1] == f"{ASK_AGAIN}\n{MISFIT_RULE}\n\n{messages[0]}"  # the field and its rule
    assert "moon" not in messages[1]  # the values that did not fit are never echoed
    assert not await _pending(up)


async def test_a_legacy_client_whose_answers_never_fit_is_asked_a_bounded_number_of_times_and_the_form_stays(
    up: Up,
) -> None:
    asks = 0
    log = up.state_dir.parent / "up.log"

    async def always_misfit(context: object, params: ElicitRequestParams) -> ElicitResult:
        nonlocal asks
        asks += 1
        return ElicitResult(action="accept", content=MISFIT)

    async with owner_client(up, mode="legacy", elicitation_callback=always_misfit) as client:
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": "legacy-misfit"}))
        await eventually(lambda: "mcp.elicit_gave_up" in log.read_text(), timeout=60, what="the door stops asking")
        (form,) = await _pending(up)  # the form stays for the other surfaces
        await _answer_staging(up, str(form["id"]))
        async with asyncio.timeout(60):
            result = await call
    assert _text(result) == "Deployed legacy-misfit to staging."
    assert asks == LEGACY_ASKS
    assert "moon" not in log.read_text()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_server_info_reports_the_installed_package_version_at_both_eras(up: Up, mode: str) -> None:
    async with owner_client(up, mode=mode) as client:
        info = client.server_info
    assert info is not None
    assert (info.name, info.version) == ("maka", importlib.metadata.version("maka-runtime"))


@pytest.mark.parametrize("path", ["/", "/sse"])
async def test_an_unknown_path_is_404_naming_the_mcp_endpoint(up: Up, path: str) -> None:
    base = up.endpoints.mcp.removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(base + path, headers=up.auth)
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "error_description": "the MCP endpoint is /mcp (Streamable HTTP)"}
