"""The TUI following a pool of Hosts (``maka tui --hosts '*'``): one real Interaction service serves two Hosts, each
with its own broker link; the TUI lists the forms of both, each entry naming its Host, and an answer commits on the
form's own Host (docs/design.md#surfaces-follow-the-pool)."""

from __future__ import annotations

import uuid

from maka_client import ALL_HOSTS, ReattachPolicy
from services.core.form import Action, Answer
from surfaces.common.interactions import Interactions, InteractionState
from surfaces.tui.app import MakaTui
from tests.helpers.tui import settle
from tests.surfaces.helpers import BrokerLink, deploy_form, interaction_service, screen_text


async def test_the_tui_lists_the_forms_of_two_hosts_with_their_host_and_answers_each_there(redis_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    first, second = f"tui-a-{tag}", f"tui-b-{tag}"
    async with interaction_service(redis_url, host_id=first, host_ids=f"{first},{second}", link_host_id=first) as live:
        async with BrokerLink(live.channel, host_id=second) as other:
            on_first = await live.link.open(deploy_form("on the first Host"), session_id="s1")
            on_second = await other.open(deploy_form("on the second Host"), session_id="s2")
            app = MakaTui(
                lambda: Interactions.connect(
                    live.address, pool=(ALL_HOSTS,), reattach=ReattachPolicy(initial_delay=0.05, max_delay=0.2)
                ),
                show_hosts=True,
            )
            async with app.run_test(size=(140, 90)) as pilot:
                await settle(pilot, lambda: len(app.pending) == 2, "the forms of both Hosts")
                assert {i: v.host_id for i, v in app.pending.items()} == {
                    on_first.interaction_id: first,
                    on_second.interaction_id: second,
                }
                text = screen_text(app)
                assert f"· on {first}" in text  # each entry names its Host after its time left
                assert f"· on {second}" in text
                shown = app.selected_id
                assert shown in app.pending
                await pilot.click("#decline")
                await settle(pilot, lambda: shown not in app.pending, "the declined form to leave")
                await pilot.click("#decline")
                await settle(pilot, lambda: not app.pending, "the second declined form to leave")
            assert (await live.link.next_settled()).interaction_id == on_first.interaction_id
            assert (await other.next_settled()).interaction_id == on_second.interaction_id
        async with Interactions.connect(live.address, pool=(ALL_HOSTS,)) as client:
            for interaction_id in (on_first.interaction_id, on_second.interaction_id):
                stored = await client.get(interaction_id)
                assert stored.state is InteractionState.ANSWERED
                assert stored.answer == Answer(Action.DECLINE)
