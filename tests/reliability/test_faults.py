"""Fault suite (``make faults``): real processes are killed, restarted and cut while a form is pending.

One stack of real processes (:mod:`tests.reliability.harness`: embedded Redis with AOF, Interaction
service, broker, MCP provider) is shared by the module - the supervisor restarts what a test kills,
and each test waits until the stack serves again before it starts. The MCP provider reaches the
broker through :class:`tests.reliability.tcp_proxy.TcpProxy` so a test can cut that stream. The
counting MCP server logs every ``tools/call`` that reaches it, so "no retry reaches the server" is
counted, not assumed; tests tell their calls apart by ``tag``. Sources: RFC criteria 8 (provider
loss), 9 (Host restart, surface reconnect), docs/design.md#lifecycle (lifecycle rules).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from maka.interaction.v1 import interaction_pb2
from maka_client import Reattaching, ReattachPolicy
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from stack.supervisor import StackEvent
from stack.topology import Stack
from surfaces.common.interactions import FormAnswered, FormOpened, FormSnapshot, Interactions
from tests.helpers.stack import OnStack
from tests.helpers.waiting import eventually, none_while_unavailable
from tests.reliability.counting_server import digest
from tests.reliability.harness import (
    ToolCall,
    answer,
    calls,
    get_interaction,
    reliability_stack,
    result_payload,
    tools_ready,
    wait_settled,
)
from tests.reliability.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150), pytest.mark.asyncio(loop_scope="module")]

T = TypeVar("T")


@dataclass
class Faulty(OnStack):
    """The shared stack, the counting server's call log and the provider→broker proxy."""

    log: Path
    proxy: TcpProxy = field(repr=False)

    def legs(self, *tags: str) -> list[tuple[str, str]]:
        """``(tag, leg)`` of every ``tools/call`` of ``tags`` that reached the MCP server, in order."""
        return [(str(c["tag"]), str(c["leg"])) for c in calls(self.log) if c["tag"] in tags]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Faulty]:
    """One stack for the module (starting one takes seconds); the provider dials the broker via a proxy."""
    stack_ref: list[Stack] = []
    proxy = TcpProxy(lambda: stack_ref[0].address(Stack.BROKER))
    port = await proxy.start()
    directory = tmp_path_factory.mktemp("faults")
    try:
        async with reliability_stack(
            directory,
            child_env={"provider": {"MAKA_BROKER_TARGET": f"127.0.0.1:{port}", "MAKA_RECONNECT_MAX_SECONDS": "1"}},
            on_stack=stack_ref.append,
        ) as (running, log):
            yield Faulty(running, log, proxy)
    finally:
        await proxy.close()


@pytest_asyncio.fixture(loop_scope="module")
async def faulty(shared: Faulty) -> Faulty:
    """The shared stack, serving again (Tools listed) before the test starts."""
    await tools_ready(shared.running)
    return shared


async def _next(events: asyncio.Queue[StackEvent], kind: str, name: str, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            event = await events.get()
            if event.kind == kind and event.name == name:
                return


async def test_killing_the_provider_while_a_form_is_pending_loses_the_call_and_closes_the_form(
    faulty: Faulty,
) -> None:
    events = faulty.running.stack.subscribe()
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "kill-provider"}) as call:
        interaction_id = await call.awaiting()
        faulty.running.stack.kill("provider")
        end = await call.terminal()
        assert end.WhichOneof("event") == "lost", call.kinds()
    record = await wait_settled(faulty.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await answer(faulty.interaction, interaction_id, "late")
    assert error_from_rpc(refused.value).reason == InteractionErrorReason.CLOSED
    await _next(events, "ready", "provider")  # restarted by the supervisor; nothing is replayed
    await tools_ready(faulty.running)
    assert faulty.legs("kill-provider") == [("kill-provider", "first")]


async def test_killing_the_broker_closes_the_form_host_restarted_and_never_calls_the_tool_again(
    faulty: Faulty,
) -> None:
    events = faulty.running.stack.subscribe()
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "kill-broker"}) as call:
        interaction_id = await call.awaiting()
        old = await get_interaction(faulty.interaction, interaction_id)
        faulty.running.stack.kill("broker")
        await call.finished()
        assert call.error is not None, call.kinds()
        assert call.error.code() == grpc.StatusCode.UNAVAILABLE
    await _next(events, "ready", "broker")
    record = await wait_settled(faulty.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    assert record.host_epoch == old.host_epoch
    await tools_ready(faulty.running)
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "after-broker"}) as second:
        second_id = await second.awaiting()
        fresh = await get_interaction(faulty.interaction, second_id)
        assert fresh.host_epoch > old.host_epoch  # a new Host epoch
        await answer(faulty.interaction, second_id, "fine")
        done = await second.terminal()
        assert result_payload(done)["digest"] == digest("fine")
    assert faulty.legs("kill-broker", "after-broker") == [
        ("kill-broker", "first"),
        ("after-broker", "first"),
        ("after-broker", "retry"),
    ]


def _has(event: FormSnapshot | FormOpened, interaction_id: str) -> bool:
    if isinstance(event, FormSnapshot):
        return any(v.interaction_id == interaction_id for v in event.pending)
    return event.interaction.interaction_id == interaction_id


async def test_restarting_the_interaction_service_keeps_the_form_and_the_answer_completes_the_call(
    faulty: Faulty,
) -> None:
    events = faulty.running.stack.subscribe()
    backoff = ReattachPolicy(initial_delay=0.05, max_delay=0.5)
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "restart-ix"}) as call:
        interaction_id = await call.awaiting()
        surface = Interactions.connect(faulty.interaction, reattach=backoff)
        late_surface = Interactions.connect(faulty.interaction, reattach=backoff)
        try:
            feed = surface.attach(["default"])
            first = await anext(feed)
            assert isinstance(first, FormSnapshot)
            assert _has(first, interaction_id)
            faulty.running.stack.kill("interaction")
            async with asyncio.timeout(30):  # the surface notices the loss
                while not isinstance(await anext(feed), Reattaching):
                    pass
            await _next(events, "ready", "interaction")
            # A surface attaching after the restart rehydrates the pending form from Redis, once its channel
            # reaches the restarted service (on a loaded machine it may first report Reattaching).
            late_feed = late_surface.attach(["default"])
            async with asyncio.timeout(30):
                late = await anext(late_feed)
                while isinstance(late, Reattaching):
                    late = await anext(late_feed)
            assert isinstance(late, FormSnapshot)
            assert _has(late, interaction_id)
            await eventually(
                none_while_unavailable(lambda: answer(faulty.interaction, interaction_id, "after-restart")),
                timeout=30,
                interval=0.1,
                what="the answer after the restart",
            )
            # The first surface reconnects with its resume token and sees the answer.
            async with asyncio.timeout(30):
                async for event in feed:
                    if isinstance(event, FormAnswered) and event.interaction.interaction_id == interaction_id:
                        break
            assert surface.reconnects >= 1
        finally:
            await surface.close()
            await late_surface.close()
        done = await call.terminal(timeout=60)
        assert result_payload(done) == {"tag": "restart-ix", "action": "accept", "digest": digest("after-restart")}
    assert faulty.legs("restart-ix") == [("restart-ix", "first"), ("restart-ix", "retry")]


async def test_restarting_redis_loses_neither_a_pending_form_nor_a_committed_answer(faulty: Faulty) -> None:
    events = faulty.running.stack.subscribe()
    async with (
        ToolCall(faulty.broker, "counter:ask", {"tag": "redis-pending"}, turn="t1") as pending_call,
        ToolCall(faulty.broker, "counter:ask", {"tag": "redis-answered"}, turn="t2") as answered_call,
    ):
        pending_id = await pending_call.awaiting()
        answered_id = await answered_call.awaiting()
        committed = await answer(faulty.interaction, answered_id, "committed")
        assert committed.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        await answered_call.terminal()
        faulty.running.stack.kill("redis")
        await _next(events, "ready", "redis")
        # Both records came back from the append-only file.
        kept = await wait_settled(faulty.interaction, answered_id)
        assert kept.answer.values["value"].string_value == "committed"
        still = await eventually(
            none_while_unavailable(lambda: get_interaction(faulty.interaction, pending_id)),
            timeout=30,
            interval=0.1,
            what="the form readable again",
        )
        assert still.state == interaction_pb2.INTERACTION_STATE_PENDING
        await eventually(
            none_while_unavailable(lambda: answer(faulty.interaction, pending_id, "after-redis")),
            timeout=30,
            interval=0.1,
            what="the answer after Redis returned",
        )
        done = await pending_call.terminal(timeout=60)
        assert result_payload(done)["digest"] == digest("after-redis")
    assert sorted(faulty.legs("redis-pending", "redis-answered")) == [
        ("redis-answered", "first"),
        ("redis-answered", "retry"),
        ("redis-pending", "first"),
        ("redis-pending", "retry"),
    ]


async def test_an_unreachable_redis_gives_clear_unavailable_errors_and_recovers(faulty: Faulty) -> None:
    pid = faulty.running.stack.supervisor.pid("redis")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # unreachable: the process is there but answers nothing
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            # Each Redis command times out after 2.5 s (3 attempts): well inside this 30 s deadline.
            await get_interaction(faulty.interaction, "ix_missing", timeout=30)
        detail = error_from_rpc(refused.value)
        assert (detail.code, detail.reason) == (grpc.StatusCode.UNAVAILABLE, InteractionErrorReason.STORE_UNAVAILABLE)
    finally:
        os.kill(pid, signal.SIGCONT)
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "redis-back"}) as call:
        interaction_id = await call.awaiting(timeout=60)
        await eventually(
            none_while_unavailable(lambda: answer(faulty.interaction, interaction_id, "recovered")),
            timeout=30,
            interval=0.1,
            what="the answer once the store recovered",
        )
        done = await call.terminal()
        assert result_payload(done)["digest"] == digest("recovered")
    assert faulty.legs("redis-back") == [("redis-back", "first"), ("redis-back", "retry")]


async def test_an_mcp_server_crash_between_rounds_fails_stably_without_a_retry_on_a_new_connection(
    faulty: Faulty,
) -> None:
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "crash"}) as call:
        interaction_id = await call.awaiting()
        server_pid = int(str(next(c for c in calls(faulty.log) if c["tag"] == "crash")["pid"]))
        os.kill(server_pid, signal.SIGKILL)
        end = await call.terminal()
        assert end.WhichOneof("event") == "lost", call.kinds()  # outcome unknown, never a made-up result
    record = await wait_settled(faulty.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await answer(faulty.interaction, interaction_id, "too late")
    assert error_from_rpc(refused.value).reason == InteractionErrorReason.CLOSED
    # The provider reconnects the server; a fresh call runs on the new process, the old one is never retried.
    await tools_ready(faulty.running)
    async with ToolCall(faulty.broker, "counter:echo", {"tag": "after-crash"}) as echo:
        done = await echo.terminal(timeout=60)
        assert done.WhichOneof("event") == "result", echo.kinds()
    legs = [
        (c["tag"], c["leg"], c["pid"] == server_pid) for c in calls(faulty.log) if c["tag"] in ("crash", "after-crash")
    ]
    assert legs == [("crash", "first", True), ("after-crash", "first", False)]


async def test_a_provider_stream_cut_by_the_network_loses_the_call_and_the_provider_registers_again(
    faulty: Faulty,
) -> None:
    accepted = faulty.proxy.accepted
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "cut"}) as call:
        interaction_id = await call.awaiting()
        assert faulty.proxy.cut() > 0
        end = await call.terminal()
        assert end.WhichOneof("event") == "lost", call.kinds()
    record = await wait_settled(faulty.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    await tools_ready(faulty.running)
    assert faulty.proxy.accepted > accepted  # the provider dialled again through the proxy
    async with ToolCall(faulty.broker, "counter:ask", {"tag": "after-cut"}) as again:
        again_id = await again.awaiting()
        await answer(faulty.interaction, again_id, "reconnected")
        done = await again.terminal()
        assert result_payload(done)["digest"] == digest("reconnected")
    assert faulty.legs("cut", "after-cut") == [("cut", "first"), ("after-cut", "first"), ("after-cut", "retry")]
