"""MCP provider entry point: ``python -m services.mcp_provider.main``.

``settings = Settings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``.
The provider serves only gRPC health and reflection on ``listen`` (for probes); its work is
client-side: MCP connections (``MAKA_MCP_CONFIG``) and one broker ``Connect`` stream per MCP server
(``MAKA_BROKER_TARGET``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import grpc.aio

from services.core import logs
from services.core.channels import open_channel
from services.core.serving import serve
from services.mcp_provider.config import ServerConfig, load_config
from services.mcp_provider.connection import McpConnection
from services.mcp_provider.manager import McpClientManager
from services.mcp_provider.oauth import OAuthSettings, TokenVault, read_key_file
from services.mcp_provider.provider import McpProvider
from services.mcp_provider.settings import Settings


class ProviderApp:
    """The provider as a ``services.core.serving.GrpcApp``: ``manager`` and ``provider`` are public."""

    service_names: Sequence[str] = ()

    def __init__(self, settings: Settings, servers: list[ServerConfig]) -> None:
        self.settings = settings
        self.manager = McpClientManager(
            max_rounds=settings.max_rounds,
            pacing_initial_ms=settings.state_only_pacing_ms,
            pacing_max_ms=settings.state_only_pacing_max_ms,
            call_timeout_seconds=settings.call_timeout_seconds,
        )
        oauth = oauth_settings(settings)
        for server in servers:
            self.manager.add(
                McpConnection(
                    server,
                    reconnect_initial_seconds=settings.reconnect_initial_seconds,
                    reconnect_max_seconds=settings.reconnect_max_seconds,
                    oauth=oauth,
                )
            )
        self.provider: McpProvider | None = None

    def register(self, server: grpc.aio.Server) -> None:
        """No provider-specific gRPC service: only health and reflection (added by ``serving``)."""

    async def start(self) -> None:
        """Open the broker channel, connect the MCP servers, start the broker links."""
        channel = open_channel(
            self.settings.broker_target,
            token=self.settings.broker_token or None,
            max_message_bytes=self.settings.max_message_bytes,
        )
        self.provider = McpProvider(
            self.manager,
            channel,
            reconnect_initial_seconds=self.settings.reconnect_initial_seconds,
            reconnect_max_seconds=self.settings.reconnect_max_seconds,
            heartbeat_seconds=self.settings.heartbeat_seconds,
        )
        await self.provider.start()

    async def stop(self) -> None:
        """Stop the links (in-flight calls send nothing more), the MCP connections and the channel."""
        if self.provider is not None:
            await self.provider.close()
        else:
            await self.manager.close()


SDK_LOGGERS = ("mcp", "mcp_types", "httpx2", "httpx")
"""Loggers of the MCP SDK and its HTTP client; some log whole JSON-RPC messages at DEBUG
(``mcp.client.streamable_http``: ``SSE message: ...``), which would carry ``requestState``."""


def quiet_sdk_loggers() -> None:
    """Keep the SDK's loggers at INFO or above whatever the service level (DESIGN.md §6: no
    ``requestState`` or form values in logs)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


def oauth_settings(settings: Settings) -> OAuthSettings:
    """The Host's OAuth client settings; reads the key file (raises ``OAuthConfigError``)."""
    vault = None
    if settings.oauth_key_file is not None:
        directory = settings.oauth_token_dir or settings.oauth_key_file.parent / "oauth"
        vault = TokenVault(directory, read_key_file(settings.oauth_key_file), settings.host_id)
    return OAuthSettings(
        redirect_uri=settings.oauth_redirect_uri,
        vault=vault,
        client_metadata_url=settings.oauth_client_metadata_url or None,
    )


async def build(settings: Settings) -> ProviderApp:
    """Build the provider from ``settings``; reads ``mcp_config`` (raises ``ConfigError`` on a bad file).

    Nothing connects until ``start``. Pins the SDK loggers to INFO (:func:`quiet_sdk_loggers`).
    """
    quiet_sdk_loggers()
    servers = load_config(settings.mcp_config) if settings.mcp_config is not None else []
    return ProviderApp(settings, servers)


async def main() -> None:
    """Run the provider until SIGINT/SIGTERM."""
    settings = Settings()
    logs.configure("mcp_provider", settings.log_level)
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    asyncio.run(main())
