"""Entry point of the Interaction service: ``python -m services.interaction.main``.

``settings = Settings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``.
:class:`InteractionApp` owns the Redis client, the fan-out, the Hosts it serves, the reaper (leases and
bounded waits) and the readiness probe: the named service ``maka.interaction.v1.InteractionService``
is NOT_SERVING while Redis is unreachable and SERVING again once it answers; the overall health
(service ``""``, liveness) stays SERVING as long as the process runs, so a Redis outage never makes a
liveness probe restart a healthy pod (docs/design.md#health).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Sequence

import grpc.aio

from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core import logs, runner
from services.core.auth import Role, TokenFileError, TokenTable
from services.core.key_file import KeyFileError, read_key_ring
from services.core.serving import GrpcApp, serve
from services.interaction import audit, errors
from services.interaction.authority import InteractionAuthority
from services.interaction.fanout import FanOut
from services.interaction.fence_check import FenceUnsatisfiable, check_wait_fence
from services.interaction.keys import Keys
from services.interaction.notify import Notifier, TargetsInvalid, parse_targets
from services.interaction.policy import PolicyFile, PolicyFileError
from services.interaction.presence import Presence
from services.interaction.redis_client import Client, close_client, redis_client
from services.interaction.sealing import AnswerSealer
from services.interaction.servicer import InteractionServicer
from services.interaction.settings import HOST_ID_PATTERN, Settings
from services.interaction.store import Fence, HistoryPolicy, InteractionStore
from services.interaction.store_calls import finish_calls
from services.interaction.tier import InteractionTier

log = logging.getLogger("maka.interaction.main")

SERVICE_NAME = interaction_service_pb2.DESCRIPTOR.services_by_name["InteractionService"].full_name
_METHOD = f"/{SERVICE_NAME}/"
_HANDLERS_END_SECONDS = 2.0
"""How long :meth:`InteractionApp.close` waits for the handlers the stopped server cancelled (then cancels
those left and waits as long again)."""


class InteractionApp:
    """The Interaction service as a :class:`services.core.serving.GrpcApp`."""

    service_names: Sequence[str] = (SERVICE_NAME,)
    method_roles = {
        _METHOD + "HostLink": frozenset({Role.BROKER}),
        _METHOD + "Attach": frozenset({Role.SURFACE}),
        _METHOD + "Answer": frozenset({Role.SURFACE}),
        _METHOD + "ListPending": frozenset({Role.SURFACE}),
        _METHOD + "GetInteraction": frozenset({Role.SURFACE}),
        _METHOD + "ListSurfaces": frozenset({Role.SURFACE}),
        _METHOD + "ListHistory": frozenset({Role.SURFACE}),
        _METHOD + "ListHosts": frozenset({Role.SURFACE}),
    }
    """Who may call what (the auth interceptor enforces it; admin may call everything)."""

    def __init__(
        self,
        settings: Settings,
        client: Client,
        tier: InteractionTier,
        fanout: FanOut,
        notifier: Notifier | None = None,
    ) -> None:
        self.settings = settings
        self.notifier = notifier
        """Form notifications (None: no target configured)."""
        self.client = client
        self.tier = tier
        self.fanout = fanout
        self.servicer = InteractionServicer(
            tier,
            presence=Presence(ttl_seconds=settings.surface_presence_seconds),
            surfaces_listed_max=settings.surfaces_listed_max,
            attach_subscribe_timeout=settings.attach_subscribe_timeout_seconds,
            host_link_hello_timeout=settings.host_link_hello_timeout_seconds,
        )
        self.server_options: Sequence[tuple[str, int]] = (
            ("grpc.server.max_pending_requests", settings.max_pending_calls),
            ("grpc.server.max_pending_requests_hard_limit", settings.max_pending_calls),
        )
        """gRPC's pending-call limits (``max_pending_calls``): without them a burst of stream starts past 1,000
        is cancelled by gRPC at random before any handler runs (docs/design.md#fan-out)."""
        self._set_serving: Callable[[bool], Awaitable[None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.store_ok = True
        """Whether the last probe reached Redis (mirrors readiness)."""

    def register(self, server: grpc.aio.Server) -> None:
        """Add the InteractionService servicer."""
        interaction_service_pb2_grpc.add_InteractionServiceServicer_to_server(self.servicer, server)

    @property
    def authority(self) -> InteractionAuthority:
        """The first Host's authority (the only one in a single-Host tier)."""
        return next(iter(self.tier.authorities.values()))

    def bind_readiness(self, set_ready: Callable[[bool], Awaitable[None]]) -> None:
        """Receive the readiness switch of the named service (called by ``start_server`` before ``start``)."""
        self._set_serving = set_ready

    async def start(self) -> None:
        """Start the fan-out, close forms of older epochs left behind, then run the reaper/probe loop."""
        self.fanout.start()
        if self.notifier is not None:
            self.notifier.start()
        with contextlib.suppress(errors.StoreUnavailable):
            await self.tier.close_older_epochs()
        self._task = asyncio.create_task(self._loop(), name="interaction-reaper")

    async def stop(self) -> None:
        """End open streams (clients resume elsewhere), stop the reaper and background closers of older
        epochs (what they left is finished by the next start or another replica's reaper), close Redis."""
        await self.servicer.drain(self.settings.grace_seconds)
        if self._task is not None:
            # A cancellation delivered inside a Redis call can surface as a Redis error, which the loop
            # logs and survives: cancel until the task has ended.
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=0.2)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.tier.aclose()
        if self.notifier is not None:
            await self.notifier.aclose()
        await self.fanout.aclose()
        await self._close_redis()

    async def close(self) -> None:
        """After the server stopped: wait until the handlers it cancelled have ended (``server.stop`` returns
        before they unwound, and their cleanup still writes to Redis), then close Redis again, for those and
        for any connection a handler inside the grace period opened (a closed redis-py pool still hands out
        new connections). Every connection of the stopped service is closed once this returns."""
        await self.servicer.handlers_ended(_HANDLERS_END_SECONDS)
        await self._close_redis()

    async def _close_redis(self) -> None:
        """Let the presence leaves and store calls in flight finish, then close Redis (end of :meth:`stop`,
        and :meth:`close`)."""
        await self.servicer.presence.aclose()
        await finish_calls()
        await close_client(self.client)

    async def tick(self) -> None:
        """One reaper pass plus the readiness probe (flips health on a Redis outage or recovery)."""
        try:
            await self.authority.store.ping()
            closed = await self.tier.reap_once()
            await self.servicer.presence.refresh()  # every third of the presence TTL (docs/design.md#attached-surfaces)
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


def answer_sealer(settings: Settings) -> AnswerSealer:
    """The sealer of answer values at rest (docs/security.md "Answer values at rest"): reads
    ``answer_key_file``, one key or a key ring (raises :class:`~services.core.key_file.KeyFileError`); none
    set: plaintext, with one ``answer_values_unsealed`` warning."""
    if settings.answer_key_file is None:
        log.warning("answer_values_unsealed")
        return AnswerSealer(None)
    ring = read_key_ring(settings.answer_key_file, "an answer")
    log.info("answer_key_ring", extra={"keys": len(ring.keys), "current_key_id": ring.current})
    return AnswerSealer(ring)


def served_hosts(settings: Settings) -> tuple[str, ...]:
    """The Runtime Hosts this tier serves: ``host_ids`` (or ``host_id``), or for ``*`` every Host a broker
    token names (``auth_tokens_file`` + ``auth_tokens_dir``: in Kubernetes each team's own Secret, so adding or
    removing a team's tokens adds or removes its Hosts; docs/design.md#many-hosts). Raises
    :class:`~services.core.auth.TokenFileError` when the tokens cannot be read, name no Host, name every Host
    (``*``) or an id that is not a Host id."""
    if not settings.from_tokens:
        return settings.hosts
    table = TokenTable.from_files(settings.auth_tokens_file, settings.auth_tokens_dir)
    hosts = table.hosts_named(Role.BROKER)
    if not hosts:
        raise TokenFileError("MAKA_HOST_IDS=* but no broker token names a Host")
    invalid = [host for host in hosts if not re.fullmatch(HOST_ID_PATTERN, host)]
    if invalid:
        raise TokenFileError(f"broker tokens name invalid Host ids: {invalid[:5]}")
    return tuple(hosts)


def notifier(settings: Settings) -> Notifier | None:
    """The form notifier of the configured targets (docs/operations.md#notifications), None when there is none.
    Raises :class:`~services.interaction.notify.TargetsInvalid`."""
    targets = parse_targets(
        settings.notify_webhook_urls.get_secret_value(),
        settings.notify_slack_webhook_urls.get_secret_value(),
        settings.notify_targets_file,
    )
    if not targets:
        return None
    log.info("notifications_on", extra={"targets": [t.shown for t in targets]})
    return Notifier(
        targets,
        web_public_url=settings.web_public_url,
        expiry_lead=settings.notify_expiry_lead_seconds,
        attempts=settings.notify_attempts,
        timeout=settings.notify_timeout_seconds,
        queue_size=settings.notify_queue_size,
        status_file=settings.notify_status_file,
    )


async def build(settings: Settings) -> GrpcApp:
    """Wire Redis → fan-out → one store and authority per Host (:func:`served_hosts`) → tier → servicer into an
    :class:`InteractionApp` (nothing started yet).

    Connections: ``redis_followers`` for the fan-out plus at most ``redis_pool_size - redis_followers``
    commands in flight (one limiter shared by every Host), so never more than ``redis_pool_size``.
    """
    hosts = served_hosts(settings)
    sealer = answer_sealer(settings)
    notify = notifier(settings)
    policies = PolicyFile(settings.approver_policies_file)
    audit.configure(settings.audit_log)
    client = redis_client(settings)
    limiter = asyncio.Semaphore(settings.redis_pool_size - settings.redis_followers)
    fanout = FanOut(
        client,
        lanes=settings.redis_followers,
        queue_size=settings.subscriber_queue_size,
        limiter=limiter,
        retry_seconds=settings.reaper_interval_seconds,
    )
    try:
        await check_wait_fence(client, settings.wait_replicas)
    except FenceUnsatisfiable:
        await close_client(client)
        raise
    fence = Fence(replicas=settings.wait_replicas, timeout_ms=settings.redis_wait_timeout_ms)
    authorities = {
        host: InteractionAuthority(
            InteractionStore(
                client,
                Keys(host),
                retention_ms=int(settings.retention_seconds * 1000),
                events_maxlen=settings.events_maxlen,
                limiter=limiter,
                fence=fence,
                sealer=sealer,
                history=HistoryPolicy(
                    retention_ms=int(settings.history_retention_seconds * 1000),
                    max_entries=settings.history_max_entries,
                ),
            ),
            settings,
            fanout=fanout,
            notifier=notify,
            policies=policies,
        )
        for host in hosts
    }
    return InteractionApp(settings, client, InteractionTier(authorities), fanout, notify)


async def main() -> int:
    """Run the service until SIGINT/SIGTERM. A bad answer key file exits 2 with one ``answer_key_invalid``
    line, Hosts to be taken from tokens that name none (``MAKA_HOST_IDS=*``) with one ``host_ids_unresolved``
    line, a cluster that cannot honour the ``WAIT`` fence with one ``redis_wait_fence_unsatisfiable`` line
    (:mod:`services.interaction.fence_check`), a malformed notification target with one ``notify_targets_invalid``
    line, an unreadable approver policies file with one ``approver_policies_invalid`` line, never a traceback."""
    settings = Settings()
    logs.configure("interaction", settings.log_level)
    try:
        app = await build(settings)
    except KeyFileError as error:
        log.error("answer_key_invalid", extra={"problem": str(error)})
        return 2
    except TokenFileError as error:
        log.error("host_ids_unresolved", extra={"problem": str(error)})
        return 2
    except FenceUnsatisfiable as error:
        log.error("redis_wait_fence_unsatisfiable", extra={"problem": str(error)})
        return 2
    except TargetsInvalid as error:  # names a target by scheme and host only
        log.error("notify_targets_invalid", extra={"problem": str(error)})
        return 2
    except PolicyFileError as error:
        log.error("approver_policies_invalid", extra={"problem": str(error)})
        return 2
    await serve(app, settings)
    return 0


if __name__ == "__main__":
    sys.exit(runner.run(main()))
