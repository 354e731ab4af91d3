"""The front door's :class:`~surfaces.mcp.server.ToolWatch` on the broker's ``WatchTools`` feed: a real broker and
Interaction service on loopback (behind a TCP proxy, so the broker can be replaced under the same address) with
synthetic providers (real ``Connect`` clients). A change is announced once; a reconnect's whole listing is announced
only when it differs from the last one seen."""

from __future__ import annotations

import asyncio
import contextlib

import grpc.aio
from mcp.server.subscriptions import ServerEvent, ToolsListChanged

from maka_client import BrokerClient, ReattachPolicy
from services.core.channels import open_channel
from services.core.serving import RunningServer
from services.core.settings import ClientTlsSettings
from surfaces.mcp.server import ToolWatch
from tests.helpers.broker import FRAME_TIMEOUT, Provider, deploy_tool, start_broker, start_interaction, stop_interaction
from tests.helpers.waiting import eventually
from tests.reliability.tcp_proxy import TcpProxy


class _Brokers:
    """The broker behind the proxy, replaceable, and the providers registered with it."""

    def __init__(self, interaction_target: str) -> None:
        self.interaction_target = interaction_target
        self.running: RunningServer | None = None
        self.address = ""
        self.channels: list[grpc.aio.Channel] = []
        self.providers: list[Provider] = []

    async def start(self, *servers: str) -> None:
        """A new broker with one provider per server (Tool ``SERVER:ping``), all registered before it is reached."""
        _, self.running, _ = await start_broker(self.interaction_target)
        address = f"127.0.0.1:{self.running.port}"
        channel = open_channel(address, tls=ClientTlsSettings())
        self.channels.append(channel)
        for server in servers:
            await self.add(server, channel)
        self.address = address

    async def add(self, server: str, channel: grpc.aio.Channel | None = None) -> None:
        provider = Provider(channel or self.channels[-1], f"mcp:{server}", [deploy_tool("ping", server)])
        self.providers.append(provider)
        await provider.connect()

    async def stop(self) -> None:
        if self.running is not None:
            await self.running.stop()
            self.running = None
        for provider in self.providers:
            await provider.close()
        self.providers = []

    async def aclose(self) -> None:
        await self.stop()
        for channel in self.channels:
            await channel.close()


async def test_a_change_is_announced_once_and_a_reconnect_announces_only_what_changed_meanwhile(
    redis_url: str,
) -> None:
    _, interaction = await start_interaction(redis_url)
    brokers = _Brokers(f"127.0.0.1:{interaction.port}")
    proxy = TcpProxy(lambda: brokers.address)
    announced: asyncio.Queue[ServerEvent] = asyncio.Queue()
    try:
        await brokers.start("examples")
        client = BrokerClient(f"127.0.0.1:{await proxy.start()}", reattach=ReattachPolicy(0.05, 0.2))
        watch = ToolWatch(client)
        watch.bus.subscribe(announced.put_nowait)
        task = asyncio.create_task(watch.run())
        try:
            await eventually(lambda: watch.listings >= 1, what="the first listing")
            assert announced.empty(), "the first listing announces nothing"
            assert watch.schemas.get("examples.ping") is not None, "the feed's listing feeds the header check"
            assert watch.schemas.get("more.ping") is None

            await brokers.add("more")
            async with asyncio.timeout(FRAME_TIMEOUT):
                assert isinstance(await announced.get(), ToolsListChanged)
            assert watch.schemas.get("more.ping") == watch.schemas.get("examples.ping"), "the new Tool's schema too"

            # The same Tools on a new broker: the reconnect's listing changes nothing a client sees.
            taken = watch.listings
            await brokers.stop()
            await brokers.start("examples", "more")
            await eventually(lambda: watch.listings > taken, timeout=30, what="the new broker's listing")
            assert announced.empty()

            # A broker whose Tools differ: the change made while the feed was away is announced once it is back.
            await brokers.stop()
            await brokers.start("examples")
            async with asyncio.timeout(30):
                assert isinstance(await announced.get(), ToolsListChanged)
            assert announced.empty()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.close()
    finally:
        await proxy.close()
        await brokers.aclose()
        await stop_interaction(interaction)
