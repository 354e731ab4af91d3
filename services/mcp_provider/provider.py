"""The MCP provider of one process: every :class:`~services.mcp_provider.broker_link.BrokerLink` (one
``Connect`` stream per configured MCP server) over one broker channel, and the server status report
(:class:`~services.mcp_provider.status.StatusReporter`). A config reload adds and removes servers here
while the others keep serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.mcp_provider.broker_link import BrokerLink
from services.mcp_provider.connection import ConnectionSnapshot, McpConnection, ServerState
from services.mcp_provider.manager import McpClientManager
from services.mcp_provider.status import StatusReporter, server_status, timestamp

log = logging.getLogger("maka.mcp_provider.provider")


class McpProvider:
    """Every :class:`BrokerLink` of this process over one broker channel, and the status report.

    :meth:`add_server` / :meth:`remove_server` let a config reload change the set of servers while
    the others keep serving (their links and connections are not touched).
    """

    def __init__(
        self,
        manager: McpClientManager,
        channel: grpc.aio.Channel,
        *,
        reporter_id: str = "",
        **link_options: float,
    ) -> None:
        self.manager = manager
        self.channel = channel
        self._stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        self._link_options = link_options
        self.reporter_id = reporter_id or f"mcp-provider@{socket.gethostname()}:{os.getpid()}"
        self.config_generation = 1
        self.config_errors: list[str] = []
        self.config_changes: list[str] = []
        self.config_reload_time: float | None = None
        """When the last reload was applied or rejected (``time.time()``); None before any reload."""
        self.reporter = StatusReporter(
            self._stub,
            self.report,
            reconnect_initial_seconds=link_options.get("reconnect_initial_seconds", 0.5),
            reconnect_max_seconds=link_options.get("reconnect_max_seconds", 30.0),
        )
        self.links: dict[str, BrokerLink] = {}
        for connection in manager.connections.values():
            self._link(connection)

    def _link(self, connection: McpConnection) -> BrokerLink:
        link = BrokerLink(connection, self.manager, self._stub, **self._link_options)
        link.on_calls_changed = self.reporter.poke_calls
        link.on_status_changed = self.reporter.poke
        connection.on_status(self.reporter.poke)
        connection.subscribe(self._poke_async)
        self.links[connection.name] = link
        return link

    async def _poke_async(self, snapshot: ConnectionSnapshot) -> None:
        self.reporter.poke()

    def report(self) -> broker_pb2.ReportServersRequest:
        """The current ``ReportServersRequest`` snapshot of every server."""
        servers = []
        for name, connection in sorted(self.manager.connections.items()):
            link = self.links.get(name)
            if link is None:
                servers.append(server_status(connection))
            else:
                servers.append(server_status(connection, link.live_calls, link.refusal))
        return broker_pb2.ReportServersRequest(
            reporter_id=self.reporter_id,
            servers=servers,
            config_generation=self.config_generation,
            config_errors=self.config_errors,
            config_changes=self.config_changes,
            config_reload_time=None if self.config_reload_time is None else timestamp(self.config_reload_time),
        )

    async def start(self) -> None:
        """Start the MCP connections, the broker links and the status report."""
        await self.manager.start()
        for link in self.links.values():
            await link.start()
        await self.reporter.start()

    async def add_server(self, connection: McpConnection) -> None:
        """Manage, connect and register a new server (config reload: added or changed)."""
        self.manager.add(connection)
        link = self._link(connection)
        await connection.start()
        await link.start()
        self.reporter.poke()

    async def remove_server(self, name: str, *, drain_seconds: float = 0.0) -> None:
        """Stop serving ``name``: with ``drain_seconds`` its calls in flight may finish first (new calls
        fail ``SERVER_UNAVAILABLE``), then its link and connection close (what is left ends lost)."""
        connection = self.manager.connections.get(name)
        link = self.links.get(name)
        if connection is None:
            return
        if drain_seconds > 0 and link is not None:
            connection.set_state(ServerState.DRAINING)
            await link.wait_idle(drain_seconds)
        if link is not None:
            await link.close()
            if self.links.get(name) is link:
                del self.links[name]
        await connection.close()
        if self.manager.connections.get(name) is connection:  # not a server re-added while draining
            self.manager.remove(name)
        self.reporter.poke()

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until no call is in flight on any link (the broker, draining too,
        sends no new ones); True when every call finished. In-flight calls are left untouched."""
        live = sum(link.live_calls for link in self.links.values())
        if timeout > 0 and live:
            log.info("provider_draining", extra={"live_calls": live, "drain_seconds": timeout})
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            for link in self.links.values():
                await link.wait_idle(max(0.0, deadline - loop.time()))
        left = sum(link.live_calls for link in self.links.values())
        log.info("provider_drained", extra={"finished": max(0, live - left), "live_calls": left})
        return left == 0

    async def close(self, timeout: float = 5.0) -> None:
        """Stop the status report and the links (in-flight calls send nothing more; each stream is
        half-closed and its end awaited, at most ``timeout`` s, so every frame sent is delivered:
        :meth:`BrokerLink.close`), then the MCP connections and the channel."""
        await self.reporter.close()
        await asyncio.gather(*(link.close(timeout) for link in list(self.links.values())))
        await self.manager.close()
        await self.channel.close()
