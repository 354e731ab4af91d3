"""McpConnection: eras, generations, Tool refresh, reconnect, and the fences the manager relies on."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from services.core.form import Action, Answer, Form
from services.mcp_provider.config import Era, HttpServer, ServerConfig, StdioServer
from services.mcp_provider.connection import McpConnection, normalize_result, reject_unknown_input_requests
from services.mcp_provider.errors import CallErrorCode, McpToolCallError
from services.mcp_provider.manager import McpClientManager
from services.mcp_provider.stop import Stop
from tests.helpers.mcp_servers import ROOT, ScriptedForms, accept, serve_mcp
from tests.helpers.waiting import eventually

MODERN_META = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}


def test_absent_result_type_on_a_modern_result_reads_as_complete() -> None:
    assert normalize_result(MODERN_META, {"content": []}) == {"content": [], "resultType": "complete"}


def test_present_result_type_and_legacy_results_are_left_alone() -> None:
    raw: dict[str, Any] = {"resultType": "input_required", "requestState": "x"}
    assert normalize_result(MODERN_META, raw) is raw
    legacy: dict[str, Any] = {"content": []}
    assert normalize_result({"name": "t"}, legacy) is legacy
    assert normalize_result(None, legacy) is legacy


@pytest.mark.parametrize(
    ("method", "code"),
    [
        ("tools/call", CallErrorCode.UNSUPPORTED_INPUT_REQUEST),
        ("prompts/get", CallErrorCode.UNSUPPORTED_METHOD),
        ("resources/read", CallErrorCode.UNSUPPORTED_METHOD),
    ],
)
@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param({"method": "custom/unknown"}, id="unknown-method"),
        pytest.param({"method": "elicitation/create", "params": {"mode": "telepathy"}}, id="unknown-mode"),
    ],
)
def test_unknown_embedded_input_request_fails_with_the_methods_stable_code(
    method: str, code: CallErrorCode, request_body: dict[str, Any]
) -> None:
    raw = {"resultType": "input_required", "inputRequests": {"k": request_body}}

    with pytest.raises(McpToolCallError) as caught:
        reject_unknown_input_requests(method, raw)

    assert caught.value.code is code


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read", "tools/list"])
def test_known_input_requests_and_other_methods_pass_the_unknown_method_check(method: str) -> None:
    known = {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}
    unknown_elsewhere = {"resultType": "input_required", "inputRequests": {"k": {"method": "custom/unknown"}}}

    reject_unknown_input_requests(method, known)
    if method == "tools/list":
        reject_unknown_input_requests(method, unknown_elsewhere)


@pytest.mark.slow
@pytest.mark.parametrize("era", [Era.AUTO, Era.MODERN, Era.LEGACY])
async def test_each_era_setting_negotiates_its_protocol_version(era: Era, tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high", era=era) as served:
        outcome = await served.manager.call_tool("fx", "echo", {"text": "x"})

        expected = "2025-11-25" if era is Era.LEGACY else "2026-07-28"
        assert served.connection.protocol_version == expected
        assert served.connection.modern is (era is not Era.LEGACY)
        assert outcome.result["isError"] is False
        assert {t.name for t in served.connection.snapshot().tools} >= {"echo", "ask", "mutate"}


@pytest.mark.slow
async def test_tools_list_changed_refreshes_the_tool_and_a_pending_call_fails_binding_changed_without_retry(
    tmp_path: Path,
) -> None:
    async with serve_mcp(tmp_path, kind="high") as served:
        connection = served.connection
        before = connection.binding("ask")
        generation = connection.generation

        async def change_tool_while_form_is_open(form: Form) -> Answer:
            await served.manager.call_tool("fx", "mutate", {"description": "changed"})
            await eventually(lambda: connection.binding("ask").tool_generation != before.tool_generation)
            return Answer(Action.ACCEPT, {"name": "Ada"})

        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "ask", {}, form_handler=change_tool_while_form_is_open)

        assert caught.value.code is CallErrorCode.BINDING_CHANGED
        assert len(served.wire.tool_calls("ask")) == 1
        assert connection.generation == generation
        [ask] = [t for t in connection.snapshot().tools if t.name == "ask"]
        assert ask.description == "changed"


@pytest.mark.slow
async def test_legacy_tools_list_changed_notification_refreshes_the_listing(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high", era=Era.LEGACY) as served:
        before = served.connection.binding("ask")
        await served.manager.call_tool("fx", "mutate", {"description": "legacy change"})

        await eventually(lambda: served.connection.binding("ask").tool_generation != before.tool_generation)
        with pytest.raises(McpToolCallError) as caught:
            served.connection.check_binding(before)
        assert caught.value.code is CallErrorCode.BINDING_CHANGED


@pytest.mark.slow
async def test_server_exit_mid_call_is_connection_lost_and_reconnects_with_a_new_generation(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        connection = served.connection
        old = connection.binding("ask")

        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "crash", {})

        assert caught.value.code is CallErrorCode.CONNECTION_LOST
        await eventually(lambda: connection.connected and connection.generation == old.connection_generation + 1)
        with pytest.raises(McpToolCallError) as stale:
            connection.check_binding(old)
        assert stale.value.code is CallErrorCode.CONNECTION_LOST
        outcome = await served.manager.call_tool("fx", "echo", {"after": "reconnect"})
        assert json.loads(outcome.result["content"][0]["text"])["arguments"] == {"after": "reconnect"}


@pytest.mark.slow
async def test_reconnect_while_a_form_is_open_sends_no_answer_to_the_new_connection(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        connection = served.connection

        async def reconnect_then_answer(form: Form) -> Answer:
            generation = connection.generation
            connection.mark_broken()
            await eventually(lambda: connection.connected and connection.generation == generation + 1)
            return Answer(Action.ACCEPT, {"name": "Ada"})

        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "ask", {}, form_handler=reconnect_then_answer)

        assert caught.value.code is CallErrorCode.CONNECTION_LOST
        retries = [c for c in served.wire.tool_calls("ask") if "inputResponses" in c["params"]]
        assert retries == []


@pytest.mark.slow
async def test_http_server_gone_is_connection_lost_not_a_crash(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, transport="http") as served:
        assert served.process is not None
        served.process.terminate()
        await served.process.wait()

        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "echo", {})

        assert caught.value.code is CallErrorCode.CONNECTION_LOST
        await eventually(lambda: not served.connection.connected, what="connection marked lost")


@pytest.mark.slow
async def test_progress_notifications_reach_the_progress_handler(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high") as served:
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        await served.manager.call_tool("fx", "progress", {}, progress=progress)

        assert seen == [(0.5, 1.0, "half way")]


@pytest.mark.slow
async def test_stop_cancels_the_in_flight_request_on_the_wire(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high") as served:
        stop = Stop()
        call = asyncio.create_task(served.manager.call_tool("fx", "slow", {}, stop=stop))
        await eventually(lambda: bool(served.wire.tool_calls("slow")), what="slow call sent")
        stop.set()
        with pytest.raises(McpToolCallError) as caught:
            async with asyncio.timeout(10):
                await call

        assert caught.value.code is CallErrorCode.STOPPED
        [sent] = served.wire.tool_calls("slow")
        await eventually(
            lambda: any(
                m["params"]["requestId"] == sent["id"] for m in served.wire.requests("notifications/cancelled")
            ),
            what="notifications/cancelled",
        )


@pytest.mark.slow
async def test_a_call_to_an_unlisted_tool_is_unknown_tool(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "nope", {}, form_handler=ScriptedForms(accept()))
        with pytest.raises(McpToolCallError) as unknown_server:
            await served.manager.call_tool("other", "ask", {})

        assert caught.value.code is CallErrorCode.UNKNOWN_TOOL
        assert unknown_server.value.code is CallErrorCode.UNKNOWN_TOOL
        assert served.wire.tool_calls() == []


@pytest.mark.slow
async def test_configured_http_headers_are_sent_on_every_request(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, transport="http", headers={"X-Maka-Key": "k-1"}) as served:
        await served.manager.call_tool("fx", "echo", {})

        headers = [json.loads(body) for direction, body in served.wire.lines() if direction == "HDR"]
        assert headers
        assert all(h.get("x-maka-key") == "k-1" for h in headers)


@pytest.mark.slow
async def test_http_server_gone_between_calls_is_noticed_through_the_listen_stream(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high", transport="http") as served:
        assert served.process is not None
        await eventually(lambda: bool(served.wire.requests("subscriptions/listen")), what="listen stream opened")
        served.process.kill()  # uvicorn's graceful SIGTERM would wait for the open listen stream
        await served.process.wait()

        await eventually(lambda: not served.connection.connected, what="connection marked lost", timeout=30)


@pytest.mark.slow
async def test_legacy_push_elicitation_is_rejected_and_never_reaches_the_form_handler(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind="high", era=Era.LEGACY) as served:
        forms = ScriptedForms(accept(name="Ada"))
        failure: McpToolCallError | None = None
        result: dict[str, Any] = {}
        try:
            result = (await served.manager.call_tool("fx", "push_elicit", {}, form_handler=forms)).result
        except McpToolCallError as error:
            failure = error

        assert result.get("isError") is True or (failure is not None and failure.code is CallErrorCode.SERVER_ERROR)
        assert forms.forms == []
        [push] = [m for d, m in served.wire.messages() if d == "S->C" and m.get("method") == "elicitation/create"]
        replies = [
            m for d, m in served.wire.messages() if d == "C->S" and m.get("id") == push["id"] and "method" not in m
        ]
        assert [("error" in m) for m in replies] == [True]


@pytest.mark.slow
async def test_a_non_utf8_byte_on_stdout_ends_the_call_lost_with_the_cause_and_the_server_reconnects(
    tmp_path: Path,
) -> None:
    config = ServerConfig(
        "garbled",
        StdioServer(sys.executable, ("-m", "tests.fixtures.mcp_servers.garbling_server"), {}, str(ROOT)),
        Era.AUTO,
    )
    connection = McpConnection(config, reconnect_initial_seconds=0.05, reconnect_max_seconds=0.5)
    manager = McpClientManager(pacing_initial_ms=5, pacing_max_ms=20)
    manager.add(connection)
    await connection.start()
    try:
        await connection.wait_connected(timeout=30)
        first = connection.generation

        with pytest.raises(McpToolCallError) as caught:
            async with asyncio.timeout(30):
                await manager.call_tool("garbled", "garble", {})

        assert caught.value.code is CallErrorCode.CONNECTION_LOST
        assert "not UTF-8" in str(caught.value)
        assert "0xff" in str(caught.value)
        await eventually(lambda: connection.health().last_error is not None, what="the recorded cause")
        last_error = connection.health().last_error
        assert last_error is not None
        assert "not UTF-8" in last_error.summary
        await eventually(lambda: connection.connected and connection.generation > first, what="the reconnect")
        outcome = await manager.call_tool("garbled", "echo", {"after": "garble"})
        assert json.loads(outcome.result["content"][0]["text"]) == {"after": "garble"}
    finally:
        await connection.close()


async def test_a_missing_command_and_an_unreachable_url_are_named_in_the_cause(tmp_path: Path) -> None:
    missing = ServerConfig("gone", StdioServer("no-such-mcp-server-binary", (), {}, str(tmp_path)), Era.AUTO)
    unreachable = ServerConfig("away", HttpServer("http://127.0.0.1:9/mcp?key=k3y-secret", {}), Era.AUTO)
    connections = [
        McpConnection(c, reconnect_initial_seconds=5, reconnect_max_seconds=5) for c in (missing, unreachable)
    ]
    for connection in connections:
        await connection.start()
    try:
        await eventually(lambda: all(c.health().last_error is not None for c in connections), what="both causes")
        gone, away = (c.health().last_error for c in connections)
        assert gone is not None
        assert away is not None
        assert gone.summary.startswith("command 'no-such-mcp-server-binary': ")
        assert away.summary.startswith("URL http://127.0.0.1:9/mcp?***: ")
        assert "k3y-secret" not in away.summary
    finally:
        for connection in connections:
            await connection.close()
