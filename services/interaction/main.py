"""Entry point of the Interaction service: ``python -m services.interaction.main``.

``settings = Settings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``.
:class:`InteractionApp` owns the Redis client, the reaper (leases and bounded waits) and the
readiness probe (NOT_SERVING while Redis is unreachable, SERVING again once it answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import grpc.aio
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core import logs, runner
from services.core.auth import Role
from services.core.serving import GrpcApp, serve
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.keys import Keys
from services.interaction.servicer import InteractionServicer
from services.interaction.settings import Settings

log = logging.getLogger("maka.interaction.main")

SERVICE_NAME = interaction_service_pb2.DESCRIPTOR.services_by_name["InteractionService"].full_name
_METHOD = f"/{SERVICE_NAME}/"


class InteractionApp:
    """The Interaction service as a :class:`services.core.serving.GrpcApp`."""

    service_names: Sequence[str] = (SERVICE_NAME,)
    method_roles = {
        _METHOD + "HostLink": frozenset({Role.BROKER}),
        _METHOD + "Attach": frozenset({Role.SURFACE}),
        _METHOD + "Answer": frozenset({Role.SURFACE}),
        _METHOD + "ListPending": frozenset({Role.SURFACE}),
        _METHOD + "GetInteraction": frozenset({Role.SURFACE}),
    }
    """Who may call what (the auth interceptor enforces it; admin may call everything)."""

    def __init__(self, settings: Settings, client: redis.asyncio.Redis, authority: InteractionAuthority) -> None:
        self.settings = settings
        self.client = client
        self.authority = authority
        self.servicer = InteractionServicer(authority)
        self._set_serving: Callable[[bool], Awaitable[None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.store_ok = True
        """Whether the last probe reached Redis (mirrors readiness)."""

    def register(self, server: grpc.aio.Server) -> None:
        """Add the InteractionService servicer."""
        interaction_service_pb2_grpc.add_InteractionServiceServicer_to_server(self.servicer, server)

    def bind_health(self, set_serving: Callable[[bool], Awaitable[None]]) -> None:
        """Receive the readiness switch (called by ``start_server`` before ``start``)."""
        self._set_serving = set_serving

    async def start(self) -> None:
        """Close forms of older epochs left behind, then run the reaper/probe loop."""
        with contextlib.suppress(errors.StoreUnavailable):
            await self.authority.close_older_epochs()
        self._task = asyncio.create_task(self._loop(), name="interaction-reaper")

    async def stop(self) -> None:
        """End open streams (clients resume elsewhere), stop the reaper and background closers of older
        epochs (what they left is finished by the next start or another replica's reaper), close Redis."""
        await self.servicer.drain(self.settings.grace_seconds)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.authority.aclose()
        await self.client.aclose()

    async def tick(self) -> None:
        """One reaper pass plus the readiness probe (flips health on a Redis outage or recovery)."""
        try:
            await self.authority.store.ping()
            closed = await self.authority.reap_once()
            if closed:
                log.info("reaped", extra={"closed": closed})
            ok = True
        except errors.StoreUnavailable:
            ok = False
        if ok != self.store_ok:
            log.warning("store_" + ("available" if ok else "unavailable"))
            if self._set_serving is not None:
                await self._set_serving(ok)
            self.store_ok = ok

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reaper_interval_seconds)
            try:
                await self.tick()
            except Exception:
                log.exception("reaper_failed")


def redis_client(settings: Settings) -> redis.asyncio.Redis:
    """The process's Redis client: binary values, short retries, a read timeout (outages surface as
    STORE_UNAVAILABLE instead of hanging until the caller's deadline)."""
    return redis.asyncio.Redis.from_url(
        settings.redis_url,
        decode_responses=False,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        socket_connect_timeout=2.0,
        socket_timeout=settings.redis_timeout_seconds,
        health_check_interval=30,
    )


async def build(settings: Settings) -> GrpcApp:
    """Wire Redis → store → authority → servicer into an :class:`InteractionApp` (nothing started yet)."""
    from services.interaction.store import InteractionStore

    client = redis_client(settings)
    store = InteractionStore(
        client,
        Keys(settings.host_id),
        retention_ms=int(settings.retention_seconds * 1000),
        events_maxlen=settings.events_maxlen,
    )
    return InteractionApp(settings, client, InteractionAuthority(store, settings))


async def main() -> None:
    """Run the service until SIGINT/SIGTERM."""
    settings = Settings()
    logs.configure("interaction", settings.log_level)
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    runner.run(main())
