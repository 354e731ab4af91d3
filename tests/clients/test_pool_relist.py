"""A Python ``SurfaceClient`` following every Host its token may use (``pool=["*"]``) picks up a Host added by a
scale-out (docs/design.md#surfaces-follow-the-pool): the Interaction tier restarts serving one more Host (as a
rollout of the tier does), the client's streams of the known Hosts resume without a new snapshot, and its next
``ListHosts`` attaches to the new Host, whose forms then arrive on the same merged stream."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from maka_client import ALL_HOSTS, FormEvent, FormOpened, FormSnapshot, ReattachPolicy, SurfaceClient
from tests.surfaces.helpers import BrokerLink, deploy_form, free_port, interaction_service

WAIT = 30.0


async def test_a_host_added_to_the_tier_joins_the_pool_of_a_surface_already_following_it(redis_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    first, added = f"relist-a-{tag}", f"relist-b-{tag}"
    port = free_port()
    client = SurfaceClient(
        f"127.0.0.1:{port}",
        pool=[ALL_HOSTS],
        pool_relist_seconds=0.2,
        reattach=ReattachPolicy(initial_delay=0.05, max_delay=0.2),
    )
    events: asyncio.Queue[FormEvent] = asyncio.Queue()

    async def follow() -> None:
        async with contextlib.aclosing(client.attach()) as stream:
            async for event in stream:
                await events.put(event)

    async def next_of(*kinds: type) -> FormEvent:
        async with asyncio.timeout(WAIT):
            while True:
                event = await events.get()
                if isinstance(event, kinds):
                    return event

    following: asyncio.Task[None] | None = None
    try:
        async with interaction_service(redis_url, port=port, host_id=first, link_host_id=first) as live:
            following = asyncio.create_task(follow())
            snapshot = await next_of(FormSnapshot)
            assert isinstance(snapshot, FormSnapshot)
            assert snapshot.host_id == first
            epoch = live.link.epoch
        tier = f"{first},{added}"
        async with (
            interaction_service(
                redis_url, port=port, host_id=first, host_ids=tier, link_host_id=first, resume_epoch=epoch
            ) as again,
            BrokerLink(again.channel, host_id=added) as added_broker,
        ):
            joined = await next_of(FormSnapshot)
            assert isinstance(joined, FormSnapshot)
            assert joined.host_id == added, "the known Host resumed without a snapshot; the new one starts with one"
            on_added = await added_broker.open(deploy_form("on the added Host"), session_id="s1")
            opened = await next_of(FormOpened)
            assert isinstance(opened, FormOpened)
            assert (opened.form.interaction_id, opened.form.host_id) == (on_added.interaction_id, added)
            assert sorted(await client.hosts()) == sorted([first, added])
            await _stop(following)  # the surface leaves before the tier stops
    finally:
        await _stop(following)
        await client.close()


async def _stop(task: asyncio.Task[None] | None) -> None:
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
