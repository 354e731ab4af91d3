"""Edges of the MCP front door found by review, through real processes (``maka up`` with the example server, the
official SDK ``Client``): a ``requestState``'s lifetime under overlapping retries, an answer over the tier's cap,
unknown Tool names, a 2025-11-25 client leaving while its ``elicitation/create`` is outstanding (nothing logged at
ERROR: surfaces/mcp/guards.py), a broker killed while an attached call's form waits, the request body cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
)

from services.core.limits import DEFAULT_LIMITS, MAX_MCP_REQUEST_BODY_BYTES
from stack.state_dir import read_endpoints
from tests.helpers.cli import maka
from tests.helpers.waiting import eventually
from tests.surfaces.mcp.stack import Up, maka_up, owner_client

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

DEPLOY = "examples.deploy"
TTL_SECONDS = 6
"""The stack's ``requestState`` lifetime (``MAKA_MCP_STATE_TTL_SECONDS``): short, so a test can outlive one."""
STAGING = {"environment": "staging", "confirm": True}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    env = {"MAKA_MCP_STATE_TTL_SECONDS": str(TTL_SECONDS)}
    async with maka_up(tmp_path_factory.mktemp("front-door-edges"), env=env) as running:
        yield running


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _form_key(result: object) -> str:
    assert isinstance(result, InputRequiredResult), result
    assert result.input_requests is not None
    ((key, _request),) = result.input_requests.items()
    return key


async def _pending(up: Up) -> list[dict[str, object]]:
    ran = await maka("pending", "--json", state_dir=up.state_dir)
    assert ran.code == 0, ran.err
    forms: list[dict[str, object]] = json.loads(ran.out)
    return forms


async def _nothing_pending(up: Up) -> bool:
    return not await _pending(up)


async def _staging(context: object, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content=STAGING)


async def test_overlapping_retries_do_not_stop_the_call_before_the_newest_request_state_expires(up: Up) -> None:
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await client.session.call_tool(DEPLOY, {"artifact": "overlap"}, allow_input_required=True)
        key = _form_key(first)
        assert isinstance(first, InputRequiredResult)

        async def retry(state: str | None) -> InputRequiredResult:
            again = await client.session.call_tool(
                DEPLOY, {"artifact": "overlap"}, request_state=state, allow_input_required=True
            )
            assert isinstance(again, InputRequiredResult), again
            return again

        # two retries of round 1 at once (no answers): each is asked the form again
        overlapping = await asyncio.gather(retry(first.request_state), retry(first.request_state))
        asked_at = time.monotonic()
        assert [_form_key(r) for r in overlapping] == [key, key]
        # a later round, well inside the lifetime; its state outlives the overlapping rounds' by TTL / 2
        await asyncio.sleep(TTL_SECONDS / 2)  # deliberate time passage (not synchronisation)
        later = await retry(overlapping[0].request_state)
        # past the overlapping rounds' lifetime, inside the later round's
        await asyncio.sleep(max(0.0, asked_at + TTL_SECONDS + 0.5 - time.monotonic()))  # deliberate time passage
        done = await client.session.call_tool(
            DEPLOY,
            {"artifact": "overlap"},
            input_responses={key: ElicitResult(action="accept", content=STAGING)},
            request_state=later.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed overlap to staging."


async def test_a_modern_answer_larger_than_the_tiers_cap_is_asked_again(up: Up) -> None:
    big = {**STAGING, "note": "n" * (DEFAULT_LIMITS.max_answer_bytes + 1)}
    async with owner_client(up, elicitation_callback=_staging) as client:
        first = await client.session.call_tool(DEPLOY, {"artifact": "big"}, allow_input_required=True)
        key = _form_key(first)
        assert isinstance(first, InputRequiredResult)
        again = await client.session.call_tool(
            DEPLOY,
            {"artifact": "big"},
            input_responses={key: ElicitResult(action="accept", content=big)},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert _form_key(again) == key
        assert any(form["id"] == key for form in await _pending(up))  # the oversized answer answered nothing
        assert isinstance(again, InputRequiredResult)
        assert again.input_requests is not None
        asked = again.input_requests[key]
        assert isinstance(asked, ElicitRequest)
        assert f"larger than {DEFAULT_LIMITS.max_answer_bytes} bytes" in asked.params.message  # says why
        done = await client.session.call_tool(
            DEPLOY,
            {"artifact": "big"},
            input_responses={key: ElicitResult(action="accept", content=STAGING)},
            request_state=again.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, CallToolResult)
    assert _text(done) == "Deployed big to staging."


async def test_a_legacy_answer_larger_than_the_tiers_cap_is_asked_again_and_the_second_deploys(up: Up) -> None:
    messages: list[str] = []
    big = {**STAGING, "note": "n" * (DEFAULT_LIMITS.max_answer_bytes + 1)}

    async def big_then_staging(context: object, params: ElicitRequestParams) -> ElicitResult:
        messages.append(params.message)
        return ElicitResult(action="accept", content=big if len(messages) == 1 else STAGING)

    async with owner_client(up, mode="legacy", elicitation_callback=big_then_staging) as client:
        async with asyncio.timeout(60):
            result = await client.call_tool(DEPLOY, {"artifact": "legacy-big"})
    assert _text(result) == "Deployed legacy-big to staging."
    assert len(messages) == 2
    assert messages[1].startswith("Your answer did not fit the form")
    assert f"larger than {DEFAULT_LIMITS.max_answer_bytes} bytes" in messages[1]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unknown_tool_error_says_how_front_door_tools_are_named_with_a_stable_reason(
    up: Up, mode: str
) -> None:
    async with owner_client(up, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("examples:deploy", {})
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.error.data == {"reason": "unknown_tool"}
    assert "Unknown tool: examples:deploy" in raised.value.error.message
    assert "SERVER.TOOL, e.g. examples.deploy" in raised.value.error.message


async def test_invalid_arguments_name_the_tool_by_its_mcp_name(up: Up) -> None:
    async with owner_client(up) as client:
        result = await client.call_tool(DEPLOY, {"artifact": 7})
    assert result.is_error
    assert _text(result).startswith("INVALID_ARGUMENTS: ")
    assert "examples.deploy" in _text(result)
    assert "examples:deploy" not in _text(result)


@pytest.mark.parametrize("how", ["cancel", "close"])
async def test_a_legacy_client_leaving_while_its_elicitation_is_outstanding_logs_no_error(up: Up, how: str) -> None:
    """``cancel``: the request is cancelled (``notifications/cancelled``), then the session closes; ``close``: the
    session closes (HTTP ``DELETE``) with the request still running."""
    log = up.state_dir.parent / "up.log"
    start = len(log.read_bytes())
    asked = asyncio.Event()

    async def never(context: object, params: ElicitRequestParams) -> ElicitResult:
        asked.set()
        await asyncio.Event().wait()  # the person never answers: the client leaves instead
        raise AssertionError("unreachable")

    async with owner_client(up, mode="legacy", elicitation_callback=never) as client:
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": f"legacy-{how}"}))
        async with asyncio.timeout(60):
            await asyncio.shield(asked.wait())
        if how == "cancel":
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await call
    await eventually(lambda: _nothing_pending(up), timeout=30, interval=0.2, what="no pending form")

    def records() -> list[dict[str, object]]:
        lines = log.read_bytes()[start:].decode(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    await eventually(
        lambda: any(r.get("event") == "mcp.call_stopped" for r in records()), timeout=30, what="the turn stopped"
    )
    errors = [r for r in records() if r.get("child") == "mcp" and r.get("level") in ("error", "critical")]
    assert errors == []


async def test_an_attached_call_whose_broker_is_killed_mid_form_is_lost(tmp_path: Path) -> None:
    async with maka_up(tmp_path) as fresh, owner_client(fresh) as client:  # no elicitation: the call stays attached
        call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": "killed"}))
        await eventually(lambda: _pending(fresh), timeout=60, interval=0.2, what="the form waits")
        os.kill(read_endpoints(fresh.state_dir).pids["broker"], signal.SIGKILL)
        async with asyncio.timeout(120):
            result = await call
    assert result.is_error
    assert _text(result).startswith("LOST: the broker no longer knows the call")
    assert _text(result).endswith("the outcome is unknown and nothing was replayed")


async def test_a_request_body_over_the_front_doors_cap_is_413_and_one_at_the_cap_is_read(up: Up) -> None:
    headers = {**up.auth, "content-type": "application/json", "accept": "application/json, text/event-stream"}
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    at_cap = ping + b" " * (MAX_MCP_REQUEST_BODY_BYTES - len(ping))
    async with httpx.AsyncClient(timeout=60) as http:
        over = await http.post(up.endpoints.mcp, content=at_cap + b" ", headers=headers)
        read = await http.post(up.endpoints.mcp, content=at_cap, headers=headers)
    assert over.status_code == 413
    assert read.status_code != 413
