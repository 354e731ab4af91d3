"""CallTool keepalives, detach/reattach (WatchCall) and idempotent start by call id (docs/clients.md),
over gRPC against the real broker, the real Interaction service and Redis, with synthetic providers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from tests.helpers.broker import FRAME_TIMEOUT, Call, Provider, StackFactory, accept_staging, deploy_tool
from tests.helpers.waiting import eventually


def _kinds(events: list[broker_pb2.CallToolResponse]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events if e.WhichOneof("event") != "status"]


async def test_a_silent_call_gets_status_keepalives_with_its_phase_and_the_forms_expiry(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0, call_keepalive_seconds=0.2)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    running = (await call.next("status")).status
    assert running.phase == broker_pb2.CALL_PHASE_RUNNING
    assert running.invocation_id == invoke.invocation_id
    assert running.watchers == 1
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    assert awaiting.expires_at.seconds > 0
    keepalive = await call.next("status")
    assert keepalive.status.phase == broker_pb2.CALL_PHASE_AWAITING_INTERACTION
    assert keepalive.status.interaction_id == awaiting.interaction_id
    assert keepalive.status.interaction_expires_at == awaiting.expires_at
    assert keepalive.sequence == 2  # accepted, awaiting_interaction; a status is not logged
    await stack.answer(awaiting.interaction_id, accept_staging())
    assert (await provider.next("interaction_result")).interaction_result.answer.action
    await provider.finish(invoke.invocation_id)
    final = await call.terminal()
    assert final.HasField("result")
    assert [e.sequence for e in call.all if not e.HasField("status")] == [1, 2, 3, 4]


async def test_a_dropped_caller_detaches_and_watch_call_replays_every_missed_event_once(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0, reattach_grace_seconds=30.0)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = await call.next("awaiting_interaction")
    call.cancel()
    await eventually(lambda: stack.app.broker.stats().get("callers_detached") == 1, what="detached")

    # Detached is not stopped: the form stays pending and an answer still reaches the provider.
    await stack.answer(awaiting.awaiting_interaction.interaction_id, accept_staging())
    delivered = (await provider.next("interaction_result")).interaction_result
    assert delivered.answer.action
    await provider.send(
        broker_pb2.ConnectRequest(
            progress=broker_pb2.InvocationProgress(invocation_id=invoke.invocation_id, progress=1, message="half")
        )
    )
    await provider.finish(invoke.invocation_id)
    await eventually(lambda: stack.app.broker.stats()["live_invocations"] == 0, what="settled")

    again = stack.watch(invoke.invocation_id, awaiting.resume_token)
    final = await again.terminal()
    assert final.HasField("result")
    assert _kinds(again.all) == ["interaction_settled", "progress", "result"]
    assert [e.sequence for e in again.all] == [3, 4, 5]
    assert stack.app.broker.stats().get("detached_stops", 0) == 0


async def test_watch_call_before_the_answer_reports_the_phase_then_follows_live(make_stack: StackFactory) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0, reattach_grace_seconds=30.0)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    accepted = await call.next("accepted")
    call.cancel()
    await eventually(lambda: stack.app.broker.stats().get("callers_detached") == 1, what="detached")
    await provider.ask(invoke.invocation_id)
    await eventually(lambda: len(stack.app.broker.awaiting_interaction_ids()) == 1, what="form pending")

    watch = stack.watch(invoke.invocation_id, accepted.resume_token)
    replayed = await watch.next("awaiting_interaction")
    assert replayed.sequence == 2
    status = (await watch.next("status")).status
    assert status.phase == broker_pb2.CALL_PHASE_AWAITING_INTERACTION
    assert status.interaction_id == replayed.awaiting_interaction.interaction_id
    await stack.answer(status.interaction_id, accept_staging())
    assert (await watch.next("interaction_settled")).sequence == 3
    await provider.next("interaction_result")
    await provider.finish(invoke.invocation_id)
    assert (await watch.terminal()).HasField("result")


async def test_watch_call_refuses_unknown_invocations_and_malformed_tokens(make_stack: StackFactory) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    cases = {
        ("inv_nothing", ""): grpc.StatusCode.NOT_FOUND,
        (invoke.invocation_id, "not-a-token"): grpc.StatusCode.INVALID_ARGUMENT,
        (invoke.invocation_id, "99"): grpc.StatusCode.INVALID_ARGUMENT,
    }
    for (invocation_id, token), code in cases.items():
        watch = stack.watch(invocation_id, token)
        async with asyncio.timeout(FRAME_TIMEOUT):
            await watch.done.wait()
        assert watch.error is not None, (invocation_id, token)
        assert watch.error.code() == code, (invocation_id, token, watch.error)
    await provider.finish(invoke.invocation_id)
    assert (await call.terminal()).HasField("result")


async def test_only_the_principal_that_started_a_call_may_reattach_and_to_another_it_is_not_found(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": "provider-token-1", "name": "provider", "roles": ["provider"]},
                    {"token": "caller-a-token-1", "name": "caller-a", "roles": ["caller"], "sessions": ["s1"]},
                    {"token": "caller-b-token-1", "name": "caller-b", "roles": ["caller"], "sessions": ["s1"]},
                    {"token": "broker-token-123", "name": "broker", "roles": ["broker"]},
                ]
            }
        )
    )
    stack = await make_stack(
        execution_timeout_seconds=30.0,
        auth_tokens_file=tokens,
        interaction_token="broker-token-123",
        interaction={"auth_tokens_file": tokens},
    )
    provider = Provider(stack.channel(stack.broker_target, "provider-token-1"), "mcp:examples", [deploy_tool()])
    stack.providers.append(provider)
    await provider.connect()
    caller_a = broker_pb2_grpc.CapabilityBrokerServiceStub(stack.channel(stack.broker_target, "caller-a-token-1"))
    call = Call(
        caller_a,
        broker_pb2.CallToolRequest(session_id="s1", turn_id="t", tool_use_id="u1", tool_name="examples:deploy"),
    )
    stack.calls.append(call)
    invoke = await provider.invoked()

    intruder = stack.watch(invoke.invocation_id, token="caller-b-token-1")
    async with asyncio.timeout(FRAME_TIMEOUT):
        await intruder.done.wait()
    assert intruder.error is not None
    assert intruder.error.code() == grpc.StatusCode.NOT_FOUND  # as for an unknown id: nothing confirms it exists
    unknown = stack.watch("inv_" + "A" * 16, token="caller-b-token-1")
    async with asyncio.timeout(FRAME_TIMEOUT):
        await unknown.done.wait()
    assert unknown.error is not None
    assert intruder.error.details() == (unknown.error.details() or "").replace("inv_" + "A" * 16, invoke.invocation_id)
    assert intruder.all == []

    owner = stack.watch(invoke.invocation_id, token="caller-a-token-1")
    assert (await owner.next("accepted")).accepted.invocation_id == invoke.invocation_id
    await provider.finish(invoke.invocation_id)
    assert (await owner.terminal()).HasField("result")
    assert (await call.terminal()).HasField("result")


async def test_the_same_call_id_twice_starts_one_invocation_and_both_streams_get_its_result(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0)
    provider = await stack.provider()
    first = stack.call(call_id="call-42", tool_use="tu-a")
    invoke = await provider.invoked()
    second = stack.call(call_id="call-42", tool_use="tu-a")
    assert (await second.next("accepted")).accepted.invocation_id == invoke.invocation_id
    await provider.finish(invoke.invocation_id)
    assert (await first.terminal()).HasField("result")
    assert (await second.terminal()).HasField("result")
    assert stack.app.broker.stats()["invocations_started"] == 1
    assert [f.WhichOneof("frame") for f in provider.received].count("invoke") == 1

    # After the result, the same id still names the same invocation (replayed, nothing re-run).
    third = stack.call(call_id="call-42", tool_use="tu-a")
    assert _kinds([*(await _all(third))]) == ["accepted", "result"]
    assert stack.app.broker.stats()["invocations_started"] == 1


async def test_a_call_id_reused_for_a_different_request_fails_invalid_request(make_stack: StackFactory) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0)
    provider = await stack.provider()
    first = stack.call(call_id="call-7")
    invoke = await provider.invoked()
    other = stack.call(call_id="call-7", arguments_json='{"artifact":"build-43"}')
    final = await other.terminal()
    assert final.failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST
    assert "call_id" in final.failure.message
    await provider.finish(invoke.invocation_id)
    assert (await first.terminal()).HasField("result")


@pytest.mark.parametrize("call_id", ["x" * 257, "bad\nid"])
async def test_a_malformed_call_id_fails_invalid_request(make_stack: StackFactory, call_id: str) -> None:
    stack = await make_stack(execution_timeout_seconds=30.0)
    await stack.provider()
    final = await stack.call(call_id=call_id).terminal()
    assert final.failure.code == broker_pb2.FAILURE_CODE_INVALID_REQUEST


async def _all(call: Call) -> list[broker_pb2.CallToolResponse]:
    await call.terminal()
    return call.all
