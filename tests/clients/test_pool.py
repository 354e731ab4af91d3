"""A caller of a team's pool of Hosts through real processes (docs/clients.md "Pools of Hosts"): while one
Host drains, new calls go to a ready Host (client-side health checking, or a refusal retried with the same
call id) and are never refused, while the call the draining Host owns stays with it: its dropped stream
reattaches there, its form is answered, and it ends with the Tool's result. A caller that names only the
draining Host still sees ``HOST_UNAVAILABLE``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from maka_client import (
    Accepted,
    BrokerClient,
    Failure,
    FailureCode,
    MakaError,
    Reattaching,
    ReattachPolicy,
    Result,
    ToolCall,
)
from maka_client._channel import open_channel
from stack.ports import free_port
from tests.helpers.cli import maka
from tests.helpers.pool import HostPool, host_pool
from tests.helpers.waiting import eventually
from tests.reliability.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

DEPLOY_ANSWER = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}
NEW_CALLS = 8
ROOT = Path(__file__).resolve().parents[2]
TS_CLIENT = ROOT / "clients" / "typescript"
NODE = ROOT / ".tools" / "bin" / "node22"


async def _pings(client: BrokerClient, count: int, prefix: str, *, one_by_one: bool = False) -> list[ToolCall]:
    """``count`` ``examples:ping`` calls, concurrent (or ``one_by_one``: once both Hosts' connections are up,
    round_robin alternates between them), each followed to its outcome."""
    calls = [client.call_tool("examples:ping", {}, tool_use_id=f"{prefix}-{i}") for i in range(count)]
    if one_by_one:
        for call in calls:
            await call.result()
    else:
        await asyncio.gather(*(call.result() for call in calls))
    return calls


async def _first(pending: Awaitable[list[interaction_pb2.Interaction]]) -> interaction_pb2.Interaction | None:
    forms = await pending
    return forms[0] if forms else None


async def _typescript_pings(target: str, count: int, *options: str) -> dict[str, Any]:
    """``clients/typescript/test/pool.ts``: ``count`` pings through ``target`` with the TypeScript client."""
    process = await asyncio.create_subprocess_exec(
        str(NODE), str(TS_CLIENT / "dist" / "test" / "pool.js"), "--pool", target, "--count", str(count), *options,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(90):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


def _text(outcome: object) -> str:
    assert isinstance(outcome, Result), outcome
    return "\n".join(block["text"] for block in outcome.result.get("content", []) if block.get("type") == "text")


async def _client_sees_the_drain(client: BrokerClient) -> None:
    """Until the client's own health watch has the draining Host out of its picks.

    The Host's health service says NOT_SERVING before the client's watch stream delivers it (on a loaded
    machine, hundreds of milliseconds later). round_robin alternates between two picked Hosts, so four calls
    in a row with no refused start mean the client picks only the ready Host. A client without health
    checking never gets there, and the wait fails.
    """
    rounds = iter(range(1_000))

    async def only_the_ready_host() -> bool:
        calls = await _pings(client, 4, f"settle-{next(rounds)}", one_by_one=True)
        return all(c.refused_starts == 0 for c in calls)

    await eventually(only_the_ready_host, timeout=30, interval=0.05, what="the client's health watch sees the drain")


@dataclass
class Owned:
    """The call the draining Host owns, followed in the background, and the pool's two Hosts."""

    call: ToolCall
    events: list[object]
    follower: asyncio.Task[None]
    owner: str
    other: str


async def _owned_call(pool: HostPool, client: BrokerClient) -> Owned:
    """A deploy call through the pool, followed in the background until it is accepted by a Host."""
    call = client.call_tool("examples:deploy", {"artifact": "build-26"}, tool_use_id="use-owned")
    events: list[object] = []
    accepted = asyncio.Event()

    async def follow() -> None:
        async for event in call:
            events.append(event)
            if isinstance(event, Accepted):
                accepted.set()

    task = asyncio.create_task(follow())
    async with asyncio.timeout(60):
        await accepted.wait()
    [other] = [host for host in pool.host_ids if host != call.host_id]
    return Owned(call, events, task, call.host_id, other)


async def test_new_calls_go_to_a_ready_host_while_the_owner_drains_and_the_owned_call_reattaches_to_it(
    tmp_path: Path,
) -> None:
    async with host_pool(tmp_path, hosts=2) as pool, BrokerClient(pool.pool_target) as client:
        assert client.pool, "an ipv4: target with two addresses names a pool"
        owned = await _owned_call(pool, client)
        owner = owned.owner
        assert owned.call.host_address == pool.brokers[owner], "accepted names where the owning Host is reached"
        form = await eventually(lambda: _first(pool.pending(owner)), timeout=60, what="the owned call's form")

        rollout = asyncio.create_task(pool.drain(owner))
        try:
            await _during_the_drain(pool, client, owned, form, tmp_path)
            async with asyncio.timeout(120):
                await rollout  # the owner exited once its call was done, and started again
        finally:
            if not rollout.done():  # a failure above: leave no restart half done
                rollout.cancel()
                await asyncio.gather(rollout, return_exceptions=True)
        assert '"broker_drained"' in pool.log(f"{owner}-broker")


async def _during_the_drain(
    pool: HostPool, client: BrokerClient, owned: Owned, form: interaction_pb2.Interaction, tmp_path: Path
) -> None:
    """What the test checks while the owner drains (see the module docstring)."""
    call, owner, other = owned.call, owned.owner, owned.other
    await pool.wait_not_taking_calls(owner)
    await _client_sees_the_drain(client)

    # Client-side health checking: the draining Host gets no new call at all.
    healthy = await _pings(client, NEW_CALLS, "healthy")
    assert [_text(c.outcome) for c in healthy] == ["pong"] * NEW_CALLS
    assert {c.host_id for c in healthy} == {other}
    assert sum(c.refused_starts for c in healthy) == 0, "no start reached the draining Host"

    # Without health checking (round_robin only) the draining Host refuses its share, and every refused
    # start is retried with its call id on the ready Host: still no caller is refused.
    no_health = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
    blind_channel = open_channel(pool.pool_target, None, service_config=no_health)
    try:
        blind = BrokerClient(pool.pool_target, channel=blind_channel, pool=True)
        retried = await _pings(blind, NEW_CALLS, "blind", one_by_one=True)
    finally:
        await blind_channel.close()
    assert [_text(c.outcome) for c in retried] == ["pong"] * NEW_CALLS
    assert {c.host_id for c in retried} == {other}
    assert sum(c.refused_starts for c in retried) >= 1, "round_robin sent some starts to the draining Host"

    # The TypeScript client (grpc-js: round_robin, no client-side health checking) on the same pool: the
    # draining Host's refusals are retried with their call ids, so every call still succeeds on the other.
    typescript = await _typescript_pings(pool.pool_target, NEW_CALLS)
    assert typescript["pool"] is True
    assert [(c["outcome"], c["text"]) for c in typescript["calls"]] == [("result", "pong")] * NEW_CALLS
    assert {c["hostId"] for c in typescript["calls"]} == {other}
    assert sum(c["refusedStarts"] for c in typescript["calls"]) >= 1, "round_robin reached the draining Host"

    # `maka call` on the pool target: served by the ready Host, which it names.
    ran = await maka("call", "examples:ping", "--broker", pool.pool_target, state_dir=tmp_path / "no-stack")
    assert (ran.code, ran.out.strip()) == (0, "pong"), ran.err
    assert f"Host {other})" in ran.err

    # A caller that names only the draining Host keeps today's behaviour.
    async with BrokerClient(pool.proxied(owner)) as single:
        assert not single.pool
        refused = await single.call_tool("examples:ping", {}, tool_use_id="single").result()
    assert isinstance(refused, Failure), refused
    assert refused.code == FailureCode.HOST_UNAVAILABLE

    # A pool none of whose Hosts takes new calls: the start waits for one within give_up_after, then fails.
    policy = ReattachPolicy(initial_delay=0.05, max_delay=0.2, give_up_after=1.0)
    async with BrokerClient(pool.proxied(owner), pool=True, reattach=policy) as none_ready:
        with pytest.raises(MakaError) as unavailable:
            await none_ready.call_tool("examples:ping", {}, tool_use_id="none-ready").result()
    assert unavailable.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE
    assert "takes new calls" in str(unavailable.value)

    # The owned call's stream drops; it reattaches to its Host (draining, still serving WatchCall).
    assert pool.proxies[owner].cut() >= 1
    await pool.answer(owner, form, DEPLOY_ANSWER)
    async with asyncio.timeout(60):
        await owned.follower
    assert _text(call.outcome) == "Deployed build-26 to staging."
    assert call.reattaches >= 1
    assert any(isinstance(e, Reattaching) for e in owned.events)
    assert call.host_id == owner


async def test_a_typescript_caller_arriving_while_no_host_of_the_pool_is_up_waits_for_one(tmp_path: Path) -> None:
    async with host_pool(tmp_path, hosts=1) as pool:
        dials: list[str] = []
        upstream = f"127.0.0.1:{free_port()}"  # nothing listens there: the pool's Host is restarting

        def route() -> str:
            dials.append(upstream)
            return upstream

        restarting = TcpProxy(route)
        await restarting.start()
        try:
            target = f"ipv4:127.0.0.1:{restarting.port},127.0.0.1:{free_port()}"
            caller = asyncio.create_task(_typescript_pings(target, 1))
            # The client dialled, failed and dials again: it waits for a Host instead of failing at once.
            await eventually(lambda: len(dials) >= 2, timeout=30, what="the TypeScript client redialling")
            assert not caller.done(), "the call did not fail while no Host was up"
            upstream = pool.brokers["host-0"]  # the Host is up again
            report = await caller
        finally:
            await restarting.close()
    [only] = report["calls"]
    assert (only["outcome"], only["text"], only["hostId"]) == ("result", "pong", "host-0")


async def test_a_typescript_caller_of_a_pool_with_no_host_up_gives_up_after_its_bound() -> None:
    target = f"ipv4:127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    report = await _typescript_pings(target, 1, "--give-up-after-ms", "1000")
    [only] = report["calls"]
    assert (only["outcome"], only["code"]) == ("error", "UNAVAILABLE")
    assert "takes new calls" in only["text"]
