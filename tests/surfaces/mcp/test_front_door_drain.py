"""The MCP front door drains on SIGTERM like the broker (docs/mcp-front-door.md "In Kubernetes"), through real
processes: a pool of real Hosts (tests/helpers/pool.py: Redis, the Interaction service, per Host a broker and its
MCP provider with the example server) behind one front door process (``python -m surfaces.mcp.main``) whose broker
target is the pool, as in deploy/k8s; the official SDK ``Client`` at both protocol eras.

While the door and its Host's broker drain (SIGTERM to both, as a pod's stop sends), ``/readyz`` is 503 and
``/healthz`` 200, the calls in flight finish once their forms are answered, a new call through the same door runs
on the other Host, and the door exits by itself (0) once no call is left, nothing pending. A budget that runs out,
or none (``maka up``'s default), stops the calls: nothing stays pending. A draining door also waits for a
2026-07-28 client between rounds to fetch the outcome of its call that ended meanwhile. Through the pool, a client
that declares elicitation answers the form on the Host that runs its call (not necessarily the door's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, InputRequiredResult

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from tests.helpers.pool import HostPool, host_pool
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = "examples.deploy"
WAIT = 60.0
BUDGET_SECONDS = 240
"""The draining door's budget: it must exit long before, once its calls are done."""
STAGING = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}
FORM_ID = re.compile(r"\(([^()\s]+)\): answer it")


@dataclass
class Door:
    """A running front door process, its URL and its log lines (JSON)."""

    process: asyncio.subprocess.Process
    url: str = ""
    lines: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == name]

    async def until_logged(self, name: str) -> dict[str, Any]:
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: bool(self.events(name)))
        return self.events(name)[0]

    async def read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            text = raw.decode(errors="replace").strip()
            sys.stderr.write(f"[mcp] {text}\n")
            try:
                entry = json.loads(text)
            except ValueError:
                entry = {"event": text}
            async with self.changed:
                self.lines.append(entry if isinstance(entry, dict) else {"event": text})
                self.changed.notify_all()


@contextlib.asynccontextmanager
async def front_door(pool: HostPool, drain_seconds: str, **env: str) -> AsyncIterator[Door]:
    """``python -m surfaces.mcp.main`` on a free loopback port, calling the pool's brokers (``MAKA_HOST_ID`` the
    first Host's, as in its pod) with ``MAKA_DRAIN_SECONDS=drain_seconds``; killed at the end if still running."""
    door_env = {
        **os.environ,
        "MAKA_BROKER_TARGET": pool.pool_target,
        "MAKA_INTERACTION_TARGET": pool.interaction,
        "MAKA_HOST_ID": pool.host_ids[0],
        "MAKA_MCP_LISTEN": "127.0.0.1:0",
        "MAKA_DRAIN_SECONDS": drain_seconds,
        "MAKA_LOG_LEVEL": "INFO",
        **env,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "surfaces.mcp.main", cwd=ROOT, env=door_env, stderr=asyncio.subprocess.PIPE
    )
    door = Door(process)
    reading = asyncio.create_task(door.read())
    try:
        door.url = (await door.until_logged("mcp.serving"))["url"]
        yield door
    finally:
        if process.returncode is None:
            process.kill()
        async with asyncio.timeout(WAIT):
            await process.wait()
            await reading


@contextlib.asynccontextmanager
async def sdk_client(door: Door, mode: str, **options: Any) -> AsyncIterator[Client]:
    """The official Python SDK client of ``door`` (``auto``: 2026-07-28; ``legacy``: 2025-11-25), without
    elicitation unless ``options`` give it a callback.
    A 2025-11-25 session outlives its calls: once the drained door exited, closing it (its ``GET`` stream, its
    ``DELETE``) cannot connect, which is the door having gone, not a failure."""
    http = httpx2.AsyncClient(timeout=120)
    try:
        transport = streamable_http_client(door.url, http_client=http)
        async with http, Client(transport, mode=mode, **options) as client:
            yield client
    except* httpx2.ConnectError:
        await exited(door, within=WAIT)  # the door went away (its exit code is the test's to check)


class Progress:
    """A progress callback that resolves with the first form it names."""

    def __init__(self) -> None:
        self.form: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        found = FORM_ID.search(message or "")
        if found and not self.form.done():
            self.form.set_result(found.group(1))


async def start_deploy(client: Client, artifact: str) -> tuple[asyncio.Task[CallToolResult], str]:
    """Call ``examples.deploy`` in the background; returns the call and its form's id once it is pending."""
    progress = Progress()
    call = asyncio.ensure_future(client.call_tool(DEPLOY, {"artifact": artifact}, progress_callback=progress))
    async with asyncio.timeout(WAIT):
        waited: set[asyncio.Future[Any]] = {call, progress.form}
        done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    assert progress.form in done, f"the call ended before its form was pending: {call.result()}"
    return call, progress.form.result()


def text(result: CallToolResult) -> str:
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content if block.type == "text")


@contextlib.asynccontextmanager
async def interaction_service(
    pool: HostPool,
) -> AsyncIterator[interaction_service_pb2_grpc.InteractionServiceAsyncStub]:
    async with grpc.aio.insecure_channel(pool.interaction) as channel:
        yield interaction_service_pb2_grpc.InteractionServiceStub(channel)


async def form_on(pool: HostPool, interaction_id: str) -> tuple[str, interaction_pb2.Interaction]:
    """The Host that holds form ``interaction_id``, and the form."""
    async with interaction_service(pool) as stub:
        for host in pool.host_ids:
            request = interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id, host_id=host)
            try:
                form = (await stub.GetInteraction(request, timeout=10)).interaction
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    continue
                raise
            return host, form
    raise AssertionError(f"no Host holds {interaction_id}")


async def answer_staging(pool: HostPool, interaction_id: str) -> None:
    """Accept form ``interaction_id`` for staging on its Host (the Interaction service, as ``maka answer``)."""
    host, form = await form_on(pool, interaction_id)
    await pool.answer(host, form, STAGING)


async def pending_anywhere(pool: HostPool) -> list[str]:
    """Every pending form of every session, on every Host of the pool."""
    found: list[str] = []
    async with interaction_service(pool) as stub:
        for host in pool.host_ids:
            response = await stub.ListPending(interaction_service_pb2.ListPendingRequest(host_id=host), timeout=10)
            found += [form.interaction_id for form in response.pending]
    return found


async def status(url: str) -> tuple[int, str]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(url)
    return response.status_code, response.text


async def exited(door: Door, within: float) -> int:
    """The door's exit code, waited for at most ``within`` s."""
    async with asyncio.timeout(within):
        return await door.process.wait()


async def test_a_draining_door_finishes_its_calls_runs_new_ones_on_another_host_and_exits_by_itself(
    tmp_path: Path,
) -> None:
    async with host_pool(tmp_path, hosts=2) as pool, front_door(pool, str(BUDGET_SECONDS)) as door:
        async with sdk_client(door, "auto") as modern, sdk_client(door, "legacy") as legacy:
            first, first_form = await start_deploy(modern, "build-1")
            second, second_form = await start_deploy(legacy, "build-2")
            owner, _ = await form_on(pool, first_form)
            [other] = [host for host in pool.host_ids if host != owner]

            # the pod stops: its broker and provider drain (and start again once done), the door drains
            rollout = asyncio.create_task(pool.drain(owner))
            try:
                door.process.send_signal(signal.SIGTERM)
                draining = await door.until_logged("mcp.draining")
                assert (draining["calls"], draining["detached_calls"]) == (2, 0)
                assert await status(door.base + "/readyz") == (503, "draining")
                assert (await status(door.base + "/healthz"))[0] == 200
                await pool.wait_not_taking_calls(owner)

                async with sdk_client(door, "auto") as newcomer:
                    third, third_form = await start_deploy(newcomer, "build-3")
                    assert (await form_on(pool, third_form))[0] == other, "a new call runs on the Host not draining"
                    await answer_staging(pool, third_form)
                    async with asyncio.timeout(WAIT):
                        assert text(await third) == "Deployed build-3 to staging."

                await answer_staging(pool, first_form)
                await answer_staging(pool, second_form)
                async with asyncio.timeout(WAIT):
                    assert text(await first) == "Deployed build-1 to staging."
                    assert text(await second) == "Deployed build-2 to staging."
            finally:
                with contextlib.suppress(TimeoutError):  # a failure above: leave no restart half done
                    async with asyncio.timeout(120):
                        await rollout

        assert await exited(door, within=WAIT) == 0, "the door exits once no call is left, long before its budget"
        drained = await door.until_logged("mcp.drained")
        assert (drained["calls_left"], drained["detached_calls_left"]) == (0, 0)
        assert await pending_anywhere(pool) == []


@pytest.mark.parametrize(("drain_seconds", "drains"), [("2", True), ("0", False)])
async def test_a_door_whose_drain_budget_runs_out_or_is_zero_stops_its_calls_and_leaves_nothing_pending(
    tmp_path: Path, drain_seconds: str, drains: bool
) -> None:
    async with host_pool(tmp_path, hosts=1) as pool, front_door(pool, drain_seconds) as door:
        async with sdk_client(door, "auto") as client:
            call, form = await start_deploy(client, "build-9")
            assert await pending_anywhere(pool) == [form]

            door.process.send_signal(signal.SIGTERM)
            assert await exited(door, within=WAIT) == 0
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)

        await door.until_logged("mcp.call_stopped")
        if drains:
            drained = await door.until_logged("mcp.drained")
            assert (drained["calls_left"], drained["detached_calls_left"]) == (1, 0)
        else:
            assert door.events("mcp.draining") == [], "no budget: no drain, the calls stop at once"
        await eventually(_nothing_pending(pool), timeout=WAIT, what="the stopped call's form to close")


def _nothing_pending(pool: HostPool) -> Any:
    async def check() -> bool:
        return await pending_anywhere(pool) == []

    return check


async def _staging(context: object, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"environment": "staging", "confirm": True})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_eliciting_clients_answer_reaches_the_form_on_the_pools_host_that_runs_its_call(
    tmp_path: Path, mode: str
) -> None:
    async with host_pool(tmp_path, hosts=2) as pool, front_door(pool, "0") as door:
        # The door's own Host (MAKA_HOST_ID host-0) is gone: its calls run on host-1, and so do their forms.
        await pool.supervisor.stop_together(["host-0-broker", "host-0-provider"])
        async with sdk_client(door, mode, elicitation_callback=_staging) as client:
            async with asyncio.timeout(WAIT):
                result = await client.call_tool(DEPLOY, {"artifact": f"elsewhere-{mode}"})

        assert text(result) == f"Deployed elsewhere-{mode} to staging."

        async def answered_on_host_1() -> list[Any] | None:
            async with interaction_service(pool) as stub:
                request = interaction_service_pb2.ListHistoryRequest(host_id="host-1")
                states = [entry.state for entry in (await stub.ListHistory(request, timeout=10)).entries]
            return states or None

        answered = await eventually(answered_on_host_1, timeout=WAIT, what="the form in host-1's history")
        assert answered == [interaction_pb2.INTERACTION_STATE_ANSWERED]


async def test_a_draining_door_waits_for_a_client_between_rounds_to_fetch_the_outcome_of_its_ended_call(
    tmp_path: Path,
) -> None:
    async with host_pool(tmp_path, hosts=1) as pool, front_door(pool, str(BUDGET_SECONDS)) as door:
        async with sdk_client(door, "auto", elicitation_callback=_staging) as client:
            arguments = {"artifact": "between-rounds"}
            first = await client.session.call_tool(DEPLOY, arguments, allow_input_required=True)
            assert isinstance(first, InputRequiredResult), first
            assert first.input_requests is not None
            (key,) = first.input_requests
            await answer_staging(pool, key)  # another surface answers while the client is between rounds
            await door.until_logged("mcp.outcome_held")  # the call ended; its outcome waits for the client

            door.process.send_signal(signal.SIGTERM)
            draining = await door.until_logged("mcp.draining")
            assert (draining["calls"], draining["detached_calls"]) == (0, 1), "the call, or its outcome, waits"
            assert await status(door.base + "/readyz") == (503, "draining")
            late = ElicitResult(action="accept", content={"environment": "production", "confirm": True})
            done = await client.session.call_tool(
                DEPLOY, arguments, input_responses={key: late}, request_state=first.request_state
            )
            assert isinstance(done, CallToolResult)
            assert text(done) == "Deployed between-rounds to staging.", "the settled outcome, not a second answer"

        assert await exited(door, within=WAIT) == 0
        drained = await door.until_logged("mcp.drained")
        assert (drained["calls_left"], drained["detached_calls_left"]) == (0, 0)
        assert await pending_anywhere(pool) == []
