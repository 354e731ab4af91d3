"""The broker over gRPC with the real Interaction service and Redis, driven by synthetic providers
(real ``Connect`` clients on loopback), model-side callers (``CallTool``) and a surface (``Answer``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from tests.helpers.broker import (
    FRAME_TIMEOUT,
    BrokerStack,
    Call,
    Provider,
    StackFactory,
    accept_staging,
    deploy_tool,
    start_broker,
    start_interaction,
    stop_interaction,
)
from tests.helpers.waiting import eventually


async def test_one_form_round_trip_delivers_the_answer_to_the_provider_and_one_result_to_the_caller(
    stack: BrokerStack,
) -> None:
    provider = await stack.provider()
    call = stack.call()
    accepted = (await call.next("accepted")).accepted
    invoke = await provider.invoked()
    assert invoke.invocation_id == accepted.invocation_id
    assert invoke.tool_name == "deploy"
    assert invoke.arguments_json == '{"artifact":"build-42"}'

    await provider.ask(invoke.invocation_id, "provider-corr-7")
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    assert awaiting.field_count == 2
    assert awaiting.interaction_id != "provider-corr-7"

    [pending] = await stack.pending()
    assert pending.interaction_id == awaiting.interaction_id
    assert pending.binding.invocation_id == invoke.invocation_id
    assert pending.binding.connection_id == provider.registered.connection_id
    assert pending.binding.registration_id == provider.registered.registration_id
    assert pending.binding.provider_correlation_id == "provider-corr-7"
    assert pending.binding.tool_use_id == call.request.tool_use_id
    assert pending.form.requester.provider_id == "mcp:examples"  # trusted, not the forged one
    assert pending.form.requester.claimed_server == "examples"
    assert pending.form.requester.claimed_tool == "deploy"

    await stack.answer(awaiting.interaction_id, accept_staging())
    result = (await provider.next("interaction_result")).interaction_result
    assert result.invocation_id == invoke.invocation_id
    assert result.correlation_id == "provider-corr-7"
    assert result.interaction_id == awaiting.interaction_id
    assert result.close_reason == interaction_pb2.CLOSE_REASON_ANSWERED
    assert result.answer.values["environment"].string_value == "staging"
    assert result.answer.values["confirm"].boolean_value is True

    settled = (await call.next("interaction_settled")).interaction_settled
    assert settled.action == form_pb2.ACTION_ACCEPT
    assert "staging" not in str(settled)

    await provider.finish(invoke.invocation_id)
    final = await call.terminal()
    assert final.result.call_tool_result_json == '{"content":[{"type":"text","text":"ok"}]}'
    assert final.result.is_error is False
    assert stack.app.broker.stats()["live_invocations"] == 0


async def test_decline_and_cancel_answers_reach_the_provider_distinctly(stack: BrokerStack) -> None:
    provider = await stack.provider()
    for action in (form_pb2.ACTION_DECLINE, form_pb2.ACTION_CANCEL):
        call = stack.call()
        invoke = await provider.invoked()
        await provider.ask(invoke.invocation_id)
        awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
        await stack.answer(awaiting.interaction_id, form_pb2.Answer(action=action))
        result = (await provider.next("interaction_result")).interaction_result
        assert result.answer.action == action
        assert not result.answer.values
        await provider.finish(invoke.invocation_id)
        assert (await call.terminal()).HasField("result")


async def test_execution_timer_is_suspended_while_the_form_is_pending_and_rearmed_after(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=0.5)
    provider = await stack.provider("mcp:examples", [deploy_tool(), deploy_tool("ping")])
    paused = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await paused.next("awaiting_interaction")).awaiting_interaction

    # A control invocation started after the form opened runs out its whole budget ...
    control = stack.call("examples:ping")
    control_invoke = await provider.invoked()
    assert (await control.terminal()).failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    cancel = (await provider.next("cancel")).cancel
    assert cancel.invocation_id == control_invoke.invocation_id
    # ... while the one with the pending form has not timed out.
    assert not paused.done.is_set()
    assert [e.WhichOneof("event") for e in paused.all] == ["accepted", "awaiting_interaction"]

    await stack.answer(awaiting.interaction_id, accept_staging())
    await provider.next("interaction_result")
    settled_at = time.monotonic()
    assert (await paused.terminal()).failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    assert time.monotonic() - settled_at >= 0.45  # a fresh leg, not the remainder
    assert (await provider.next("cancel")).cancel.invocation_id == invoke.invocation_id


async def test_another_connection_cannot_answer_cancel_or_finish_an_invocation(stack: BrokerStack) -> None:
    owner = await stack.provider()
    intruder = await stack.provider("mcp:intruder", [deploy_tool("other", "intruder")])
    call = stack.call()
    invoke = await owner.invoked()
    await owner.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction

    iid = invoke.invocation_id
    await intruder.ask(iid, "steal")
    await intruder.send(broker_pb2.ConnectRequest(progress=broker_pb2.InvocationProgress(invocation_id=iid)))
    await intruder.send(
        broker_pb2.ConnectRequest(
            failure=broker_pb2.InvocationFailure(invocation_id=iid, code=broker_pb2.FAILURE_CODE_PROVIDER_ERROR)
        )
    )
    await intruder.finish(iid)
    reasons = [(await intruder.next("rejected")).rejected.reason for _ in range(4)]
    assert reasons == [broker_pb2.REJECT_REASON_CROSS_CONNECTION] * 4

    await stack.answer(awaiting.interaction_id, accept_staging())
    assert (await owner.next("interaction_result")).interaction_result.invocation_id == iid
    await owner.finish(iid)
    assert (await call.terminal()).HasField("result")
    assert not any(f.HasField("interaction_result") for f in intruder.received)
    assert stack.app.broker.stats()["rejected_frames.CROSS_CONNECTION"] == 4


async def test_duplicate_late_and_unknown_frames_are_rejected_and_change_nothing(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    await provider.ask(invoke.invocation_id, "again")
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_INTERACTION_ALREADY_PENDING
    await provider.send(broker_pb2.ConnectRequest(progress=broker_pb2.InvocationProgress(invocation_id="inv_nope")))
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_UNKNOWN_INVOCATION
    assert [p.interaction_id for p in await stack.pending()] == [awaiting.interaction_id]

    await stack.answer(awaiting.interaction_id, accept_staging())
    await provider.next("interaction_result")
    await provider.finish(invoke.invocation_id)
    await call.terminal()
    await provider.finish(invoke.invocation_id)
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_INVOCATION_SETTLED
    await provider.ask(invoke.invocation_id, "late")
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_INVOCATION_SETTLED
    assert await stack.pending() == []


async def test_stop_while_form_pending_leaves_nothing_pending_and_delivers_no_result(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call(session="s1", turn="t1")
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction

    response = await stack.broker.Stop(broker_pb2.StopRequest(all=True))
    assert response.stopped_invocations == 1
    assert (await call.terminal()).HasField("stopped")
    assert await stack.pending() == []
    assert (await stack.get(awaiting.interaction_id)).close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    assert stack.app.broker.stats()["live_invocations"] == 0
    cancel = (await provider.next("cancel")).cancel
    assert cancel.invocation_id == invoke.invocation_id

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stack.answer(awaiting.interaction_id, accept_staging())
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # Frames are ordered: the rejection of a later probe proves no interaction result came first.
    await provider.send(
        broker_pb2.ConnectRequest(progress=broker_pb2.InvocationProgress(invocation_id=invoke.invocation_id))
    )
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_INVOCATION_SETTLED
    assert not any(f.HasField("interaction_result") for f in provider.received)


async def test_stop_of_a_turn_leaves_other_turns_running(stack: BrokerStack) -> None:
    provider = await stack.provider()
    t1 = stack.call(turn="t1")
    await provider.invoked()
    t2 = stack.call(turn="t2")
    second = await provider.invoked()
    response = await stack.broker.Stop(broker_pb2.StopRequest(session_id="s1", turn_id="t1"))
    assert response.stopped_invocations == 1
    assert (await t1.terminal()).HasField("stopped")
    await provider.next("cancel")
    await provider.finish(second.invocation_id)
    assert (await t2.terminal()).HasField("result")


async def test_stop_with_a_bad_scope_is_invalid_argument(stack: BrokerStack) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await stack.broker.Stop(broker_pb2.StopRequest(session_id="s1", all=True))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_stop_of_one_invocation_stops_only_that_call_and_an_unknown_or_unseen_one_stops_none(
    stack: BrokerStack,
) -> None:
    provider = await stack.provider()
    first = stack.call(turn="t1")
    first_id = (await first.next("accepted")).accepted.invocation_id
    await provider.invoked()
    second = stack.call(turn="t1")
    second_id = (await second.next("accepted")).accepted.invocation_id
    await provider.invoked()

    assert (await stack.broker.Stop(broker_pb2.StopRequest(invocation_id="inv_nope"))).stopped_invocations == 0
    assert await stack.app.broker.stop(invocation_id=first_id, may_act=lambda _invocation: False) == 0
    with pytest.raises(grpc.aio.AioRpcError) as scoped:
        await stack.broker.Stop(broker_pb2.StopRequest(invocation_id=first_id, session_id="s1"))
    assert scoped.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    assert (await stack.broker.Stop(broker_pb2.StopRequest(invocation_id=first_id))).stopped_invocations == 1
    assert (await first.terminal()).HasField("stopped")
    assert (await provider.next("cancel")).cancel.invocation_id == first_id
    await provider.finish(second_id)
    assert (await second.terminal()).HasField("result"), "the same turn's other call was not stopped"


async def test_provider_killed_mid_form_loses_the_call_and_closes_the_form_provider_lost(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    provider.kill()
    assert (await call.terminal()).HasField("lost")
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    assert await stack.pending() == []


async def test_reregistration_mid_form_loses_the_old_call_and_the_new_registration_serves_new_calls(
    stack: BrokerStack,
) -> None:
    old = await stack.provider()
    call = stack.call()
    invoke = await old.invoked()
    await old.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction

    new = await stack.provider()
    assert new.registered.registration_id != old.registered.registration_id
    assert (await call.terminal()).HasField("lost")
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    assert (await old.next("cancel")).cancel.invocation_id == invoke.invocation_id
    await eventually(lambda: old.ended.is_set(), what="old stream ended")

    second = stack.call()
    routed = await new.invoked()
    assert routed.invocation_id != invoke.invocation_id
    await new.finish(routed.invocation_id)
    assert (await second.terminal()).HasField("result")
    assert not any(f.HasField("invoke") and f.invoke.invocation_id == routed.invocation_id for f in old.received)


async def test_final_result_while_form_pending_fails_inconsistent_and_closes_the_form(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    await provider.finish(invoke.invocation_id)
    final = await call.terminal()
    assert final.failure.code == broker_pb2.FAILURE_CODE_INCONSISTENT_PROVIDER
    assert not any(e.HasField("result") for e in call.all)
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED


async def test_provider_failure_while_form_pending_closes_the_form(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    await provider.send(
        broker_pb2.ConnectRequest(
            failure=broker_pb2.InvocationFailure(
                invocation_id=invoke.invocation_id, code=broker_pb2.FAILURE_CODE_CONNECTION_LOST, message="mcp gone"
            )
        )
    )
    assert (await call.terminal()).failure.code == broker_pb2.FAILURE_CODE_CONNECTION_LOST
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED


async def test_a_form_that_times_out_fails_interaction_timed_out_and_cancels_the_provider(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0, form_wait_seconds=0.3)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    assert (await call.terminal()).failure.code == broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
    settled = [e.interaction_settled for e in call.all if e.HasField("interaction_settled")]
    assert [s.close_reason for s in settled] == [interaction_pb2.CLOSE_REASON_TIMED_OUT]
    result = (await provider.next("interaction_result")).interaction_result
    assert result.close_reason == interaction_pb2.CLOSE_REASON_TIMED_OUT
    assert not result.HasField("answer")
    assert (await provider.next("cancel")).cancel.invocation_id == invoke.invocation_id
    assert (await stack.get(awaiting.interaction_id)).close_reason == interaction_pb2.CLOSE_REASON_TIMED_OUT


async def test_an_invalid_form_is_rejected_to_the_provider_and_the_invocation_continues(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    bad = form_pb2.Form(
        message="x",
        fields=[form_pb2.Field(name="n", label="N", number=form_pb2.NumberField(minimum=5, maximum=1))],
    )
    await provider.ask(invoke.invocation_id, form=bad)
    rejected = (await provider.next("rejected")).rejected
    assert rejected.reason == broker_pb2.REJECT_REASON_INVALID_FORM
    assert rejected.invocation_id == invoke.invocation_id
    await provider.finish(invoke.invocation_id)
    assert (await call.terminal()).HasField("result")
    assert await stack.pending() == []


async def test_a_caller_that_does_not_reattach_within_the_grace_is_stopped_and_its_form_closed(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0, reattach_grace_seconds=0.3)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    call.cancel()
    assert (await provider.next("cancel")).cancel.invocation_id == invoke.invocation_id
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_STOPPED
    assert stack.app.broker.stats()["detached_stops"] == 1


async def test_unknown_tool_fails_with_a_single_failure_event(stack: BrokerStack) -> None:
    await stack.provider()
    call = stack.call("examples:missing")
    final = await call.terminal()
    assert final.failure.code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL
    assert len(call.all) == 1


async def test_list_tools_names_qualified_tools_of_live_registrations(stack: BrokerStack) -> None:
    provider = await stack.provider("mcp:examples", [deploy_tool(), deploy_tool("ping")])
    tools = (await stack.broker.ListTools(broker_pb2.ListToolsRequest())).tools
    assert [t.qualified_name for t in tools] == ["examples:deploy", "examples:ping"]
    assert {t.provider_id for t in tools} == {"mcp:examples"}
    provider.kill()
    await eventually(lambda: stack.app.broker.stats()["live_registrations"] == 0, what="retired")
    assert list((await stack.broker.ListTools(broker_pb2.ListToolsRequest())).tools) == []


async def test_a_new_broker_epoch_closes_the_old_brokers_forms_and_fails_its_call_closed(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0, heartbeat_seconds=0.2)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    first_epoch = stack.app.host_link.epoch

    _, server, app = await start_broker(stack.interaction_target)
    try:
        assert app.host_link.epoch == (first_epoch or 0) + 1
        assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
        assert (await call.terminal()).failure.code == broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
        await eventually(lambda: stack.app.host_link.stale, what="old broker stale")
    finally:
        await server.stop()


async def test_hostlink_drop_resumes_the_same_epoch_and_delivers_an_answer_given_meanwhile(
    make_stack: StackFactory, redis_url: str
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    epoch = stack.app.host_link.epoch
    port = stack.interaction.port

    await stop_interaction(stack.interaction)
    await eventually(lambda: not stack.app.host_link.connected, what="link down")
    _, restarted = await start_interaction(redis_url, listen=f"127.0.0.1:{port}")
    stack.interaction = restarted
    await stack.answer(awaiting.interaction_id, accept_staging())
    result = (await provider.next("interaction_result")).interaction_result
    assert result.answer.values["environment"].string_value == "staging"
    assert stack.app.host_link.epoch == epoch
    assert stack.app.host_link.connects == 2
    await provider.finish(invoke.invocation_id)
    assert (await call.terminal()).HasField("result")


async def test_shutdown_settles_live_calls_lost_and_closes_pending_forms_host_restarted(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    await stack.broker_server.stop()
    assert (await call.terminal()).HasField("lost")
    assert (await stack.get(awaiting.interaction_id)).close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    await eventually(lambda: provider.ended.is_set(), what="provider stream ended")
    assert any(f.HasField("cancel") for f in provider.received)


async def test_a_silent_provider_is_retired_after_three_heartbeat_intervals(make_stack: StackFactory) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0, heartbeat_seconds=0.1)
    provider = await stack.provider()
    assert provider.registered.heartbeat_interval.ToMilliseconds() == 100
    call = stack.call()
    await provider.invoked()
    assert (await call.terminal()).HasField("lost")
    await eventually(lambda: provider.ended.is_set(), what="stream ended")
    assert stack.app.broker.stats()["providers_timed_out"] == 1


async def test_progress_reaches_the_caller_in_order_before_the_result(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.send(
        broker_pb2.ConnectRequest(
            progress=broker_pb2.InvocationProgress(
                invocation_id=invoke.invocation_id, progress=1, total=2, message="half"
            )
        )
    )
    progress = (await call.next("progress")).progress
    assert (progress.progress, progress.total, progress.message) == (1, 2, "half")
    await provider.finish(invoke.invocation_id)
    assert (await call.terminal()).HasField("result")


async def test_a_heartbeating_provider_stays_registered_while_a_silent_one_is_retired(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0, heartbeat_seconds=0.1)
    alive = await stack.provider("mcp:alive", [deploy_tool("ping", "alive")])
    silent = await stack.provider("mcp:silent", [deploy_tool("ping", "silent")])
    beats = 0
    while not silent.ended.is_set():
        await alive.send(broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat()))
        beats += 1
        with contextlib.suppress(TimeoutError):  # heartbeat pacing: wait on the event, bounded
            async with asyncio.timeout(0.05):
                await silent.ended.wait()
        assert beats < 200
    assert not alive.ended.is_set()
    assert [t.qualified_name for t in stack.app.broker.list_tools()] == ["alive:ping"]


async def test_callers_are_scoped_to_their_sessions_and_roles(make_stack: StackFactory, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": "provider-token-1", "name": "provider", "roles": ["provider"]},
                    {"token": "caller-a-token-1", "name": "caller-a", "roles": ["caller"], "sessions": ["s-a"]},
                    {"token": "caller-b-token-1", "name": "caller-b", "roles": ["caller"], "sessions": ["s-b"]},
                    {"token": "broker-token-123", "name": "broker", "roles": ["broker"]},
                    {"token": "surface-token-1", "name": "surface", "roles": ["surface"]},
                ]
            }
        )
    )
    stack = await make_stack(
        execution_timeout_seconds=5.0,
        auth_tokens_file=tokens,
        interaction_token="broker-token-123",
        interaction={"auth_tokens_file": tokens},
    )
    provider = Provider(stack.channel(stack.broker_target, "provider-token-1"), "mcp:examples", [deploy_tool()])
    stack.providers.append(provider)
    await provider.connect()
    caller = broker_pb2_grpc.CapabilityBrokerServiceStub(stack.channel(stack.broker_target, "caller-a-token-1"))

    own = Call(
        caller, broker_pb2.CallToolRequest(session_id="s-a", turn_id="t", tool_use_id="u1", tool_name="examples:deploy")
    )
    stack.calls.append(own)
    invoke = await provider.invoked()
    await provider.finish(invoke.invocation_id)
    assert (await own.terminal()).HasField("result")

    other = Call(
        caller, broker_pb2.CallToolRequest(session_id="s-b", turn_id="t", tool_use_id="u2", tool_name="examples:deploy")
    )
    stack.calls.append(other)
    async with asyncio.timeout(FRAME_TIMEOUT):
        await other.done.wait()
    assert other.error is not None
    assert other.error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert other.all == []

    assert (await caller.Stop(broker_pb2.StopRequest(session_id="s-a"))).stopped_invocations == 0

    # ``all`` from a scoped token stops the calls of its own sessions, never another token's
    other_caller = broker_pb2_grpc.CapabilityBrokerServiceStub(stack.channel(stack.broker_target, "caller-b-token-1"))
    theirs = Call(
        other_caller,
        broker_pb2.CallToolRequest(session_id="s-b", turn_id="t", tool_use_id="u3", tool_name="examples:deploy"),
    )
    stack.calls.append(theirs)
    await provider.invoked()
    mine = Call(
        caller, broker_pb2.CallToolRequest(session_id="s-a", turn_id="t", tool_use_id="u4", tool_name="examples:deploy")
    )
    stack.calls.append(mine)
    await provider.invoked()
    assert (await caller.Stop(broker_pb2.StopRequest(all=True))).stopped_invocations == 1
    assert (await mine.terminal()).HasField("stopped")
    assert not theirs.done.is_set()
    assert (await other_caller.Stop(broker_pb2.StopRequest(all=True))).stopped_invocations == 1
    assert (await theirs.terminal()).HasField("stopped")

    impostor = Provider(stack.channel(stack.broker_target, "caller-a-token-1"), "mcp:impostor", [deploy_tool()])
    stack.providers.append(impostor)
    with pytest.raises(ConnectionError):
        await impostor.connect()
    assert impostor.error is not None
    assert impostor.error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert stack.app.broker.stats()["live_registrations"] == 1


async def test_stop_while_the_hostlink_is_down_reports_stopped_only_after_the_close_is_durable(
    make_stack: StackFactory, redis_url: str
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    port = stack.interaction.port

    await stop_interaction(stack.interaction)
    await eventually(lambda: not stack.app.host_link.connected, what="link down")
    stopping = asyncio.ensure_future(stack.broker.Stop(broker_pb2.StopRequest(session_id="s1")))
    assert (await provider.next("cancel")).cancel.invocation_id == invoke.invocation_id
    # The invocation is stopped (the provider was cancelled) but not reported settled: its form is
    # still pending in Redis, so the terminal event waits for the durable close.
    assert not call.done.is_set()

    _, restarted = await start_interaction(redis_url, listen=f"127.0.0.1:{port}")
    stack.interaction = restarted
    assert (await call.terminal()).HasField("stopped")
    assert (await stopping).stopped_invocations == 1
    assert await stack.close_reason(awaiting.interaction_id) == interaction_pb2.CLOSE_REASON_STOPPED
    assert await stack.pending() == []
    assert not any(f.HasField("interaction_result") for f in provider.received)


async def test_heartbeats_renew_the_lease_of_a_pending_form_beyond_its_lease(make_stack: StackFactory) -> None:
    stack = await make_stack(execution_timeout_seconds=1.0, heartbeat_seconds=0.1, interaction={"lease_seconds": 0.4})
    provider = await stack.provider("mcp:examples", [deploy_tool(), deploy_tool("ping")])
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    # Keep the provider alive while a control call runs out its 1 s budget (2.5 leases).
    control = stack.call("examples:ping")
    await provider.invoked()
    while not control.done.is_set():
        await provider.send(broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat()))
        with contextlib.suppress(TimeoutError):  # heartbeat pacing: wait on the event, bounded
            async with asyncio.timeout(0.05):
                await control.done.wait()
    assert (await control.terminal()).failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    assert [p.interaction_id for p in await stack.pending()] == [awaiting.interaction_id]
    assert stack.app.host_link.heartbeats_acked >= 3
    await provider.next("cancel")  # the control call's
    await stack.answer(awaiting.interaction_id, accept_staging())
    assert (
        await provider.next("interaction_result")
    ).interaction_result.close_reason == interaction_pb2.CLOSE_REASON_ANSWERED


async def test_a_broker_started_before_the_interaction_service_begins_its_epoch_once_it_is_up(
    redis_url: str,
) -> None:
    from services.broker.main import build
    from services.broker.settings import Settings
    from services.core.serving import start_server

    _, probe = await start_interaction(redis_url)
    port = probe.port
    await stop_interaction(probe)
    app = await build(Settings(interaction_target=f"127.0.0.1:{port}", grace_seconds=0.5))
    broker = await start_server(app, app.settings)
    interaction = None
    try:
        assert not app.host_link.connected
        assert app.host_link.connects == 0
        _, interaction = await start_interaction(redis_url, listen=f"127.0.0.1:{port}")
        await app.host_link.wait_connected(FRAME_TIMEOUT)
        assert app.host_link.epoch == 1  # begun by this broker's first successful hello
        assert app.host_link.connects == 1
    finally:
        await broker.stop()
        if interaction is not None:
            await stop_interaction(interaction)


async def test_a_resume_refused_as_stale_fails_the_awaiting_call_closed_and_never_begins_an_epoch(
    make_stack: StackFactory, redis_url: str
) -> None:
    stack = await make_stack(execution_timeout_seconds=5.0)
    provider = await stack.provider("mcp:examples", [deploy_tool(), deploy_tool("ping")])
    call = stack.call()
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    await call.next("awaiting_interaction")
    port = stack.interaction.port

    await stop_interaction(stack.interaction)
    await eventually(lambda: not stack.app.host_link.connected, what="link down")
    # Meanwhile another broker begins epoch 2 through another replica over the same Redis.
    _, replica = await start_interaction(redis_url)
    _, other_broker, other = await start_broker(f"127.0.0.1:{replica.port}")
    try:
        assert other.host_link.epoch == 2
        _, restarted = await start_interaction(redis_url, listen=f"127.0.0.1:{port}")
        stack.interaction = restarted
        await eventually(lambda: stack.app.host_link.stale, what="resume refused as stale")
        assert stack.app.host_link.epoch == 1
        final = await call.terminal()
        assert final.failure.code == broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
        assert (await provider.next("cancel")).cancel.invocation_id == invoke.invocation_id
        # New forms on the stale broker fail closed instead of beginning a new epoch.
        second = stack.call("examples:ping")
        ping = await provider.invoked()
        await provider.ask(ping.invocation_id)
        assert (await second.terminal()).failure.code == broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
        assert other.host_link.epoch == 2
    finally:
        await other_broker.stop()
        await stop_interaction(replica)


async def test_a_field_less_confirmation_form_is_published_and_a_missing_form_is_rejected(stack: BrokerStack) -> None:
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    await provider.send(
        broker_pb2.ConnectRequest(
            interaction_request=broker_pb2.InteractionRequest(invocation_id=invoke.invocation_id, correlation_id="c")
        )
    )
    assert (await provider.next("rejected")).rejected.reason == broker_pb2.REJECT_REASON_INVALID_FORM
    await provider.ask(invoke.invocation_id, form=form_pb2.Form(message="Proceed with the deployment?"))
    awaiting = (await call.next("awaiting_interaction")).awaiting_interaction
    assert awaiting.field_count == 0
    await stack.answer(awaiting.interaction_id, form_pb2.Answer(action=form_pb2.ACTION_ACCEPT))
    assert (await provider.next("interaction_result")).interaction_result.answer.action == form_pb2.ACTION_ACCEPT


async def _health(stack: BrokerStack, service: str) -> int:
    """The broker's ``Health/Check`` status of ``service``."""
    stub = health_pb2_grpc.HealthStub(stack.channel(stack.broker_target))
    response = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)  # type: ignore[attr-defined]
    return int(response.status)


async def test_accepted_names_the_host_that_owns_the_call_and_its_advertised_address(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(
        interaction={"host_id": "team-a-host-0"},
        host_id="team-a-host-0",
        advertise_address="team-a-host-0.team-a-host:50052",
    )
    provider = await stack.provider()
    call = stack.call()
    accepted = (await call.next("accepted")).accepted
    assert (accepted.host_id, accepted.host_address) == ("team-a-host-0", "team-a-host-0.team-a-host:50052")
    await provider.finish((await provider.invoked()).invocation_id)
    assert (await call.terminal()).HasField("result")


async def test_a_draining_broker_stops_taking_new_calls_in_health_but_stays_live_and_serves_watch_call(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(drain_seconds=30)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    invocation_id = (await call.next("accepted")).accepted.invocation_id
    assert await _health(stack, "maka.broker.v1.CapabilityBrokerService") == health_pb2.HealthCheckResponse.SERVING

    stopping = asyncio.create_task(stack.broker_server.stop())

    async def not_taking_calls() -> bool:
        status = await _health(stack, "maka.broker.v1.CapabilityBrokerService")
        return status == health_pb2.HealthCheckResponse.NOT_SERVING

    await eventually(not_taking_calls, timeout=10, what="the new-calls health service NOT_SERVING")
    assert await _health(stack, "") == health_pb2.HealthCheckResponse.SERVING, "liveness stays SERVING"
    refused = await stack.call("examples:deploy").terminal()
    assert refused.failure.code == broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
    watcher = stack.watch(invocation_id)
    assert (await watcher.next("accepted")).accepted.invocation_id == invocation_id
    assert not stopping.done()

    await provider.finish(invoke.invocation_id)
    assert (await watcher.terminal()).HasField("result")
    async with asyncio.timeout(FRAME_TIMEOUT):
        await stopping


async def test_a_draining_broker_names_itself_draining_in_get_status_and_still_stops_a_call_it_owns(
    make_stack: StackFactory,
) -> None:
    stack = await make_stack(interaction={"host_id": "team-a-host-1"}, host_id="team-a-host-1", drain_seconds=30)
    provider = await stack.provider()
    call = stack.call()
    invocation_id = (await call.next("accepted")).accepted.invocation_id
    invoke = await provider.invoked()
    await provider.ask(invoke.invocation_id)
    await call.next("awaiting_interaction")
    status = await stack.broker.GetStatus(broker_pb2.GetStatusRequest())
    assert (status.host_id, status.takes_new_calls, status.draining) == ("team-a-host-1", True, False)

    stopping = asyncio.create_task(stack.broker_server.stop())

    async def draining() -> bool:
        return (await stack.broker.GetStatus(broker_pb2.GetStatusRequest())).draining

    await eventually(draining, timeout=10, what="GetStatus says draining")
    status = await stack.broker.GetStatus(broker_pb2.GetStatusRequest())
    assert (status.takes_new_calls, status.live_invocations, status.pending_forms) == (False, 1, 1)
    assert (await stack.broker.Stop(broker_pb2.StopRequest(invocation_id=invocation_id))).stopped_invocations == 1
    assert (await call.terminal()).HasField("stopped")
    assert await stack.pending() == []
    async with asyncio.timeout(FRAME_TIMEOUT):
        await stopping  # nothing left to drain


async def test_a_drain_waits_for_the_caller_of_a_settled_call_to_reattach_for_its_outcome(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="maka.broker.broker")
    stack = await make_stack(drain_seconds=30, reattach_grace_seconds=20)
    provider = await stack.provider()
    call = stack.call()
    invoke = await provider.invoked()
    invocation_id = (await call.next("accepted")).accepted.invocation_id
    call.cancel()  # the caller's stream dropped
    await eventually(lambda: stack.app.broker.stats().get("callers_detached") == 1, what="the caller detached")
    await provider.finish(invoke.invocation_id)
    await eventually(lambda: stack.app.broker.stats()["live_invocations"] == 0, what="the call settled")

    stopping = asyncio.create_task(stack.broker_server.stop())
    draining = await eventually(
        lambda: next((r for r in caplog.records if r.getMessage() == "broker_draining"), None), what="a drain"
    )
    assert getattr(draining, "live_invocations", None) == 0, "nothing live: the drain waits for the caller only"
    watcher = stack.watch(invocation_id)
    assert (await watcher.terminal()).HasField("result"), "the draining Host kept the outcome for its caller"
    async with asyncio.timeout(FRAME_TIMEOUT):
        await stopping  # and exited once it was delivered, long before the reattach grace
