"""A rolling restart of a Host drains: broker and provider get SIGTERM together (one pod's containers),
new calls are refused ``HOST_UNAVAILABLE`` while the call in flight — and its form — finish, then both
start again and serve (docs/design.md#scale-out). Without a drain the same call would end ``lost``; with
``MAKA_DRAIN_SECONDS=auto`` the broker drains until the work is done, within a budget derived from its settings.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from services.core.healthcheck import serving
from stack.topology import Stack
from tests.helpers.stack import RunningStack, answer, call_tool, result_text, running_stack, wait_for_pending
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

DEPLOY_ANSWER = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}


NEW_CALLS = "maka.broker.v1.CapabilityBrokerService"
"""The broker's named health service: "takes new calls" (``""``, liveness, stays SERVING while it drains)."""


async def _not_serving(target: str, timeout: float = 30.0) -> None:
    async def stopped_serving() -> bool:
        return not await serving(target, NEW_CALLS, timeout=1.0)

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
        assert await serving(endpoints.broker, "", timeout=5), "a draining broker is still live"
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


# A planned stop drains until the work is done: the broker's ``auto`` budget is derived from its form wait
# (20 s here), one provider leg (10 s) and grace (2 s), so 32 s bound the drain, while the call and its form
# finish in a few. A numeric drain of OLD_DRAIN_SECONDS (today's meaning) would have closed the form before
# it is answered here.
UNTIL_DONE = {
    Stack.BROKER: {
        "MAKA_DRAIN_SECONDS": "auto",
        "MAKA_FORM_WAIT_SECONDS": "20",
        "MAKA_EXECUTION_TIMEOUT_SECONDS": "10",
        "MAKA_GRACE_SECONDS": "2",
    },
    Stack.PROVIDER: {"MAKA_DRAIN_SECONDS": "32"},
}
OLD_DRAIN_SECONDS = 2.0


async def test_a_draining_broker_keeps_the_pending_form_answerable_until_it_is_answered_then_exits_on_its_own(
    tmp_path: Path,
) -> None:
    async with running_stack(tmp_path, child_env=UNTIL_DONE, stop_grace=90) as running:
        endpoints = running.endpoints
        call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-11"}))
        form = await wait_for_pending(endpoints.interaction, timeout=60)
        loop = asyncio.get_running_loop()

        sigterm_at = loop.time()
        restart = asyncio.create_task(running.stack.restart_host())
        await _not_serving(endpoints.broker)
        refused = await call_tool(endpoints.broker, "examples:ping", {}, tool_use_id="use-while-draining", timeout=30)
        assert refused[-1].WhichOneof("event") == "failure", refused[-1]
        assert refused[-1].failure.code == broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE

        # The person answers later than a numeric drain of OLD_DRAIN_SECONDS would have waited: the passing
        # of that time is what this test is about, not a synchronisation.
        await asyncio.sleep(max(0.0, sigterm_at + OLD_DRAIN_SECONDS + 1.0 - loop.time()))
        assert not call.done(), "the call in flight outlived the drain a number would have given it"
        await answer(endpoints.interaction, form, form_pb2.ACTION_ACCEPT, DEPLOY_ANSWER)
        events = await asyncio.wait_for(call, 60)
        assert result_text(events) == "Deployed build-11 to staging."

        await asyncio.wait_for(restart, 120)
        stopped = next(e for e in running.stack.history if e.kind == "stopped" and e.name == Stack.BROKER)
        assert stopped.code == 0, "the broker exited on its own once its call was done, not killed"
        drained = [json.loads(line) for line in running.lines["broker"] if '"broker_drained"' in line]
        assert [(d["finished"], d["live_invocations"]) for d in drained] == [(1, 0)]


# ``maka up`` passes its environment to every child, as a Host pod's containers share the manifest's values:
# ``MAKA_DRAIN_SECONDS=auto`` reaches the provider and the MCP front door as well as the broker, and each
# derives the broker's budget from the same variables (20 s form wait + 10 s leg + 2 s grace = 32 s).
AUTO_FOR_EVERY_CHILD = {
    "MAKA_DRAIN_SECONDS": "auto",
    "MAKA_FORM_WAIT_SECONDS": "20",
    "MAKA_EXECUTION_TIMEOUT_SECONDS": "10",
    "MAKA_GRACE_SECONDS": "2",
}


def _logged(running: RunningStack, child: str, event: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in running.lines[child] if f'"{event}"' in line]


async def test_auto_drain_for_every_child_starts_the_stack_and_the_provider_keeps_the_call_in_flight_until_it_is_done(
    tmp_path: Path,
) -> None:
    async with running_stack(tmp_path, extra_env=AUTO_FOR_EVERY_CHILD, stop_grace=90) as running:
        endpoints = running.endpoints
        call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-12"}))
        form = await wait_for_pending(endpoints.interaction, timeout=60)

        restart = asyncio.create_task(running.stack.restart_host())
        draining = await eventually(
            lambda: _logged(running, Stack.PROVIDER, "provider_draining") or None,
            timeout=30,
            what="the provider draining",
        )
        assert [(d["live_calls"], d["drain_seconds"]) for d in draining] == [(1, 32.0)]
        assert not call.done(), "the call in flight was not cut by the restart"

        await answer(endpoints.interaction, form, form_pb2.ACTION_ACCEPT, DEPLOY_ANSWER)
        events = await asyncio.wait_for(call, 60)
        assert result_text(events) == "Deployed build-12 to staging."

        await asyncio.wait_for(restart, 120)
        stopped = next(e for e in running.stack.history if e.kind == "stopped" and e.name == Stack.PROVIDER)
        assert stopped.code == 0, "the provider exited on its own once its call was done, not killed"
        drained = _logged(running, Stack.PROVIDER, "provider_drained")
        assert [(d["finished"], d["live_calls"]) for d in drained] == [(1, 0)]
        assert await running.stack.wait_for_tools() == set()
        after = await call_tool(endpoints.broker, "examples:ping", {}, tool_use_id="use-after-auto", timeout=60)
        assert after[-1].WhichOneof("event") == "result", after[-1]
