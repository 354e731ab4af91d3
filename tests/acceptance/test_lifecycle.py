"""RFC acceptance criteria about Stop, the provider execution timer and closing every nested form,
through the whole stack (``Stack`` processes) with short timers.

The stack runs the broker with a 1.5 s provider execution timeout and a 5 s bound on one pending form
(``MAKA_EXECUTION_TIMEOUT_SECONDS``, ``MAKA_FORM_WAIT_SECONDS``), against three real SDK servers over
stdio behind the tee proxy: the bundled example (``examples``), the low-level fixture (``fx``) and
:mod:`tests.acceptance.timer_server` (``timer``: ``hang`` and ``ask_then_hang``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from tests.acceptance.harness import acceptance_stack, tee_stdio, write_config
from tests.acceptance.rogue_provider import RogueProvider
from tests.helpers.stack import RunningStack, answer, pending_forms
from tests.helpers.wire import Wire
from tests.reliability.harness import ToolCall, get_interaction, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

EXECUTION_TIMEOUT = 1.5
"""Seconds of the broker's provider execution timer in this module's stack."""
FORM_WAIT = 5.0
"""Seconds one pending form may wait in this module's stack."""

DEPLOY_VALUES = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}


@dataclass
class Timed:
    running: RunningStack
    examples: Wire
    timer: Wire

    @property
    def broker(self) -> str:
        return self.running.endpoints.broker

    @property
    def interaction(self) -> str:
        return self.running.endpoints.interaction


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def timed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Timed]:
    root = tmp_path_factory.mktemp("acceptance-lifecycle")
    examples, timer = Wire(root / "examples.log"), Wire(root / "timer.log")
    config = write_config(
        root,
        {
            "examples": tee_stdio(examples.path, "examples.deploy_server"),
            "timer": tee_stdio(timer.path, "tests.acceptance.timer_server"),
        },
    )
    env = {"MAKA_EXECUTION_TIMEOUT_SECONDS": str(EXECUTION_TIMEOUT), "MAKA_FORM_WAIT_SECONDS": str(FORM_WAIT)}
    async with acceptance_stack(root, config, env=env) as running:
        yield Timed(running, examples, timer)


def terminal_count(call: ToolCall) -> int:
    return sum(kind in ("result", "failure", "lost", "stopped") for kind in call.kinds())


async def stop(broker: str, request: broker_pb2.StopRequest) -> int:
    async with grpc.aio.insecure_channel(broker) as channel:
        response = await broker_pb2_grpc.CapabilityBrokerServiceStub(channel).Stop(request, timeout=10)
    return response.stopped_invocations


@pytest.mark.parametrize(
    "request_",
    [broker_pb2.StopRequest(all=True), broker_pb2.StopRequest(session_id="c07-turn", turn_id="turn-c07")],
    ids=["global-stop", "turn-stop"],
)
async def test_c07_stop_while_a_form_is_pending_sends_no_retry_and_leaves_nothing_pending(
    timed: Timed, request_: broker_pb2.StopRequest
) -> None:
    session = request_.session_id or "c07-global"
    artifact = f"c07-{session}"
    async with ToolCall(
        timed.broker, "examples:deploy", {"artifact": artifact}, session=session, turn="turn-c07"
    ) as call:
        interaction_id = await call.awaiting()
        assert await stop(timed.broker, request_) == 1
        final = await call.terminal()

    assert final.WhichOneof("event") == "stopped", call.kinds()
    assert terminal_count(call) == 1
    record = await wait_settled(timed.interaction, interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_CLOSED
    assert record.close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    assert not record.HasField("answer")  # no made-up cancel answer
    assert await pending_forms(timed.interaction, [session]) == []
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await answer(timed.interaction, record, form_pb2.ACTION_ACCEPT, DEPLOY_VALUES, submission_id="late")
    assert error_from_rpc(refused.value).reason == InteractionErrorReason.CLOSED
    # No retry reached the server, and the invocation is gone: a second Stop finds nothing to stop.
    assert await stop(timed.broker, request_) == 0
    # Settle window (docs/acceptance.md#protocol-and-form-correctness): a later call on the
    # same server connection is on the wire before the count is taken, so a late retry of the stopped call
    # would have shown up by then.
    marker = f"{artifact}-marker"
    async with ToolCall(timed.broker, "examples:deploy", {"artifact": marker}, session=f"{session}-marker") as later:
        await later.awaiting()
        await timed.examples.wait_tool_calls(1, "deploy", artifact=marker)
        await stop(timed.broker, broker_pb2.StopRequest(session_id=f"{session}-marker"))
        await later.terminal()
    assert len(timed.examples.tool_calls("deploy", where={"artifact": artifact})) == 1


async def test_c10_the_execution_timer_is_suspended_while_the_form_is_pending(timed: Timed) -> None:
    async with ToolCall(timed.broker, "examples:deploy", {"artifact": "c10"}, session="c10", turn="t-a") as call:
        interaction_id = await call.awaiting()
        # A concurrent Tool that never answers proves the execution timeout elapsed meanwhile.
        async with ToolCall(timed.broker, "timer:hang", {}, session="c10-hang", turn="t-b") as hang:
            timed_out = await hang.terminal(timeout=30)
        assert timed_out.WhichOneof("event") == "failure", hang.kinds()
        assert timed_out.failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
        form = await get_interaction(timed.interaction, interaction_id)
        assert form.state == interaction_pb2.INTERACTION_STATE_PENDING  # the deploy call outlived its execution timeout
        assert "failure" not in call.kinds()
        await answer(timed.interaction, form, form_pb2.ACTION_ACCEPT, DEPLOY_VALUES, submission_id="c10")
        final = await call.terminal(timeout=30)

    assert final.WhichOneof("event") == "result", call.kinds()
    assert terminal_count(call) == 1


async def test_c10_the_execution_timer_is_rearmed_fresh_after_the_answer(timed: Timed) -> None:
    async with ToolCall(timed.broker, "timer:ask_then_hang", {}, session="c10-rearm", turn="t-c") as call:
        interaction_id = await call.awaiting()
        async with ToolCall(timed.broker, "timer:hang", {}, session="c10-rearm-hang", turn="t-d") as hang:
            await hang.terminal(timeout=30)  # the form has now been pending longer than the timeout
        form = await get_interaction(timed.interaction, interaction_id)
        assert form.state == interaction_pb2.INTERACTION_STATE_PENDING
        await answer(timed.interaction, form, form_pb2.ACTION_ACCEPT, {"ok": form_pb2.Value(boolean_value=True)})
        answered_at = time.monotonic()
        final = await call.terminal(timeout=30)
        ended_after = time.monotonic() - answered_at

    assert final.WhichOneof("event") == "failure", call.kinds()
    assert final.failure.code == broker_pb2.FAILURE_CODE_EXECUTION_TIMEOUT
    # A fresh leg budget: not charged with the time the form was pending, and not unbounded.
    assert EXECUTION_TIMEOUT * 0.8 <= ended_after < EXECUTION_TIMEOUT + 10
    assert len(timed.timer.tool_calls("ask_then_hang")) == 2
    record = await get_interaction(timed.interaction, interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_ANSWERED


async def test_c16_an_unanswered_form_times_out_fails_the_call_and_closes_without_a_retry(timed: Timed) -> None:
    async with ToolCall(timed.broker, "examples:deploy", {"artifact": "c16-timeout"}, session="c16-t") as call:
        interaction_id = await call.awaiting()
        final = await call.terminal(timeout=FORM_WAIT + 30)

    assert final.WhichOneof("event") == "failure", call.kinds()
    assert final.failure.code == broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
    assert terminal_count(call) == 1
    record = await wait_settled(timed.interaction, interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_CLOSED
    assert record.close_reason == interaction_pb2.CLOSE_REASON_TIMED_OUT
    assert await pending_forms(timed.interaction, ["c16-t"]) == []
    assert len(timed.examples.tool_calls("deploy", where={"artifact": "c16-timeout"})) == 1


@pytest.mark.parametrize("settle", ["final-result", "failure"])
async def test_c16_a_provider_settling_while_its_form_is_pending_closes_the_form_invocation_settled(
    timed: Timed, settle: str
) -> None:
    session = f"c16-{settle}"
    async with (
        RogueProvider(
            timed.broker, provider_id=f"rogue-{settle}", claimed_server=f"rogue{settle[0]}", tool="ask"
        ) as rogue,
        ToolCall(timed.broker, f"rogue{settle[0]}:ask", {}, session=session) as call,
    ):
        invocation_id = (await rogue.next("invoke")).invoke.invocation_id
        await rogue.ask(invocation_id)
        interaction_id = await call.awaiting()
        await (rogue.finish(invocation_id) if settle == "final-result" else rogue.fail(invocation_id))
        final = await call.terminal()

    assert final.WhichOneof("event") == "failure", call.kinds()
    expected = (
        broker_pb2.FAILURE_CODE_INCONSISTENT_PROVIDER
        if settle == "final-result"
        else broker_pb2.FAILURE_CODE_SERVER_ERROR
    )
    assert final.failure.code == expected
    assert "result" not in call.kinds()  # never both outcomes
    assert terminal_count(call) == 1
    record = await wait_settled(timed.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED
    assert await pending_forms(timed.interaction, [session]) == []
