"""Issue 16 (protocol and form correctness), through the whole stack and every surface.

One real stack (``Stack`` processes as ``maka up`` starts them, with the web surface) runs the low-level
SDK fixture server (:mod:`tests.fixtures.mcp_servers.mrtr_server`, stdio behind the tee proxy) twice:
``fx`` with ``requestStateTtl`` 120 s and ``fxshort`` with :data:`SHORT_TTL` s. The TUI is driven by
Textual's pilot, the CLI runs as processes (``python -m surfaces.cli.main``), the web page in Chromium
(Playwright, marked ``browser``). Every wait is bounded; the "no retry" checks wait for a later marker
call on the same server's wire instead of sleeping.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from textual.widgets import Static

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from surfaces.common.interaction_client import InteractionClient
from surfaces.tui.app import MakaTui
from tests.acceptance.harness import Wire, acceptance_stack, tee_stdio, write_config
from tests.helpers.stack import answer
from tests.helpers.waiting import eventually
from tests.reliability.harness import ToolCall, get_interaction, wait_settled
from tests.surfaces.test_same_fixture import TIMEOUT_MS, StackThread, _first_pending, _maka, _settle

SHORT_TTL = 4.0
"""``requestStateTtl`` of ``fxshort``: short enough that a round runs out within the test."""
LONG_TTL = 120.0
"""``requestStateTtl`` of ``fx``."""
CR = interaction_pb2


class ReviewStack(StackThread):
    """The stack with ``fx`` and ``fxshort`` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.fx = Wire(directory / "fx.log")
        self.short = Wire(directory / "fxshort.log")

    def start(self) -> Any:
        self.thread.start()
        server = ("tests.fixtures.mcp_servers.mrtr_server", "--kind", "low")
        config = write_config(
            self.directory,
            {
                "fx": {**tee_stdio(self.fx.path, *server), "requestStateTtl": LONG_TTL},
                "fxshort": {**tee_stdio(self.short.path, *server), "requestStateTtl": SHORT_TTL},
            },
        )
        self._cm = acceptance_stack(self.directory, config, web=True)
        self.running = self.run(self._cm.__aenter__())
        return self.running


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewStack]:
    stack = ReviewStack(tmp_path_factory.mktemp("protocol-review"))
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch the machine's Chromium by path (never ``playwright install``)."""
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": ["--disable-gpu", "--disable-dev-shm-usage"],
    }


async def _nth_awaiting(call: ToolCall, n: int) -> str:
    def ids() -> list[str]:
        return [e.awaiting_interaction.interaction_id for e in call.events if e.HasField("awaiting_interaction")]

    await eventually(lambda: len(ids()) >= n or call.kinds()[-1:] in (["failure"], ["result"]), timeout=60)
    assert len(ids()) >= n, call.kinds()
    return ids()[n - 1]


async def _marker(wire: Wire, broker: str, tag: str) -> None:
    """Call ``echo`` with ``tag`` and wait until its leg is on ``wire``: everything sent before is logged."""
    async with ToolCall(broker, wire.path.stem + ":echo", {"marker": tag}, session=f"marker-{tag}") as call:
        final = await call.terminal(timeout=60)
    assert final.HasField("result"), final
    await wire.wait_tool_calls(1, "echo", marker=tag)


# --- finding 1: server-defined error codes -------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("code", [-32000, -32001])
async def test_a_server_defined_error_reaches_the_caller_with_its_message_and_keeps_the_connection(
    review: ReviewStack, code: int
) -> None:
    broker = review.endpoints.broker
    discovers = len(review.fx.requests("server/discover"))
    async with ToolCall(
        broker, "fx:server_error", {"code": code, "message": "disk quota exceeded"}, session=f"err{code}"
    ) as call:
        final = await call.terminal(timeout=60)

    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_SERVER_ERROR
    assert final.failure.message == f"MCP error {code}: disk quota exceeded"
    await _marker(review.fx, broker, f"after{code}")
    assert len(review.fx.requests("server/discover")) == discovers  # the server was never restarted


# --- finding 6: unknown resultType ----------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("result_type", ["task", "foo"])
async def test_an_unknown_result_type_fails_the_call_with_no_retry(review: ReviewStack, result_type: str) -> None:
    broker = review.endpoints.broker
    async with ToolCall(broker, "fx:odd_result", {"result_type": result_type}, session=f"odd-{result_type}") as call:
        final = await call.terminal(timeout=60)

    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_SERVER_ERROR
    assert f"unrecognised resultType '{result_type}'" in final.failure.message
    await _marker(review.fx, broker, f"odd-{result_type}")
    assert len(review.fx.tool_calls("odd_result", where={"result_type": result_type})) == 1


# --- finding 2: one round deadline, "form 1 of 2" ---------------------------------------------------


def _round_line(app: MakaTui) -> str:
    return str(app.query_one("#round", Static).render())


@pytest.mark.e2e
async def test_every_form_of_a_round_shows_its_position_and_the_one_round_deadline_in_the_tui_and_cli(
    review: ReviewStack,
) -> None:
    interaction, broker = review.endpoints.interaction, review.endpoints.broker
    session, state = "round-show", str(review.state_dir)
    before = time.time()
    async with ToolCall(broker, "fx:ask_round", {"n": 2, "tag": "show"}, session=session) as call:
        first = await get_interaction(interaction, await _nth_awaiting(call, 1))
        received = time.time()
        assert (first.round.position, first.round.size) == (1, 2)
        deadline = first.round.deadline.ToMilliseconds() / 1000
        assert before + LONG_TTL - 1 <= deadline <= received + LONG_TTL + 1
        assert first.expires_at.ToMilliseconds() <= first.round.deadline.ToMilliseconds()

        code, out, err = await _maka("pending", "--session", session, "--state-dir", state)
        assert code == 0, err
        assert "form 1 of 2 · the round ends " in out
        code, out, err = await _maka("pending", "--session", session, "--json", "--state-dir", state)
        [listed] = json.loads(out)
        assert listed["round"]["position"] == 1
        assert listed["round"]["size"] == 2
        assert listed["round"]["deadline"] is not None

        app = MakaTui(lambda: InteractionClient.connect(interaction), session_ids=[session])
        async with app.run_test(size=(140, 60)) as pilot:
            await _settle(pilot, lambda: app.selected_id == first.interaction_id, "form 1")
            assert _round_line(app).startswith("form 1 of 2 · the round ends ")
            await answer(
                interaction,
                first,
                form_pb2.ACTION_ACCEPT,
                {"ok": form_pb2.Value(boolean_value=True)},
                submission_id="r1",
            )
            second = await get_interaction(interaction, await _nth_awaiting(call, 2))
            await _settle(pilot, lambda: app.selected_id == second.interaction_id, "form 2")
            assert _round_line(app).startswith("form 2 of 2 · the round ends ")
        assert (second.round.position, second.round.size) == (2, 2)
        assert second.round.deadline == first.round.deadline  # one deadline for the whole round
        await answer(
            interaction, second, form_pb2.ACTION_ACCEPT, {"ok": form_pb2.Value(boolean_value=False)}, submission_id="r2"
        )
        final = await call.terminal(timeout=60)
    assert final.HasField("result"), final


@pytest.mark.e2e
async def test_a_form_whose_round_runs_out_closes_round_expired_and_no_retry_is_sent(review: ReviewStack) -> None:
    interaction, broker = review.endpoints.interaction, review.endpoints.broker
    async with ToolCall(broker, "fxshort:ask_round", {"n": 2, "tag": "expire"}, session="round-expire") as call:
        first = await get_interaction(interaction, await _nth_awaiting(call, 1))
        await answer(
            interaction, first, form_pb2.ACTION_ACCEPT, {"ok": form_pb2.Value(boolean_value=True)}, submission_id="e1"
        )
        second_id = await _nth_awaiting(call, 2)
        second = await get_interaction(interaction, second_id)
        assert second.expires_at == second.round.deadline  # the form wait (300 s) is cut to the round
        closed = await wait_settled(interaction, second_id, timeout=SHORT_TTL + 30)
        final = await call.terminal(timeout=30)

    assert closed.close_reason == CR.CLOSE_REASON_ROUND_EXPIRED
    assert final.HasField("failure"), final
    assert final.failure.code == broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
    assert "requestState" in final.failure.message
    await _marker(review.short, broker, "expire")
    assert len(review.short.tool_calls("ask_round", where={"tag": "expire"})) == 1  # no retry after the window


@pytest.mark.browser
def test_the_web_page_shows_form_1_of_2_and_the_round_deadline(page: Page, review: ReviewStack) -> None:
    session = "round-web"
    task = review.submit(_round_web_call(review, session))
    interaction_id = review.run(_first_pending(review, session))
    page.goto(review.endpoints.web)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    card = page.locator(f'article.card[data-id="{interaction_id}"]')
    expect(card.locator(".round")).to_have_text(
        re.compile(r"^Form 1 of 2 · answer all forms of this round by \S"), timeout=TIMEOUT_MS
    )
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    task.result(90)


async def _round_web_call(review: ReviewStack, session: str) -> None:
    async with ToolCall(review.endpoints.broker, "fx:ask_round", {"n": 2, "tag": "web"}, session=session) as call:
        second = await _nth_awaiting(call, 2)
        record = await get_interaction(review.endpoints.interaction, second)
        await answer(review.endpoints.interaction, record, form_pb2.ACTION_CANCEL, submission_id="w2")
        await call.terminal(timeout=60)
