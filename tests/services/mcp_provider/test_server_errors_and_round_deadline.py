"""How the provider treats a server's errors, its result types and a round's deadline
(docs/acceptance.md#protocol-and-form-correctness), against the real SDK fixture servers.

- Server-defined JSON-RPC codes (-32000..-32099) are server errors: the server's message travels in the
  failure and neither the connection nor another call on it is touched (only a real transport closure, as
  the SDK reports it, marks the connection broken); a long message is cut to a bound.
- A result whose ``resultType`` is not ``complete`` (nor a valid ``input_required``) is invalid: the call
  fails with a stable code and no retry is sent (MCP 2026-07-28 ``basic/index`` §ResultType).
- A round that runs out before its next form fails ``round_expired`` without asking that form.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from services.core.form import Action, Answer, Form
from services.mcp_provider.errors import CallErrorCode, McpToolCallError
from services.mcp_provider.manager import RoundSlot, current_round
from tests.helpers.mcp_servers import LOW_SERVERS, serve_mcp
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("server", LOW_SERVERS)
@pytest.mark.parametrize("code", [-32000, -32001, -32099])
async def test_a_server_defined_error_code_is_a_server_error_with_its_message_and_leaves_other_calls_alone(
    tmp_path: Path, server: tuple[str, str], code: int
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        connection = served.connection
        generation, connects = connection.generation, connection.connects
        form_open = asyncio.Event()
        release = asyncio.Event()

        async def slow_answer(form: Form) -> Answer:
            form_open.set()
            await release.wait()
            return Answer(Action.ACCEPT, {"name": "Ada"})

        pending = asyncio.create_task(served.manager.call_tool("fx", "ask", {}, form_handler=slow_answer))
        async with asyncio.timeout(30):
            await form_open.wait()

        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool(
                "fx", "server_error", {"code": code, "message": "quota\x07 exceeded\n  for team infra"}
            )

        assert caught.value.code is CallErrorCode.SERVER_ERROR
        assert caught.value.mcp_error_code == code
        assert caught.value.message == f"MCP error {code}: quota exceeded for team infra"
        assert connection.connected
        assert connection.generation == generation
        assert connection.connects == connects
        release.set()
        async with asyncio.timeout(30):
            outcome = await pending
        assert outcome.retries == 1
        assert connection.generation == generation
        assert connection.connects == connects


async def test_a_long_server_error_message_is_cut_to_a_bound(tmp_path: Path) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "server_error", {"code": -32000, "message": "x" * 5000})
        assert caught.value.code is CallErrorCode.SERVER_ERROR
        assert len(caught.value.message) < 400
        assert caught.value.message.endswith("…")


@pytest.mark.parametrize("result_type", ["task", "foo", "input_required"])
async def test_an_unrecognised_result_type_fails_with_a_stable_code_and_no_retry(
    tmp_path: Path, result_type: str
) -> None:
    async with serve_mcp(tmp_path) as served:
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "odd_result", {"result_type": result_type})

        assert caught.value.code is CallErrorCode.INVALID_RESULT
        assert result_type in caught.value.message or "input_required" in caught.value.message
        sent = served.wire.tool_calls("odd_result")
        assert len(sent) == 1
        [response] = [m for d, m in served.wire.messages() if d == "S->C" and m.get("id") == sent[0]["id"]]
        assert response["result"]["resultType"] == result_type
        await eventually(lambda: served.connection.connected)


async def test_a_round_that_runs_out_before_its_next_form_fails_round_expired_without_asking_it(
    tmp_path: Path,
) -> None:
    async with serve_mcp(tmp_path) as served:
        ttl = 1.0
        served.connection.config = dataclasses.replace(served.connection.config, request_state_ttl_seconds=ttl)
        slots: list[RoundSlot | None] = []

        async def answer_too_late(form: Form) -> Answer:
            slot = current_round()
            slots.append(slot)
            assert slot is not None
            assert slot.deadline is not None
            await asyncio.sleep(max(0.0, slot.deadline - time.time()) + 0.05)  # the user takes longer than the round
            return Answer(Action.ACCEPT, {"ok": True})

        before = time.time()
        with pytest.raises(McpToolCallError) as caught:
            await served.manager.call_tool("fx", "ask_round", {"n": 2}, form_handler=answer_too_late)

        assert caught.value.code is CallErrorCode.ROUND_EXPIRED
        assert "form 2 of 2" in caught.value.message
        [slot] = slots  # the second form was never asked
        assert slot is not None
        assert (slot.position, slot.size) == (1, 2)
        assert slot.deadline is not None
        assert before + ttl <= slot.deadline <= time.time()
        assert len(served.wire.tool_calls("ask_round")) == 1  # no retry
