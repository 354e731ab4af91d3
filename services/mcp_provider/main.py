"""MCP provider entry point: ``python -m services.mcp_provider.main``.

``settings = Settings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``.
The provider serves only gRPC health and reflection on ``listen`` (for probes); its work is
client-side: MCP connections (``MAKA_MCP_CONFIG``) and one broker ``Connect`` stream per MCP server
(``MAKA_BROKER_TARGET``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import grpc.aio

from services.core import logs, runner
from services.core.channels import open_channel
from services.core.serving import serve
from services.mcp_provider.config import Config, ConfigError, ServerConfig, check_config
from services.mcp_provider.connection import McpConnection
from services.mcp_provider.manager import McpClientManager
from services.mcp_provider.oauth import OAuthConfigError, OAuthSettings, TokenVault, read_key_file
from services.mcp_provider.provider import McpProvider
from services.mcp_provider.settings import Settings
from services.mcp_provider.status import reload_problems


class ProviderApp:
    """The provider as a ``services.core.serving.GrpcApp``: ``manager`` and ``provider`` are public.

    SIGHUP (``maka reload``, or ``kill -HUP``) re-reads ``mcp_config`` and applies it (:meth:`reload`).
    """

    service_names: Sequence[str] = ()

    def __init__(self, settings: Settings, servers: list[ServerConfig], *, rejected: ConfigError | None = None) -> None:
        self.settings = settings
        self._rejected_at_start = rejected
        """The file's problems when this start ran the last applied copy instead (reported like a rejected
        reload once the provider runs)."""
        self.manager = McpClientManager(
            max_rounds=settings.max_rounds,
            pacing_initial_ms=settings.state_only_pacing_ms,
            pacing_max_ms=settings.state_only_pacing_max_ms,
            call_timeout_seconds=settings.call_timeout_seconds,
            max_call_seconds=settings.max_call_seconds,
        )
        self.oauth = oauth_settings(settings)
        for server in servers:
            self.manager.add(self._connection(server))
        self.servers = {server.name: server for server in servers}
        self.provider: McpProvider | None = None
        self._reloading = asyncio.Lock()

    def _connection(self, server: ServerConfig) -> McpConnection:
        return McpConnection(
            server,
            reconnect_initial_seconds=self.settings.reconnect_initial_seconds,
            reconnect_max_seconds=self.settings.reconnect_max_seconds,
            oauth=self.oauth,
        )

    def register(self, server: grpc.aio.Server) -> None:
        """No provider-specific gRPC service: only health and reflection (added by ``serving``)."""

    async def start(self) -> None:
        """Open the broker channel, connect the MCP servers, start the broker links and the status
        report; install the SIGHUP reload handler."""
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
        if self._rejected_at_start is not None:
            self.provider.config_errors = reload_problems(self._rejected_at_start.problems)
            self.provider.config_reload_time = time.time()
        await self.provider.start()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._on_sighup)

    def _on_sighup(self) -> None:
        task = asyncio.ensure_future(self.reload())
        _RELOADS.add(task)
        task.add_done_callback(_RELOADS.discard)

    async def reload(self) -> list[str]:
        """Re-read ``mcp_config`` and apply it: added servers connect, removed ones drain (their calls
        in flight may finish within ``reload_drain_seconds``), changed ones reconnect, untouched ones
        are not touched. Returns the changes (``added: a`` ...). A bad file changes nothing: its
        problems are logged one line each and reported, bounded (:func:`reload_problems`), with the
        time of the rejection (``maka status``, ``maka reload``); the running generation stays."""
        async with self._reloading:
            assert self.provider is not None
            path = self.settings.mcp_config
            try:
                config = check_config(path) if path is not None else Config([])
            except ConfigError as error:
                self.provider.config_errors = reload_problems(error.problems)
                self.provider.config_reload_time = time.time()
                for problem in error.problems:
                    log.warning("config_reload_rejected", extra={"problem": str(problem)})
                self.provider.reporter.poke()
                return []
            log_warnings(config)
            keep_applied(self.settings, config)
            new = {server.name: server for server in config.servers}
            added = [name for name in new if name not in self.servers]
            removed = [name for name in self.servers if name not in new]
            changed = [name for name in new if name in self.servers and new[name] != self.servers[name]]
            drain = self.settings.reload_drain_seconds
            for name in removed:  # drains run on: the new generation is reported at once
                task = asyncio.ensure_future(self.provider.remove_server(name, drain_seconds=drain))
                _RELOADS.add(task)
                task.add_done_callback(_RELOADS.discard)
            await asyncio.gather(
                *(self._replace(new[name]) for name in changed),
                *(self.provider.add_server(self._connection(new[name])) for name in added),
            )
            self.servers = new
            changes = (
                [f"added: {name}" for name in added]
                + [f"removed: {name}" for name in removed]
                + [f"changed: {name}" for name in changed]
            )
            self.provider.config_generation += 1
            self.provider.config_errors = []
            self.provider.config_changes = changes
            self.provider.config_reload_time = time.time()
            self.provider.reporter.poke()
            log.info(
                "config_reloaded",
                extra={
                    "generation": self.provider.config_generation,
                    "added": len(added),
                    "removed": len(removed),
                    "changed": len(changed),
                },
            )
            return changes

    async def _replace(self, server: ServerConfig) -> None:
        assert self.provider is not None
        await self.provider.remove_server(server.name)
        await self.provider.add_server(self._connection(server))

    async def stop(self) -> None:
        """Let calls in flight finish (``drain_seconds``; ``auto``: :meth:`Settings.drain_budget_seconds`), then
        stop the links (what is still in flight sends nothing more; each broker stream half-closes and its end
        is awaited for at most ``grace_seconds``, so the last results are delivered), the MCP connections and
        the channel."""
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if self.provider is not None:
            await self.provider.drain(self.settings.drain_budget_seconds())
            await self.provider.close(self.settings.grace_seconds)
        else:
            await self.manager.close()


_RELOADS: set[asyncio.Task[Any]] = set()
"""Reloads and drains under way (kept referenced until done)."""

log = logging.getLogger("maka.mcp_provider.main")


def keep_applied(settings: Settings, config: Config) -> None:
    """Write ``config``'s text to ``mcp_config_applied`` (atomically, mode 0600), if that is set."""
    target = settings.mcp_config_applied
    if target is None:
        return
    partial = target.with_name(target.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(config.text)
        os.replace(partial, target)
    except OSError as error:  # the copy is a fallback: running the config does not depend on it
        log.warning("config_copy_failed", extra={"path": str(target), "error": error.strerror or type(error).__name__})


def read_start_config(settings: Settings) -> tuple[Config, ConfigError | None]:
    """The config to start with: ``mcp_config``, or, when that is invalid and a last applied copy exists
    (``mcp_config_applied``), the copy plus the file's problems. Raises ``ConfigError`` otherwise."""
    if settings.mcp_config is None:
        return Config([]), None
    try:
        config = check_config(settings.mcp_config)
    except ConfigError as error:
        applied = settings.mcp_config_applied
        if applied is None or not applied.is_file():
            raise
        try:
            config = check_config(applied, origin=settings.mcp_config)
        except ConfigError:
            raise error from None
        for problem in error.problems:
            log.warning("config_invalid_running_last_applied", extra={"problem": str(problem)})
        return config, error
    keep_applied(settings, config)
    return config, None


def log_warnings(config: Config) -> None:
    """One ``config_warning`` line per ignored key (paths only, never values)."""
    for warning in config.warnings:
        log.warning("config_warning", extra={"problem": str(warning)})


SDK_LOGGERS = ("mcp", "mcp_types", "httpx2", "httpx")
NOISY_LOGGERS = ("httpx2", "httpx", "httpcore", "uvicorn.access")
"""Loggers that write one INFO line per HTTP request, with the full URL (a query-string secret
would reach the log): kept at WARNING."""
"""Loggers of the MCP SDK and its HTTP client; some log whole JSON-RPC messages at DEBUG
(``mcp.client.streamable_http``: ``SSE message: ...``), which would carry ``requestState``."""


def quiet_sdk_loggers() -> None:
    """Keep the SDK's loggers at INFO or above whatever the service level (docs/design.md#requeststate:
    no ``requestState`` or form values in logs)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def oauth_settings(settings: Settings) -> OAuthSettings:
    """The Host's OAuth client settings; reads the key file (raises ``OAuthConfigError``)."""
    vault = None
    key_file = settings.oauth_key_file
    if key_file is not None and settings.oauth_key_optional and not key_file.exists():
        # An optional Secret that was not created (deploy/README.md): nothing is written to disk.
        log.warning("oauth_key_absent", extra={"path": str(key_file)})
        key_file = None
    if key_file is not None:
        directory = settings.oauth_token_dir or key_file.parent / "oauth"
        vault = TokenVault(directory, read_key_file(key_file), settings.host_id)
    return OAuthSettings(
        redirect_uri=settings.oauth_redirect_uri,
        vault=vault,
        client_metadata_url=settings.oauth_client_metadata_url or None,
    )


async def build(settings: Settings) -> ProviderApp:
    """Build the provider from ``settings``; reads ``mcp_config`` (:func:`read_start_config`: raises
    ``ConfigError`` on a bad file unless a last applied copy can run instead).

    Nothing connects until ``start``. Pins the SDK loggers to INFO (:func:`quiet_sdk_loggers`).
    """
    quiet_sdk_loggers()
    config, rejected = read_start_config(settings)
    log_warnings(config)
    return ProviderApp(settings, config.servers, rejected=rejected)


async def main() -> int:
    """Run the provider until SIGINT/SIGTERM (SIGHUP reloads the config). A bad config file exits 2
    with one ``config_invalid`` line per problem, a bad OAuth key file with ``oauth_key_invalid``; never a
    traceback."""
    settings = Settings()
    logs.configure("mcp_provider", settings.log_level)
    try:
        app = await build(settings)
    except ConfigError as error:
        for problem in error.problems:
            log.error("config_invalid", extra={"problem": str(problem)})
        return 2
    except OAuthConfigError as error:
        log.error("oauth_key_invalid", extra={"problem": str(error)})
        return 2
    await serve(app, settings)
    return 0


if __name__ == "__main__":
    sys.exit(runner.run(main()))
