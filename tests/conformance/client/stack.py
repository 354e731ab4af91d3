"""The whole Maka stack in one process, for ``maka conformance-client`` and its tests.

A private ``redis-server`` (unix socket in a temporary folder, no persistence), then the Interaction
service, the Capability broker and the MCP provider, each built with its own ``main.build(settings)``
and started with :func:`services.core.serving.start_server` on ``127.0.0.1:0`` (ephemeral loopback
ports). Starting in-process is much faster than starting processes, and every gRPC hop is still real.

Use::

    async with InProcessStack(mcp_config=path) as stack:
        stack.interaction_target, stack.broker_target  # "127.0.0.1:PORT"

Stopping is in reverse order (provider, broker, Interaction service, redis) and always runs.
``provider_options`` reach the provider's Settings (the conformance runner sets the OAuth redirect URI,
client metadata URL and an encrypted token vault in the temporary folder).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

from services.core.serving import RunningServer, start_server
from stack.errors import StackError

READY_LINE = b"ready to accept connections"
"""What redis-server logs (to stdout, with ``--logfile ""``) once it serves, compared lower-case
(7.0: "The server is now ready to accept connections at <socket>"; 7.2+: "Ready to accept connections unix")."""


GRACE_SECONDS = 0.5
"""Shutdown grace of each in-process server: every call has ended by then (the run is over)."""


class PrivateRedis:
    """A ``redis-server`` child process on a unix socket in ``directory``; ``url`` is ``unix://...``."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "redis.sock"
        self.directory = directory
        self._process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """``unix://`` URL of the server."""
        return f"unix://{self.socket}"

    async def start(self, timeout: float = 10.0) -> None:
        """Start and wait (at most ``timeout`` s) for its ready line. Raises :class:`StackError`."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError("redis-server is not installed (run `make setup`)")
        self._process = await asyncio.create_subprocess_exec(
            binary,
            "--port", "0",
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--logfile", "",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        stdout = self._process.stdout
        assert stdout is not None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = await stdout.readline()
                    if not line:
                        raise StackError(f"redis-server exited with {await self._process.wait()}")
                    if READY_LINE in line.lower():
                        break
        except TimeoutError:
            await self.stop()
            raise StackError(f"redis-server was not ready within {timeout} s") from None
        # Keep draining its log so the pipe never fills up.
        self._drain = asyncio.create_task(self._discard(stdout))

    @staticmethod
    async def _discard(stream: asyncio.StreamReader) -> None:
        while await stream.readline():
            pass

    async def stop(self) -> None:
        """Terminate and wait for the process (killed after 5 s)."""
        process, self._process = self._process, None
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            async with asyncio.timeout(5):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


class InProcessStack:
    """Redis + Interaction service + broker + MCP provider in this event loop.

    ``mcp_config`` is the ``mcpServers`` JSON file the provider connects to. ``host_id`` names the
    Host (Redis hash tag). ``broker_execution_timeout`` (seconds) bounds each provider leg.
    """

    def __init__(
        self,
        mcp_config: Path,
        *,
        host_id: str = "conformance",
        broker_execution_timeout: float = 60.0,
        provider_options: dict[str, Any] | None = None,
    ):
        self.mcp_config = mcp_config
        self.provider_options = dict(provider_options or {})
        """Extra ``services.mcp_provider.settings.Settings`` fields (e.g. the OAuth redirect URI)."""
        self.host_id = host_id
        self.broker_execution_timeout = broker_execution_timeout
        self._exit = AsyncExitStack()
        self.interaction: RunningServer | None = None
        self.broker: RunningServer | None = None
        self.provider: RunningServer | None = None

    @property
    def interaction_target(self) -> str:
        """``127.0.0.1:PORT`` of the Interaction service."""
        assert self.interaction is not None, "stack not started"
        return f"127.0.0.1:{self.interaction.port}"

    @property
    def broker_target(self) -> str:
        """``127.0.0.1:PORT`` of the Capability broker."""
        assert self.broker is not None, "stack not started"
        return f"127.0.0.1:{self.broker.port}"

    async def start(self) -> None:
        """Start everything in dependency order. On failure stop what started and raise
        :class:`StackError` naming the cause (a bad ``mcpServers`` file, a port that cannot be bound,
        redis-server missing); cancellation propagates unchanged."""
        try:
            await self._start()
        except StackError:
            await self.stop()
            raise
        except Exception as error:
            await self.stop()
            raise StackError(f"{type(error).__name__}: {error}") from error
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        from services.broker import main as broker_main
        from services.broker.settings import Settings as BrokerSettings
        from services.interaction import main as interaction_main
        from services.interaction.settings import Settings as InteractionSettings
        from services.mcp_provider import main as provider_main
        from services.mcp_provider.settings import Settings as ProviderSettings

        directory = Path(self._exit.enter_context(tempfile.TemporaryDirectory(prefix="maka-conf-", dir="/tmp")))
        redis = PrivateRedis(directory)
        await redis.start()
        self._exit.push_async_callback(redis.stop)

        interaction_settings = InteractionSettings(
            listen="127.0.0.1:0", redis_url=redis.url, host_id=self.host_id, grace_seconds=GRACE_SECONDS
        )
        self.interaction = await start_server(await interaction_main.build(interaction_settings), interaction_settings)
        self._exit.push_async_callback(self.interaction.stop)

        broker_settings = BrokerSettings(
            listen="127.0.0.1:0",
            grace_seconds=GRACE_SECONDS,
            interaction_target=self.interaction_target,
            host_id=self.host_id,
            execution_timeout_seconds=self.broker_execution_timeout,
        )
        self.broker = await start_server(await broker_main.build(broker_settings), broker_settings)
        self._exit.push_async_callback(self.broker.stop)

        provider_settings = ProviderSettings(
            listen="127.0.0.1:0",
            grace_seconds=GRACE_SECONDS,
            broker_target=self.broker_target,
            mcp_config=self.mcp_config,
            reconnect_max_seconds=2.0,
            host_id=self.host_id,
            **self.provider_options,
        )
        self.provider = await start_server(await provider_main.build(provider_settings), provider_settings)
        self._exit.push_async_callback(self.provider.stop)

    async def wait_mcp_connected(self, server: str, timeout: float = 30.0) -> None:
        """Wait until the provider's connection to MCP server ``server`` negotiated its era and listed
        its Tools (``McpConnection.wait_connected``). Raises :class:`StackError` after ``timeout`` seconds."""
        assert self.provider is not None, "stack not started"
        manager = getattr(self.provider.app, "manager", None)
        if manager is None:
            raise StackError("the MCP provider app exposes no `manager` (McpClientManager)")
        try:
            await manager.connection(server).wait_connected(timeout)
        except TimeoutError:
            raise StackError(f"the MCP provider did not connect to server {server!r} within {timeout} s") from None

    def listed_schemas(self, server: str) -> dict[str, str]:
        """Bare Tool name → the input schema (JSON text) the provider holds from ``server``'s ``tools/list``."""
        assert self.provider is not None, "stack not started"
        manager = getattr(self.provider.app, "manager", None)
        if manager is None:
            raise StackError("the MCP provider app exposes no `manager` (McpClientManager)")
        return {tool.name: json.dumps(tool.input_schema) for tool in manager.connection(server).snapshot().tools}

    async def stop(self) -> None:
        """Stop in reverse order; safe to call twice."""
        await self._exit.aclose()

    async def __aenter__(self) -> InProcessStack:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
