"""A server's errors, its result types and its round deadlines, through the whole stack and every surface
(docs/acceptance.md#protocol-and-form-correctness).

One real stack (:class:`tests.surfaces.fixture_server_stack.FixtureServerStack`: ``maka up``'s processes with the
web surface, the low-level SDK fixture server twice, ``fx`` and ``fxshort``):

- a server-defined JSON-RPC error code reaches the caller with its message and the connection stays;
- a ``resultType`` other than ``complete`` fails the call and no retry is sent;
- every form of a round shows its position and the one round deadline (TUI, CLI, web page), and a form still
  open when the round runs out closes ``round_expired`` with no retry;
- an answer committed while the provider is frozen, which then dies, never reaches the replacement provider
  (RFC criterion 8).

The TUI is driven by Textual's pilot, the CLI runs as processes (``python -m surfaces.cli.main``), the web page in
Chromium (Playwright, marked ``browser``). Every wait is bounded; the "no retry" checks wait for a later marker
call on the same server's wire instead of sleeping.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest
from playwright.sync_api import Page, expect
from textual.widgets import Static

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from surfaces.common.interactions import Interactions
from surfaces.tui.app import MakaTui
from tests.helpers.stack import answer
from tests.helpers.tui import settle
from tests.helpers.waiting import eventually
from tests.reliability.harness import ToolCall, get_interaction, wait_settled
from tests.surfaces.acceptance_stack import TIMEOUT_MS, first_pending, run_maka
from tests.surfaces.fixture_server_stack import (
    LONG_TTL,
    SHORT_TTL,
    FixtureServerStack,
    marker_call,
    nth_awaiting,
)

# --- server-defined error codes -----------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("code", [-32000, -32001])
async def test_a_server_defined_error_reaches_the_caller_with_its_message_and_keeps_the_connection(
    fx_stack: FixtureServerStack, code: int
) -> None:
    broker = fx_stack.endpoints.broker
    discovers = len(fx_stack.fx.requests("server/discover"))
    async with ToolCall(
        broker, "fx:server_error", {"code": code, "message": "disk quota exceeded"}, session=f"err{code}"
    ) as call:
        final = await call.terminal(timeout=60)

    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_SERVER_ERROR
    assert final.failure.message == f"MCP error {code}: disk quota exceeded"
    await marker_call(fx_stack.fx, broker, f"after{code}")
    assert len(fx_stack.fx.requests("server/discover")) == discovers  # the server was never restarted


# --- an unknown resultType ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("result_type", ["task", "foo"])
async def test_an_unknown_result_type_fails_the_call_with_no_retry(
    fx_stack: FixtureServerStack, result_type: str
) -> None:
    broker = fx_stack.endpoints.broker
    async with ToolCall(broker, "fx:odd_result", {"result_type": result_type}, session=f"odd-{result_type}") as call:
        final = await call.terminal(timeout=60)

    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_SERVER_ERROR
    assert f"unrecognised resultType '{result_type}'" in final.failure.message
    await marker_call(fx_stack.fx, broker, f"odd-{result_type}")
    assert len(fx_stack.fx.tool_calls("odd_result", where={"result_type": result_type})) == 1


# --- one round deadline, "form 1 of 2" --------------------------------------------------------------


def _round_line(app: MakaTui) -> str:
    return str(app.query_one("#round", Static).render())


@pytest.mark.e2e
async def test_every_form_of_a_round_shows_its_position_and_the_one_round_deadline_in_the_tui_and_cli(
    fx_stack: FixtureServerStack,
) -> None:
    interaction, broker = fx_stack.endpoints.interaction, fx_stack.endpoints.broker
    session, state = "round-show", str(fx_stack.state_dir)
    before = time.time()
    async with ToolCall(broker, "fx:ask_round", {"n": 2, "tag": "show"}, session=session) as call:
        first = await get_interaction(interaction, await nth_awaiting(call, 1))
        received = time.time()
        assert (first.round.position, first.round.size) == (1, 2)
        deadline = first.round.deadline.ToMilliseconds() / 1000
        assert before + LONG_TTL - 1 <= deadline <= received + LONG_TTL + 1
        assert first.expires_at.ToMilliseconds() <= first.round.deadline.ToMilliseconds()

        code, out, err = await run_maka("pending", "--session", session, "--state-dir", state)
        assert code == 0, err
        assert "form 1 of 2 · the round ends " in out
        code, out, err = await run_maka("pending", "--session", session, "--json", "--state-dir", state)
        [listed] = json.loads(out)
        assert listed["round"]["position"] == 1
        assert listed["round"]["size"] == 2
        assert listed["round"]["deadline"] is not None

        app = MakaTui(lambda: Interactions.connect(interaction), session_ids=[session])
        async with app.run_test(size=(140, 60)) as pilot:
            await settle(pilot, lambda: app.selected_id == first.interaction_id, "form 1", timeout=30)
            assert _round_line(app).startswith("form 1 of 2 · the round ends ")
            await answer(
                interaction,
                first,
                form_pb2.ACTION_ACCEPT,
                {"ok": form_pb2.Value(boolean_value=True)},
                submission_id="r1",
            )
            second = await get_interaction(interaction, await nth_awaiting(call, 2))
            await settle(pilot, lambda: app.selected_id == second.interaction_id, "form 2", timeout=30)
            assert _round_line(app).startswith("form 2 of 2 · the round ends ")
        assert (second.round.position, second.round.size) == (2, 2)
        assert second.round.deadline == first.round.deadline  # one deadline for the whole round
        await answer(
            interaction, second, form_pb2.ACTION_ACCEPT, {"ok": form_pb2.Value(boolean_value=False)}, submission_id="r2"
        )
        final = await call.terminal(timeout=60)
    assert final.HasField("result"), final


@pytest.mark.e2e
async def test_a_form_whose_round_runs_out_closes_round_expired_and_no_retry_is_sent(
    fx_stack: FixtureServerStack,
) -> None:
    interaction, broker = fx_stack.endpoints.interaction, fx_stack.endpoints.broker
    async with ToolCall(broker, "fxshort:ask_round", {"n": 2, "tag": "expire"}, session="round-expire") as call:
        first = await get_interaction(interaction, await nth_awaiting(call, 1))
        await answer(
            interaction, first, form_pb2.ACTION_ACCEPT, {"ok": form_pb2.Value(boolean_value=True)}, submission_id="e1"
        )
        second_id = await nth_awaiting(call, 2)
        second = await get_interaction(interaction, second_id)
        assert second.expires_at == second.round.deadline  # the form wait (300 s) is cut to the round
        closed = await wait_settled(interaction, second_id, timeout=SHORT_TTL + 30)
        final = await call.terminal(timeout=30)

    assert closed.close_reason == interaction_pb2.CLOSE_REASON_ROUND_EXPIRED
    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
    assert "requestState" in final.failure.message
    await marker_call(fx_stack.short, broker, "expire")
    assert len(fx_stack.short.tool_calls("ask_round", where={"tag": "expire"})) == 1  # no retry after the window


@pytest.mark.browser
def test_the_web_page_shows_form_1_of_2_and_the_round_deadline(page: Page, fx_stack: FixtureServerStack) -> None:
    session = "round-web"
    task = fx_stack.submit(_round_web_call(fx_stack, session))
    interaction_id = fx_stack.run(first_pending(fx_stack, session))
    page.goto(fx_stack.endpoints.web)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    card = page.locator(f'article.card[data-id="{interaction_id}"]')
    expect(card.locator(".round")).to_have_text(
        re.compile(r"^Form 1 of 2 · answer all forms of this round by \S"), timeout=TIMEOUT_MS
    )
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    task.result(90)


async def _round_web_call(fx_stack: FixtureServerStack, session: str) -> None:
    async with ToolCall(fx_stack.endpoints.broker, "fx:ask_round", {"n": 2, "tag": "web"}, session=session) as call:
        second = await nth_awaiting(call, 2)
        record = await get_interaction(fx_stack.endpoints.interaction, second)
        await answer(fx_stack.endpoints.interaction, record, form_pb2.ACTION_CANCEL, submission_id="w2")
        await call.terminal(timeout=60)


# --- RFC criterion 8: a committed answer that was never delivered -------------------------------------


@pytest.mark.e2e
async def test_c08_an_answer_committed_while_the_provider_is_frozen_never_reaches_the_replacement(
    fx_stack: FixtureServerStack,
) -> None:
    interaction, broker = fx_stack.endpoints.interaction, fx_stack.endpoints.broker
    stack = fx_stack.running.stack if fx_stack.running is not None else None
    assert stack is not None
    seen = len(stack.history)  # read, not subscribed: the stack's events are emitted on another thread's loop
    canary = "Canary-undelivered-7f3a"
    async with ToolCall(broker, "fx:ask", {"note": "c08-undelivered"}, session="c08-u") as call:
        form_id = await call.awaiting()
        pid = stack.supervisor.pid("provider")
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # the provider's stream stays open but nothing is read or sent
        try:
            record = await get_interaction(interaction, form_id)
            committed = await answer(
                interaction, record, form_pb2.ACTION_ACCEPT, {"name": form_pb2.Value(string_value=canary)}
            )
            assert committed.state == interaction_pb2.INTERACTION_STATE_ANSWERED  # committed in the Interaction service
        finally:
            os.kill(pid, signal.SIGKILL)  # ... and the provider dies before it could deliver it
        final = await call.terminal(timeout=60)
    assert final.HasField("lost"), call.kinds()  # outcome unknown, never a made-up result
    await eventually(
        lambda: any(e.kind == "ready" and e.name == "provider" for e in stack.history[seen:]),
        what="the replacement provider",
        timeout=90,
    )
    assert await stack.wait_for_tools() == set()  # the replacement provider registered fx and fxshort again
    await marker_call(fx_stack.fx, broker, "c08-undelivered")  # the replacement provider runs calls on fx again
    assert len(fx_stack.fx.tool_calls("ask", where={"note": "c08-undelivered"})) == 1
    assert not [line for direction, line in fx_stack.fx.raw() if direction == "C->S" and canary in line]
    assert (await get_interaction(interaction, form_id)).state == interaction_pb2.INTERACTION_STATE_ANSWERED
