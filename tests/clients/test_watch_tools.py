"""``BrokerClient.watch_tools`` (clients/python/src/maka_client/broker.py) against a real broker and Interaction
service on loopback (the client behind a TCP proxy) with synthetic providers (real ``Connect`` clients): the
listing, one listing per change, and a broker restart that the client rides out, getting the new broker's whole
listing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from maka_client import BrokerClient, Reattaching, ReattachPolicy, ToolListing
from services.core.channels import open_channel
from services.core.settings import ClientTlsSettings
from tests.helpers.broker import FRAME_TIMEOUT, Provider, deploy_tool, start_broker, start_interaction, stop_interaction
from tests.reliability.tcp_proxy import TcpProxy

FAST = ReattachPolicy(initial_delay=0.05, max_delay=0.2)


async def _next(feed: AsyncGenerator[ToolListing | Reattaching, None]) -> ToolListing | Reattaching:
    async with asyncio.timeout(FRAME_TIMEOUT):
        return await anext(feed)


def _names(listing: ToolListing | Reattaching) -> list[str]:
    assert isinstance(listing, ToolListing), listing
    return [tool.name for tool in listing.tools]


async def test_watch_tools_yields_each_change_and_after_a_broker_restart_the_new_brokers_whole_listing(
    redis_url: str,
) -> None:
    _, interaction = await start_interaction(redis_url)
    interaction_target = f"127.0.0.1:{interaction.port}"
    _, first, _ = await start_broker(interaction_target)
    broker = [f"127.0.0.1:{first.port}"]
    proxy = TcpProxy(lambda: broker[0])  # the client's one address: the broker behind it restarts
    providers: list[Provider] = []
    second = None
    client = BrokerClient(f"127.0.0.1:{await proxy.start()}", reattach=FAST)
    channels = []

    async def provider(provider_id: str, server: str) -> None:
        channel = open_channel(broker[0], tls=ClientTlsSettings())
        channels.append(channel)
        connected = Provider(channel, provider_id, [deploy_tool("ping", server)])
        providers.append(connected)
        await connected.connect()

    feed = client.watch_tools()
    try:
        await provider("mcp:examples", "examples")
        listing = await _next(feed)
        if _names(listing) == []:  # the feed opened before the registration was published
            listing = await _next(feed)
        assert _names(listing) == ["examples:ping"]
        assert isinstance(listing, ToolListing)
        assert listing.tools[0].input_schema["type"] == "object"
        revision = listing.revision

        await provider("mcp:more", "more")
        more = await _next(feed)
        assert _names(more) == ["examples:ping", "more:ping"]
        assert isinstance(more, ToolListing)
        assert more.revision == revision + 1

        await first.stop()  # the broker's shutdown ends the stream (OK): the client reattaches
        reattaching = await _next(feed)
        assert isinstance(reattaching, Reattaching)
        for old in providers:
            await old.close()
        _, second, _ = await start_broker(interaction_target)
        broker[0] = f"127.0.0.1:{second.port}"
        await provider("mcp:other", "other")

        seen: list[list[str]] = []
        async with asyncio.timeout(30):
            while seen[-1:] != [["other:ping"]]:
                item = await anext(feed)
                if isinstance(item, ToolListing):
                    seen.append(_names(item))
        assert all(names in ([], ["other:ping"]) for names in seen), seen  # nothing of the old broker's
    finally:
        await feed.aclose()
        for connected in providers:
            await connected.close()
        await client.close()
        await proxy.close()
        for channel in channels:
            await channel.close()
        if second is not None:
            await second.stop()
        with contextlib.suppress(Exception):
            await first.stop()
        await stop_interaction(interaction)
