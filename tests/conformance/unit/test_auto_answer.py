"""The automatic answering surface against the real Interaction service (real redis-server)."""

from __future__ import annotations

import asyncio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from surfaces.common.interactions import Interactions, InteractionView
from tests.conformance.client.auto_answer import AutoAnswerer
from tests.helpers.waiting import eventually
from tests.surfaces.helpers import deploy_form, interaction_service


def _value(answer: form_pb2.Answer, name: str) -> object:
    value = answer.values[name]
    kind = value.WhichOneof("kind")
    if kind == "string_list_value":
        return list(value.string_list_value.values)
    return getattr(value, kind or "string_value")


async def test_forms_pending_before_and_opened_after_attach_are_accepted_with_defaults(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        before = await live.link.open(deploy_form("before"), session_id="s-auto")
        client = Interactions.connect(live.address)
        answerer = AutoAnswerer(client, ["s-auto"])
        task = asyncio.create_task(answerer.run())
        try:
            await answerer.wait_subscribed()
            after = await live.link.open(deploy_form("after"), session_id="s-auto")
            other = await live.link.open(deploy_form("other session"), session_id="s-other")

            await eventually(lambda: len(answerer.answered) == 2, what="both forms answered")
            assert set(answerer.answered) == {before.interaction_id, after.interaction_id}
            assert answerer.failures == []
            for interaction_id in (before.interaction_id, after.interaction_id):
                view = await client.get(interaction_id)
                assert view.proto.state == interaction_pb2.INTERACTION_STATE_ANSWERED
                assert view.proto.answer.action == form_pb2.ACTION_ACCEPT
                assert _value(view.proto.answer, "environment") == "staging"
            assert (await client.get(other.interaction_id)).proto.state == interaction_pb2.INTERACTION_STATE_PENDING
        finally:
            task.cancel()
            await client.close()


async def test_a_gated_form_stays_pending_until_the_gate_opens(redis_url: str) -> None:
    release = asyncio.Event()
    gated: list[str] = []

    async def gate(view: InteractionView) -> None:
        gated.append(view.interaction_id)
        await release.wait()

    async with interaction_service(redis_url) as live:
        client = Interactions.connect(live.address)
        answerer = AutoAnswerer(client, ["s-gate"], gate=gate)
        task = asyncio.create_task(answerer.run())
        try:
            await answerer.wait_subscribed()
            opened = await live.link.open(deploy_form(), session_id="s-gate")
            await eventually(lambda: gated == [opened.interaction_id], what="the gate to be reached")
            assert (await client.get(opened.interaction_id)).proto.state == interaction_pb2.INTERACTION_STATE_PENDING

            release.set()
            await eventually(lambda: answerer.answered == [opened.interaction_id], what="the gated form answered")
            assert (await client.get(opened.interaction_id)).proto.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        finally:
            task.cancel()
            await client.close()
