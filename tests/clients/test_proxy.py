"""CallTool through a real nginx gRPC proxy (``grpc_read_timeout 20s``) with the Python client:
keepalive, reattach after a proxy restart, the grace stop, idempotent start (docs/clients.md)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from maka_client import (
    Accepted,
    AwaitingInteraction,
    BrokerClient,
    CallEvent,
    InteractionSettled,
    Reattaching,
    ReattachPolicy,
    Result,
    Status,
    Stopped,
    SurfaceClient,
    ToolCall,
)
from tests.helpers.nginx import Nginx
from tests.helpers.proxied import GRACE_SECONDS, KEEPALIVE_SECONDS, Proxied
from tests.helpers.waiting import eventually
from tests.reliability.counting_server import digest

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="package")]

BOUND = 60.0


def _logged(events: list[CallEvent]) -> list[CallEvent]:
    return [e for e in events if not isinstance(e, Status | Reattaching)]


async def _closed(surface: SurfaceClient, interaction_id: str, timeout: float = 40.0) -> str:
    """Wait (bounded) until the form is no longer pending; its close reason (or ``answered``)."""

    async def close_reason() -> str | None:
        form = await surface.get(interaction_id)
        return None if form.state == "pending" else form.close_reason

    return await eventually(close_reason, timeout=timeout, interval=0.1, what=f"{interaction_id} closed")


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_form_answered_after_60_seconds_completes_through_the_proxy(proxied: Proxied, nginx: Nginx) -> None:
    tag = f"slow-{uuid.uuid4().hex[:8]}"
    events: list[CallEvent] = []
    async with (
        BrokerClient(nginx.address, reattach=ReattachPolicy(give_up_after=0)) as broker,
        SurfaceClient(proxied.interaction) as surface,
    ):
        call = broker.call_tool("counter:ask", {"tag": tag})
        async with asyncio.timeout(150):
            async for event in call:
                events.append(event)
                if isinstance(event, AwaitingInteraction):
                    asked = time.monotonic()
                    # The behaviour under test is a form that waits 61 s, three times nginx's read timeout.
                    await asyncio.sleep(61)
                    await surface.answer(event.interaction_id, "accept", {"value": "late"})
    assert isinstance(call.outcome, Result), events[-3:]
    assert json.loads(call.outcome.text)["action"] == "accept"
    assert call.reattaches == 0
    keepalives = [e for e in events if isinstance(e, Status)]
    assert len(keepalives) >= int(60 / KEEPALIVE_SECONDS) - 2
    assert all(e.interaction_expires_at is not None for e in keepalives[1:])
    assert time.monotonic() - asked > 60
    assert [c["leg"] for c in proxied.calls_of(tag)] == ["first", "retry"]


async def test_a_proxy_restart_mid_form_reattaches_and_loses_no_event(proxied: Proxied, nginx: Nginx) -> None:
    tag = f"cut-{uuid.uuid4().hex[:8]}"
    events: list[CallEvent] = []
    async with BrokerClient(nginx.address) as broker, SurfaceClient(proxied.interaction) as surface:
        call = broker.call_tool("counter:ask", {"tag": tag})
        async with asyncio.timeout(BOUND):
            async for event in call:
                events.append(event)
                if isinstance(event, AwaitingInteraction):
                    # Cut the caller's connection mid-form; while the proxy is down the form is answered,
                    # so the settled event and the result happen while nobody is attached.
                    await nginx.stop()
                    await surface.answer(event.interaction_id, "accept", {"value": "after-cut"})
                    await nginx.start()
    assert isinstance(call.outcome, Result), events
    assert json.loads(call.outcome.text) == {"tag": tag, "action": "accept", "digest": digest("after-cut")}
    assert call.reattaches >= 1
    assert any(isinstance(e, Reattaching) for e in events)
    logged = _logged(events)
    assert [type(e) for e in logged] == [Accepted, AwaitingInteraction, InteractionSettled, Result]
    assert [getattr(e, "sequence", 0) for e in logged] == [1, 2, 3, 4]
    assert [c["leg"] for c in proxied.calls_of(tag)] == ["first", "retry"]


async def test_a_caller_that_never_comes_back_is_stopped_after_the_grace_and_no_retry_is_sent(
    proxied: Proxied, nginx: Nginx
) -> None:
    tag = f"gone-{uuid.uuid4().hex[:8]}"
    async with SurfaceClient(proxied.interaction) as surface:
        async with BrokerClient(nginx.address) as broker:
            call = broker.call_tool("counter:ask", {"tag": tag})
            async with asyncio.timeout(BOUND):
                async for event in call:
                    if isinstance(event, AwaitingInteraction):
                        interaction_id = event.interaction_id
                        break
            await call.aclose()
        started = time.monotonic()
        assert await _closed(surface, interaction_id, timeout=GRACE_SECONDS + 30) == "stopped"
        assert time.monotonic() - started >= GRACE_SECONDS - 1
        # A reattach within the retention only replays the end: the call was stopped, as Stop does.
        async with BrokerClient(nginx.address) as broker:
            outcome = await asyncio.wait_for(broker.watch_call(call.invocation_id).result(), BOUND)
        assert isinstance(outcome, Stopped)
    assert [c["leg"] for c in proxied.calls_of(tag)] == ["first"]


async def test_the_same_call_id_sent_twice_starts_one_invocation(proxied: Proxied, nginx: Nginx) -> None:
    tag = f"twice-{uuid.uuid4().hex[:8]}"
    ids: dict[str, Any] = {
        "session_id": "twice",
        "turn_id": f"turn-{tag}",
        "tool_use_id": f"use-{tag}",
        "call_id": f"cid-{tag}",
    }
    async with BrokerClient(nginx.address) as broker, SurfaceClient(proxied.interaction) as surface:
        first = broker.call_tool("counter:ask", {"tag": tag}, **ids)
        second = broker.call_tool("counter:ask", {"tag": tag}, **ids)
        async with asyncio.timeout(BOUND):
            seen_first = [e async for e in _until_awaiting(first)]
            seen_second = [e async for e in _until_awaiting(second)]
            assert isinstance(seen_first[0], Accepted)
            assert isinstance(seen_second[0], Accepted)
            assert seen_first[0].invocation_id == seen_second[0].invocation_id
            pending = [f for f in await surface.pending(["twice"]) if f.invocation_id == first.invocation_id]
            assert len(pending) == 1
            await surface.answer(pending[0].interaction_id, "accept", {"value": "once"})
            one, two = await asyncio.gather(first.result(), second.result())
    assert isinstance(one, Result)
    assert two == one
    assert [c["leg"] for c in proxied.calls_of(tag)] == ["first", "retry"]


async def _until_awaiting(call: ToolCall) -> AsyncIterator[CallEvent]:
    async for event in call:
        if isinstance(event, Status):
            continue
        yield event
        if isinstance(event, AwaitingInteraction):
            return


async def test_maka_tools_call_and_stop_reach_a_broker_through_the_proxy_by_flag_and_environment(
    proxied: Proxied, nginx: Nginx, tmp_path: Path
) -> None:
    maka = str(Path(sys.executable).parent / "maka")
    nowhere = str(tmp_path / "no-stack")  # no endpoints.json: only --broker / MAKA_BROKER_TARGET name the broker
    env = {**os.environ, "MAKA_BROKER_TARGET": nginx.address, "MAKA_STATE_DIR": nowhere}

    async def run(*argv: str, environment: dict[str, str]) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            maka, *argv, env=environment, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        async with asyncio.timeout(BOUND):
            out, err = await process.communicate()
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    code, out, _ = await run("tools", environment=env)
    assert code == 0
    assert "counter:ask" in out
    tag = f"cli-{uuid.uuid4().hex[:8]}"
    without_env = {k: v for k, v in env.items() if k != "MAKA_BROKER_TARGET"}
    code, out, err = await run(
        "call", "counter:echo", "--args", json.dumps({"tag": tag}), "--broker", nginx.address, environment=without_env
    )
    assert (code, json.loads(out)) == (0, {"tag": tag}), err
    code, out, _ = await run("stop", "--session", "cli-nobody", environment=env)
    assert (code, out) == (0, "stopped 0 invocation(s) of session cli-nobody\n")
    code, _, err = await run("tools", environment=without_env)
    assert code == 3
    assert err.startswith("NO_STACK:")
