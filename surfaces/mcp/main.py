"""Run the MCP front door: ``python -m surfaces.mcp.main`` (``maka up`` starts it).

Same shape as every service ``main``::

    settings = McpSettings()          # MAKA_BROKER_TARGET, MAKA_MCP_LISTEN, MAKA_WEB_URL, ...
    app = await build(settings)       # broker client + SDK server + Starlette app
    await serve(app, settings)        # uvicorn until SIGINT/SIGTERM (and the drain, when it has a budget)

Port 0 picks a free port, written to ``MAKA_MCP_PORT_FILE`` once serving. With ``MAKA_DRAIN_SECONDS`` (a number, or
``auto``: the broker's derived budget, :meth:`~services.core.settings.DrainBudgetSettings.drain_budget_seconds`)
the first SIGTERM/SIGINT starts a drain (:mod:`surfaces.mcp.drain`): the endpoint keeps serving until no call is
in flight or the budget ran out, then stops as without one. A second signal stops it at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette

from maka_client import BrokerClient
from services.core import runner
from services.core.logs import configure
from surfaces.common.asgi_server import QuietSignalsServer, bind_socket, wait_started, write_atomically
from surfaces.common.interactions import Interactions
from surfaces.mcp.auth import ForwardingBrokerClient
from surfaces.mcp.calls import STOP_TIMEOUT_SECONDS
from surfaces.mcp.drain import Flights
from surfaces.mcp.server import MCP_PATH, FrontDoorServer, build_asgi, build_server
from surfaces.mcp.settings import McpSettings

log = logging.getLogger("maka.mcp.main")

STARTUP_TIMEOUT_SECONDS = 10.0
SHUTDOWN_GRACE_SECONDS = 2
STOP_CALLS_SECONDS = STOP_TIMEOUT_SECONDS + 1.0
"""How long the calls still running at the stop get to stop their turns (each broker ``Stop`` is bounded)."""


@dataclass
class McpApp:
    """A built MCP front door: its settings, its broker client and the ASGI app."""

    settings: McpSettings
    broker: BrokerClient
    asgi: Starlette
    interactions: Interactions
    flights: Flights
    """The calls in flight, what a drain waits for."""

    async def close(self) -> None:
        """Close the broker and Interaction channels."""
        await self.broker.close()
        await self.interactions.close()


async def build(settings: McpSettings) -> McpApp:
    """Open the broker client (inside the running loop) and build the server and its app."""
    token = settings.caller_token.get_secret_value() or None
    broker = ForwardingBrokerClient.from_env(settings.broker_target, token=token)
    interactions = Interactions.connect(
        settings.interaction_target,
        token=settings.surface_token.get_secret_value() or None,
        host_id=settings.host_id,
        surface_kind="mcp",
    )
    server = build_server(settings, broker, interactions)
    flights = server.flights if isinstance(server, FrontDoorServer) and server.flights else Flights()
    return McpApp(
        settings=settings,
        broker=broker,
        asgi=build_asgi(settings, server),
        interactions=interactions,
        flights=flights,
    )


async def serve(app: McpApp, settings: McpSettings) -> None:
    """Serve until SIGINT/SIGTERM (with a drain budget: until the drain it starts is over, see the module
    docstring), then stop (open streams get a short grace: calls still running are stopped) and close the broker
    client."""
    host, port = settings.listen_host_port()
    sock = bind_socket(host, port)
    bound: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app.asgi,
        lifespan="on",
        access_log=False,
        log_config=None,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = QuietSignalsServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="maka-mcp")
    budget = settings.drain_budget_seconds()
    stopping: list[asyncio.Task[None]] = []

    async def drain_then_exit(budget: float) -> None:
        try:
            if budget > 0:
                await app.flights.drain(budget)
            await app.flights.stop_calls(STOP_CALLS_SECONDS)
        finally:
            server.should_exit = True

    def stop() -> None:
        if stopping:  # a second signal: stop now
            server.should_exit = True
            return
        stopping.append(asyncio.create_task(drain_then_exit(budget), name="maka-mcp-drain"))

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        await wait_started(server, task, "the MCP endpoint", STARTUP_TIMEOUT_SECONDS)
        if settings.mcp_port_file is not None:
            write_atomically(settings.mcp_port_file, str(bound))
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}{MCP_PATH}"
        log.info("mcp.serving", extra={"port": bound, "url": url, "host_id": settings.host_id})
        await task
    finally:
        for pending in stopping:
            pending.cancel()
        sock.close()
        await app.close()


async def main() -> None:
    """``settings = McpSettings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``."""
    settings = McpSettings()
    configure("mcp", settings.log_level)
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    runner.run(main())
