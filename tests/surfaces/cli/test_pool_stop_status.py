"""``maka status --broker POOL`` and ``maka stop INVOCATION --broker POOL`` on a team's pool of Hosts through real
processes (``tests/helpers/pool.py``): while one Host drains (SIGTERM with a form pending), the status shows every
Host of the pool with the draining one marked, and stopping a call the draining Host owns stops it there: the
caller sees ``stopped``, nothing stays pending and the MCP server gets no retried ``tools/call``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2
from maka_client import Accepted, BrokerClient, CallEvent, Stopped
from tests.helpers.cli import maka
from tests.helpers.pool import HostPool, host_pool
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def _first(pool: HostPool, host_id: str) -> interaction_pb2.Interaction | None:
    forms = await pool.pending(host_id)
    return forms[0] if forms else None


async def test_status_shows_every_host_with_the_draining_one_marked_and_stop_ends_the_call_it_owns(
    tmp_path: Path,
) -> None:
    no_stack = tmp_path / "no-stack"
    async with host_pool(tmp_path, hosts=2) as pool, BrokerClient(pool.pool_target) as client:
        call = client.call_tool("examples:deploy", {"artifact": "build-26"}, tool_use_id="use-stopped")
        events: list[CallEvent] = []
        accepted = asyncio.Event()

        async def follow() -> None:
            async for event in call:
                events.append(event)
                if isinstance(event, Accepted):
                    accepted.set()

        follower = asyncio.create_task(follow())
        async with asyncio.timeout(60):
            await accepted.wait()
        owner = call.host_id
        [other] = [host for host in pool.host_ids if host != owner]
        await eventually(lambda: _first(pool, owner), timeout=60, what="the owned call's form")

        rollout = asyncio.create_task(pool.drain(owner))
        try:
            await pool.wait_not_taking_calls(owner)

            ran = await maka("status", "--broker", pool.pool_target, "--json", state_dir=no_stack)
            assert ran.code == 0, ran.err
            data = json.loads(ran.out)
            assert data["pool"] is True
            hosts = {host["hostId"]: host for host in data["hosts"]}
            assert set(hosts) == {owner, other}, "both Hosts, the draining one included"
            assert (hosts[owner]["address"], hosts[other]["address"]) == (pool.proxied(owner), pool.proxied(other))
            assert (hosts[owner]["state"], hosts[owner]["callsRunning"], hosts[owner]["pendingForms"]) == (
                "draining",
                1,
                1,
            )
            assert (hosts[other]["state"], hosts[other]["callsRunning"], hosts[other]["pendingForms"]) == (
                "serving",
                0,
                0,
            )

            human = await maka("status", "--broker", pool.pool_target, state_dir=no_stack)
            assert human.code == 0, human.err
            [owner_line] = [line for line in human.out.splitlines() if f" {owner} " in f" {line} "]
            assert "DRAINING" in owner_line
            assert "pending forms: 1" in owner_line
            [other_line] = [line for line in human.out.splitlines() if f" {other} " in f" {line} "]
            assert "serving" in other_line

            stopped = await maka("stop", call.invocation_id, "--broker", pool.pool_target, state_dir=no_stack)
            assert (stopped.code, stopped.out) == (0, f"stopped call {call.invocation_id}\n"), stopped.err
            async with asyncio.timeout(60):
                await follower
            assert isinstance(call.outcome, Stopped), events
            assert await pool.pending(owner) == [], "the stopped call's form closed"
            async with asyncio.timeout(120):
                await rollout  # nothing left to drain: the owner exited and started again
        finally:
            if not rollout.done():
                rollout.cancel()
                await asyncio.gather(rollout, return_exceptions=True)
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

        again = await maka("stop", call.invocation_id, "--broker", pool.pool_target, state_dir=no_stack)
        assert (again.code, again.out) == (0, f"call {call.invocation_id} is not running on the pool\n"), again.err
        provider_log = pool.log(f"{owner}-provider")
        assert call.invocation_id in provider_log, "the provider aborted the call it was asked to stop"
        assert "mcp_call_complete" not in provider_log, "no retried tools/call completed after the stop"
        assert '"broker_drained"' in pool.log(f"{owner}-broker")


async def test_status_of_a_pool_with_a_host_that_does_not_answer_names_it_and_exits_1(tmp_path: Path) -> None:
    async with host_pool(tmp_path, hosts=1) as pool:
        await pool.proxies["host-0"].close()
        dead = pool.proxied("host-0")
        live = pool.brokers["host-0"]
        ran = await maka("status", "--broker", f"ipv4:{live},{dead}", "--json", state_dir=tmp_path / "no-stack")
        assert ran.code == 1, ran.err
        hosts = {host["address"]: host for host in json.loads(ran.out)["hosts"]}
        assert (hosts[live]["hostId"], hosts[live]["state"]) == ("host-0", "serving")
        assert (hosts[dead]["hostId"], hosts[dead]["state"], hosts[dead]["error"]) == (
            None,
            "unreachable",
            "UNAVAILABLE",
        )
