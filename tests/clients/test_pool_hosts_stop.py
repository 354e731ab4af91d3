"""The TypeScript client asks every Host of a team's pool on its own (docs/clients.md "Pools of Hosts"), through real
processes (``tests/helpers/pool.py``) and Node 22 running ``clients/typescript/test/hosts.ts``: ``hosts()`` shows each
Host's id, state (a draining one included, one that does not answer ``unreachable``), calls running and pending forms,
as the Python client's ``hosts()`` does; ``stop()`` without a Host address stops a session on every Host it runs on,
and one call on the Host that owns it while that Host drains (the caller sees ``stopped``, the form closes)."""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from maka.interaction.v1 import interaction_pb2
from maka_client import Accepted, BrokerClient, CallEvent, HostStatus, Stopped, ToolCall
from stack.ports import free_port
from tests.helpers.pool import HostPool, host_pool
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TS_HOSTS = ROOT / "clients" / "typescript" / "dist" / "test" / "hosts.js"


async def _typescript(command: str, target: str, *options: str) -> dict[str, Any]:
    """One ``hosts.ts`` command against ``target``; its JSON line."""
    process = await asyncio.create_subprocess_exec(
        str(NODE), str(TS_HOSTS), command, "--target", target, *options,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


def _as_typescript(status: HostStatus) -> dict[str, Any]:
    """The Python client's ``HostStatus`` with the TypeScript client's field names."""
    return {
        "address": status.address,
        "hostId": status.host_id,
        "state": status.state,
        "liveInvocations": status.live_invocations,
        "pendingForms": status.pending_forms,
        "error": status.error,
    }


@dataclass
class Followed:
    """A deploy call followed in the background until its outcome."""

    call: ToolCall
    events: list[CallEvent]
    task: asyncio.Task[None]


async def _deploy(client: BrokerClient, session: str, tool_use_id: str) -> Followed:
    """A deploy call (it waits on a form) through ``client``, followed in the background until it is accepted."""
    call = client.call_tool("examples:deploy", {"artifact": "build-27"}, session_id=session, tool_use_id=tool_use_id)
    events: list[CallEvent] = []
    accepted = asyncio.Event()

    async def follow() -> None:
        async for event in call:
            events.append(event)
            if isinstance(event, Accepted):
                accepted.set()

    task = asyncio.create_task(follow())
    async with asyncio.timeout(60):
        await accepted.wait()
    return Followed(call, events, task)


async def _form(pool: HostPool, host_id: str, session: str) -> interaction_pb2.Interaction | None:
    forms = await pool.pending(host_id, session)
    return forms[0] if forms else None


async def _stopped(followed: Followed) -> None:
    async with asyncio.timeout(60):
        await followed.task
    assert isinstance(followed.call.outcome, Stopped), followed.events


async def test_the_typescript_client_shows_and_stops_calls_on_every_host_of_the_pool_the_draining_one_included(
    tmp_path: Path,
) -> None:
    async with host_pool(tmp_path, hosts=2) as pool:
        first, second = pool.host_ids
        dead = f"127.0.0.1:{free_port()}"  # nothing listens there

        # One Host by its plain address: not a pool, its one status.
        single = await _typescript("hosts", pool.brokers[first])
        assert single["pool"] is False
        assert [(h["address"], h["hostId"], h["state"]) for h in single["hosts"]] == [
            (pool.brokers[first], first, "serving")
        ]

        # A dns: name is every address it resolves to now, each dialled with the name as its authority: the
        # same Hosts as the Python client finds.
        port = pool.brokers[first].rpartition(":")[2]
        named = await _typescript("hosts", f"dns:///localhost:{port}")
        by_address = {h["address"]: h for h in named["hosts"]}
        assert (by_address[f"127.0.0.1:{port}"]["hostId"], by_address[f"127.0.0.1:{port}"]["state"]) == (
            first,
            "serving",
        )
        async with BrokerClient(f"dns:///localhost:{port}") as python_named:
            assert by_address == {s.address: _as_typescript(s) for s in await python_named.hosts()}

        # A session with a call on each Host: stop() naming no Host stops it on both.
        async with BrokerClient(pool.proxied(first)) as on_first, BrokerClient(pool.proxied(second)) as on_second:
            both = [await _deploy(on_first, "ts-both", "use-first"), await _deploy(on_second, "ts-both", "use-second")]
            assert [f.call.host_id for f in both] == [first, second]
            for host in (first, second):
                await eventually(functools.partial(_form, pool, host, "ts-both"), timeout=60, what=f"{host}'s form")
            stopped = await _typescript("stop", pool.pool_target, "--session", "ts-both")
            assert stopped == {"pool": True, "stopped": 2}
            for followed in both:
                await _stopped(followed)

        async with BrokerClient(pool.pool_target) as client:
            owned = await _deploy(client, "ts-owned", "use-owned")
            owner = owned.call.host_id
            [other] = [host for host in pool.host_ids if host != owner]
            await eventually(lambda: _form(pool, owner, "ts-owned"), timeout=60, what="the owned call's form")

            rollout = asyncio.create_task(pool.drain(owner))
            try:
                await pool.wait_not_taking_calls(owner)

                # Every Host on its own: the draining owner with its call and form, the other serving, the dead
                # address unreachable; the same view as the Python client's.
                listed = f"{pool.pool_target},{dead}"
                report = await _typescript("hosts", listed)
                assert report["pool"] is True
                hosts = {h["address"]: h for h in report["hosts"]}
                assert hosts[pool.proxied(owner)] == {
                    "address": pool.proxied(owner),
                    "hostId": owner,
                    "state": "draining",
                    "liveInvocations": 1,
                    "pendingForms": 1,
                    "error": "",
                }
                assert (hosts[pool.proxied(other)]["hostId"], hosts[pool.proxied(other)]["state"]) == (other, "serving")
                assert (hosts[pool.proxied(other)]["liveInvocations"], hosts[pool.proxied(other)]["pendingForms"]) == (
                    0,
                    0,
                )
                assert (hosts[dead]["hostId"], hosts[dead]["state"], hosts[dead]["error"]) == (
                    "",
                    "unreachable",
                    "UNAVAILABLE",
                )
                async with BrokerClient(listed) as python:
                    assert report["hosts"] == [_as_typescript(status) for status in await python.hosts()]

                # One call, by its id, on the pool: its draining owner stops it.
                one = await _typescript("stop", pool.pool_target, "--invocation", owned.call.invocation_id)
                assert one == {"pool": True, "stopped": 1}
                await _stopped(owned)
                assert await pool.pending(owner, "ts-owned") == [], "the stopped call's form closed"
                async with asyncio.timeout(120):
                    await rollout  # nothing left to drain: the owner exited and started again
            finally:
                if not rollout.done():
                    rollout.cancel()
                    await asyncio.gather(rollout, return_exceptions=True)
                owned.task.cancel()
                await asyncio.gather(owned.task, return_exceptions=True)

        again = await _typescript("stop", pool.pool_target, "--invocation", owned.call.invocation_id)
        assert again == {"pool": True, "stopped": 0}, "no Host runs it any more"
        unanswered = await _typescript("stop", f"{pool.pool_target},{dead}", "--invocation", owned.call.invocation_id)
        assert unanswered["error"]["code"] == "UNAVAILABLE", "a Host that did not answer is reported"
        assert '"broker_drained"' in pool.log(f"{owner}-broker")
