"""Race suite on the shared stack of real processes: one winner among conflicting answers, and no
cross-talk among many concurrent forms.

Sources: docs/design.md#lua-scripts (every transition is one Lua script, so concurrent answers have exactly
one winner), RFC criteria 5 and 8 (canonical answers, invocation binding).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from maka.interaction.v1 import interaction_pb2
from services.core.channels import open_channel
from services.core.status import error_from_rpc
from surfaces.common.interactions import AttachEvent, FormAnswered, FormSnapshot, Interactions
from tests.helpers.observed import Observed
from tests.helpers.waiting import eventually, none_while_unavailable
from tests.reliability.counting_server import digest
from tests.reliability.harness import ToolCall, answer, get_interaction, result_payload

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150), pytest.mark.asyncio(loop_scope="package")]

CONFLICTING = 50
CONCURRENT_CALLS = 200


async def _watch_answered(feed: AsyncIterator[AttachEvent], interaction_id: str) -> list[FormAnswered]:
    """The Answered event of ``interaction_id`` on a surface's feed (bounded by the caller)."""
    seen: list[FormAnswered] = []
    async for event in feed:
        if isinstance(event, FormAnswered) and event.interaction.interaction_id == interaction_id:
            seen.append(event)
            return seen
    return seen


async def test_fifty_conflicting_answers_from_two_surfaces_have_exactly_one_winner_everywhere(
    observed: Observed,
) -> None:
    session = "race-one"
    async with (
        open_channel(observed.interaction) as left,
        open_channel(observed.interaction) as right,
        Interactions.connect(observed.interaction) as left_surface,
        Interactions.connect(observed.interaction) as right_surface,
        ToolCall(observed.broker, "counter:ask", {"tag": "race-one"}, session=session) as call,
    ):
        interaction_id = await call.awaiting()
        feeds = [surface.attach([session]) for surface in (left_surface, right_surface)]
        for feed in feeds:  # both surfaces show the form before the race (and follow from that snapshot)
            first = await anext(feed)
            assert isinstance(first, FormSnapshot)
            assert interaction_id in [v.interaction_id for v in first.pending]
        watchers = [asyncio.create_task(_watch_answered(feed, interaction_id)) for feed in feeds]

        async def submit(i: int) -> str | None:
            channel = left if i % 2 else right
            try:
                await answer(observed.interaction, interaction_id, f"v{i}", submission_id=f"s{i}", channel=channel)
            except grpc.aio.AioRpcError as error:
                return error_from_rpc(error).reason
            return None

        outcomes = await asyncio.gather(*(submit(i) for i in range(CONFLICTING)))
        winners = [i for i, reason in enumerate(outcomes) if reason is None]
        assert len(winners) == 1, Counter(outcomes)
        assert Counter(outcomes) == Counter({None: 1, "ALREADY_SETTLED": CONFLICTING - 1})
        value = f"v{winners[0]}"

        record = await get_interaction(observed.interaction, interaction_id)
        assert record.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert record.answer.values["value"].string_value == value
        async with asyncio.timeout(30):
            seen = await asyncio.gather(*watchers)
        for events in seen:
            assert [e.interaction.proto.answer.values["value"].string_value for e in events] == [value]
        done = await call.terminal()
        assert result_payload(done)["digest"] == digest(value)
    retries = [c for c in observed.calls_of("race-one") if c["leg"] == "retry"]
    assert [c["value"] for c in retries] == [value]


async def _answer_retrying_unavailable(
    interaction_id: str, value: str, submission_id: str, channel: grpc.aio.Channel, observed: Observed
) -> None:
    """Answer like a surface does: UNAVAILABLE (a store call timed out under load) is retried with the same
    ``submission_id``, which makes the retry idempotent. Bounded by the caller's timeout."""
    await eventually(
        none_while_unavailable(
            lambda: answer(observed.interaction, interaction_id, value, submission_id=submission_id, channel=channel)
        ),
        timeout=120,
        interval=0.1,
        what=f"the answer {submission_id} committed",
    )


async def test_two_hundred_concurrent_calls_with_forms_each_complete_with_their_own_answer(
    observed: Observed,
) -> None:
    tags = [f"many-{i}" for i in range(CONCURRENT_CALLS)]
    async with open_channel(observed.broker) as broker, open_channel(observed.interaction) as interaction:

        async def one(tag: str) -> dict[str, object]:
            async with ToolCall(
                observed.broker, "counter:ask", {"tag": tag}, session="race-many", turn=tag, channel=broker
            ) as call:
                interaction_id = await call.awaiting(timeout=90)
                await _answer_retrying_unavailable(interaction_id, f"answer-of-{tag}", tag, interaction, observed)
                return result_payload(await call.terminal(timeout=90))

        async with asyncio.timeout(120):
            results = await asyncio.gather(*(one(tag) for tag in tags))
    assert results == [{"tag": tag, "action": "accept", "digest": digest(f"answer-of-{tag}")} for tag in tags]
    retries = {str(c["tag"]): c["value"] for c in observed.calls_of(*tags) if c["leg"] == "retry"}
    assert retries == {tag: f"answer-of-{tag}" for tag in tags}
