"""A surface following the pool across a Host's rolling restart (docs/design.md#surfaces-follow-the-pool).

The stack as ``maka up`` runs it (real Redis, Interaction service, broker with a 60 s drain, MCP provider and the
example server), its Interaction service serving a second Host whose broker is this test's ``HostLink``. A
:class:`maka_client.SurfaceClient` follows the pool (``*``): while the real Host drains (SIGTERM), its pending form
is still listed and is answered through the pool, the call finishes with the Tool's result, the Host starts again
under a new epoch and its next form arrives on the same pool stream. Across the rollout no form is shown twice,
the answered form is simply settled (never closed ``host_restarted``) and the other Host's form is untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc.aio
import pytest

from maka_client import ALL_HOSTS, FormAnswered, FormClosed, FormEvent, FormOpened, FormSnapshot, SurfaceClient
from services.core.healthcheck import serving
from stack.topology import Stack
from tests.helpers.stack import call_tool, result_text, running_stack
from tests.helpers.waiting import eventually
from tests.surfaces.helpers import BrokerLink, deploy_form

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

WAIT = 60.0


class PoolFeed:
    """Every event of one pool ``attach`` stream, and the forms it shows (id → Host), in arrival order."""

    def __init__(self) -> None:
        self.events: list[FormEvent] = []
        self.appearances: dict[str, int] = {}
        """How many times each form was shown as new (in a snapshot or an ``opened`` event)."""
        self.shown: dict[str, str] = {}
        self._changed = asyncio.Condition()

    async def follow(self, client: SurfaceClient) -> None:
        async with contextlib.aclosing(client.attach()) as stream:
            async for event in stream:
                forms = event.pending if isinstance(event, FormSnapshot) else ()
                if isinstance(event, FormOpened):
                    forms = (event.form,)
                for form in forms:
                    self.appearances[form.interaction_id] = self.appearances.get(form.interaction_id, 0) + 1
                    self.shown[form.interaction_id] = form.host_id
                if isinstance(event, FormAnswered | FormClosed):
                    self.shown.pop(event.form.interaction_id, None)
                async with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()

    async def until(self, condition: Callable[[], object], what: str) -> None:
        try:
            async with asyncio.timeout(WAIT), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            raise AssertionError(f"not within {WAIT:g} s: {what}") from None

    def of(self, interaction_id: str, kind: type[FormAnswered] | type[FormClosed]) -> list[FormEvent]:
        return [e for e in self.events if isinstance(e, kind) and e.form.interaction_id == interaction_id]


def _one_new(feed: PoolFeed, host: str, known: set[str]) -> str | None:
    fresh = [i for i, h in feed.shown.items() if h == host and i not in known]
    return fresh[0] if fresh else None


async def test_a_pool_surface_answers_a_draining_hosts_form_and_shows_nothing_twice_across_the_rollout(
    tmp_path: Path,
) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    pool_env = {Stack.INTERACTION: {"MAKA_HOST_IDS": f"local,{other}"}}
    async with running_stack(
        tmp_path, extra_env={"MAKA_DRAIN_SECONDS": "60"}, child_env=pool_env, stop_grace=90
    ) as running:
        endpoints = running.endpoints
        async with (
            grpc.aio.insecure_channel(endpoints.interaction) as channel,
            BrokerLink(channel, host_id=other) as other_broker,
            SurfaceClient(endpoints.interaction, pool=[ALL_HOSTS]) as surface,
        ):
            elsewhere = (await other_broker.open(deploy_form("on the other Host"), session_id="default")).interaction_id
            feed = PoolFeed()
            following = asyncio.create_task(feed.follow(surface))
            try:
                call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-7"}))
                await feed.until(lambda: _one_new(feed, "local", set()), "the real Host's form")
                drained = _one_new(feed, "local", set())
                assert drained is not None
                assert feed.shown[elsewhere] == other

                restart = asyncio.create_task(running.stack.restart_host())

                async def stopped_serving() -> bool:
                    return not await serving(endpoints.broker, "maka.broker.v1.CapabilityBrokerService", timeout=1.0)

                await eventually(stopped_serving, timeout=30, interval=0.05, what="the broker draining")
                listed = {f.interaction_id: f.host_id for f in await surface.pending()}
                assert listed == {drained: "local", elsewhere: other}, "the draining Host's form is still listed"
                answered = await surface.answer(drained, "accept", {"environment": "staging", "confirm": True})
                assert (answered.host_id, answered.state) == ("local", "answered")
                assert result_text(await asyncio.wait_for(call, WAIT)) == "Deployed build-7 to staging."
                await asyncio.wait_for(restart, 120)
                assert await running.stack.wait_for_tools() == set()

                # the Host is back under a new epoch: its next form arrives on the same pool stream
                after = asyncio.create_task(
                    call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-8"}, tool_use_id="use-2")
                )
                await feed.until(lambda: _one_new(feed, "local", {drained}), "the restarted Host's form")
                fresh = _one_new(feed, "local", {drained})
                assert fresh is not None
                await surface.answer(fresh, "decline")
                await asyncio.wait_for(after, WAIT)
                await feed.until(lambda: fresh not in feed.shown, "the declined form to leave")
            finally:
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following

    assert feed.appearances == {elsewhere: 1, drained: 1, fresh: 1}, "no form shown twice across the rollout"
    assert len(feed.of(drained, FormAnswered)) == 1
    assert feed.of(drained, FormClosed) == [], "an answered form of a drained Host is settled, not closed"
    assert feed.of(elsewhere, FormAnswered) == feed.of(elsewhere, FormClosed) == []
    assert feed.shown == {elsewhere: other}
