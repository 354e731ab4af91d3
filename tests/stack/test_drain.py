"""A rolling restart of a Host drains: broker and provider get SIGTERM together (one pod's containers),
new calls are refused ``HOST_UNAVAILABLE`` while the call in flight — and its form — finish, then both
start again and serve (docs/design.md#scale-out). Without a drain the same call would end ``lost``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from services.core.healthcheck import serving
from tests.helpers.stack import answer, call_tool, result_text, running_stack, wait_for_pending
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

DEPLOY_ANSWER = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}


async def _not_serving(target: str, timeout: float = 30.0) -> None:
    async def stopped_serving() -> bool:
        return not await serving(target, timeout=1.0)

    await eventually(stopped_serving, timeout=timeout, interval=0.05, what=f"{target} not serving")


async def test_a_rolling_restart_lets_the_call_in_flight_and_its_form_finish_and_refuses_new_calls(
    tmp_path: Path,
) -> None:
    drain = {"MAKA_DRAIN_SECONDS": "60"}
    async with running_stack(tmp_path, extra_env=drain, stop_grace=90) as running:
        endpoints = running.endpoints
        call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-9"}))
        form = await wait_for_pending(endpoints.interaction, timeout=60)

        restart = asyncio.create_task(running.stack.restart_host())
        await _not_serving(endpoints.broker)  # draining: out of rotation, still finishing its calls
        refused = await call_tool(endpoints.broker, "examples:ping", {}, tool_use_id="use-during-drain", timeout=30)
        assert refused[-1].WhichOneof("event") == "failure", refused[-1]
        assert refused[-1].failure.code == broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
        assert "draining" in refused[-1].failure.message
        assert not call.done(), "the call in flight was not cut by the restart"

        await answer(endpoints.interaction, form, form_pb2.ACTION_ACCEPT, DEPLOY_ANSWER)
        events = await asyncio.wait_for(call, 60)
        assert result_text(events) == "Deployed build-9 to staging."

        await asyncio.wait_for(restart, 120)
        assert await serving(endpoints.broker, "", timeout=5)
        assert await running.stack.wait_for_tools() == set()
        after = await call_tool(endpoints.broker, "examples:ping", {}, tool_use_id="use-after", timeout=60)
        assert after[-1].WhichOneof("event") == "result", after[-1]
        broker_log = running.log("broker")
        assert '"broker_drained"' in broker_log


async def test_without_a_drain_the_restarted_hosts_call_in_flight_ends_lost(tmp_path: Path) -> None:
    async with running_stack(tmp_path) as running:
        endpoints = running.endpoints
        call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-10"}))
        await wait_for_pending(endpoints.interaction, timeout=60)
        await asyncio.wait_for(running.stack.restart_host(), 120)
        events = await asyncio.wait_for(call, 60)
    assert events[-1].WhichOneof("event") == "lost", events[-1]
