"""``drive_input_required`` (services/mcp_provider/manager.py), the MRTR loop with its I/O passed in: pure-logic
unit tests with scripted legs. The loop against real MCP servers is in ``test_manager.py``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult, InputResponse

from services.mcp_provider.errors import CallErrorCode, McpToolCallError
from services.mcp_provider.manager import drive_input_required

Sent = tuple[int, dict[str, InputResponse] | None, str | None]


class Script:
    """Legs answer from ``results`` in order; every leg, pause and round is recorded."""

    def __init__(self, results: Sequence[CallToolResult | InputRequiredResult], *, forms: bool) -> None:
        self.results = list(results)
        self.forms = forms
        self.sent: list[Sent] = []
        self.pauses: list[float] = []
        self.rounds: list[float] = []

    async def leg(
        self, retry: int, responses: dict[str, InputResponse] | None, state: str | None
    ) -> CallToolResult | InputRequiredResult:
        self.sent.append((retry, responses, state))
        return self.results.pop(0)

    async def answer(self, result: InputRequiredResult, received_at: float) -> dict[str, InputResponse] | None:
        self.rounds.append(received_at)
        return {"k": ElicitResult(action="decline")} if self.forms else None

    async def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def _drive(script: Script, *, max_rounds: int = 10) -> tuple[CallToolResult, int, int]:
    return await drive_input_required(
        script.leg,
        script.answer,
        script.pause,
        max_rounds=max_rounds,
        pacing_initial=0.05,
        pacing_max=0.25,
        clock=lambda: 1000.0,
    )


async def test_each_retry_carries_this_rounds_responses_and_the_exact_request_state_of_the_round() -> None:
    script = Script(
        [InputRequiredResult(request_state="s1"), InputRequiredResult(request_state="s2"), CallToolResult(content=[])],
        forms=True,
    )
    result, retries, forms = await _drive(script)
    assert (result.result_type, retries, forms) == ("complete", 2, 2)
    assert [(retry, state) for retry, _, state in script.sent] == [(0, None), (1, "s1"), (2, "s2")]
    assert script.sent[0][1] is None
    assert script.sent[1][1] == {"k": ElicitResult(action="decline")}
    assert script.rounds == [1000.0, 1000.0]
    assert script.pauses == []


async def test_state_only_rounds_pause_doubling_up_to_the_cap_and_send_no_responses() -> None:
    script = Script([InputRequiredResult(request_state="s")] * 4 + [CallToolResult(content=[])], forms=False)
    _, retries, forms = await _drive(script)
    assert (retries, forms) == (4, 0)
    assert script.pauses == [0.05, 0.1, 0.2, 0.25]
    assert all(responses is None for _, responses, _ in script.sent)


async def test_a_server_still_asking_after_the_round_cap_fails_rounds_exhausted_without_another_leg() -> None:
    script = Script([InputRequiredResult(request_state="s")] * 3, forms=True)
    with pytest.raises(McpToolCallError) as caught:
        await _drive(script, max_rounds=2)
    assert caught.value.code is CallErrorCode.ROUNDS_EXHAUSTED
    assert len(script.sent) == 3
    assert "s" not in caught.value.message.split()
