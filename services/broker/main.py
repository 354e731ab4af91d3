"""Capability broker entry point: ``python -m services.broker.main``.

``settings = Settings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``.
On start the broker begins a new Host epoch over HostLink (in the background; forms fail
HOST_UNAVAILABLE until the link is up). When a newer broker of the same Host id fences its epoch,
the broker goes NOT_SERVING, shuts down and exits ``SUPERSEDED_EXIT_CODE`` (75). On shutdown
(the named health service ``maka.broker.v1.CapabilityBrokerService``, "takes new calls", NOT_SERVING first;
``""`` stays SERVING until the drain is over): new calls are refused and the live ones — with their pending forms, still
answerable — get the drain budget to finish (``drain_seconds``; ``auto`` = until every call is done,
bounded by the longest form wait + one provider leg + grace); then what is still live settles ``lost``,
pending forms close ``host_restarted``, provider streams end, and the link closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

import grpc.aio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.broker.broker import Broker
from services.broker.host_link import HostLink
from services.broker.servicer import BrokerServicer
from services.broker.settings import Settings
from services.core import logs, metrics, runner
from services.core.auth import Role
from services.core.serving import serve

SUPERSEDED_EXIT_CODE = 75
"""Exit status of a broker whose Host epoch was fenced by a newer broker of the same Host id
(EX_TEMPFAIL): it went NOT_SERVING first; ``maka up`` reports it and does not restart it (that would
fence the newer one back)."""

SERVICE_NAME = broker_pb2.DESCRIPTOR.services_by_name["CapabilityBrokerService"].full_name
_METHOD = f"/{SERVICE_NAME}/"
log = logging.getLogger("maka.broker.main")


class BrokerApp:
    """The broker as a ``services.core.serving.GrpcApp``: domain, HostLink and servicer."""

    service_names: Sequence[str] = (SERVICE_NAME,)
    method_roles: Mapping[str, frozenset[Role]] = {
        _METHOD + "Connect": frozenset({Role.PROVIDER}),
        _METHOD + "CallTool": frozenset({Role.CALLER}),
        _METHOD + "WatchCall": frozenset({Role.CALLER}),
        _METHOD + "Stop": frozenset({Role.CALLER}),
        _METHOD + "ListTools": frozenset({Role.CALLER}),
        _METHOD + "WatchTools": frozenset({Role.CALLER}),
        _METHOD + "ListSignIns": frozenset({Role.CALLER, Role.SURFACE}),
        _METHOD + "CompleteSignIn": frozenset({Role.CALLER, Role.SURFACE}),
        _METHOD + "SignOut": frozenset({Role.CALLER, Role.SURFACE}),
        _METHOD + "ReportServers": frozenset({Role.PROVIDER}),
        _METHOD + "GetStatus": frozenset({Role.CALLER, Role.SURFACE}),
    }

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.host_link = HostLink(
            settings.interaction_target,
            token=settings.interaction_token,
            max_message_bytes=settings.max_message_bytes,
            heartbeat_seconds=settings.heartbeat_seconds,
            queue_size=settings.stream_queue_size,
            on_settled=lambda interaction: self.broker.interaction_settled(interaction),
            on_stale=self._superseded,
            watched=lambda: self.broker.awaiting_interaction_ids(),
            host_id=settings.host_id,
        )
        self.broker = Broker(
            self.host_link,
            execution_timeout=settings.execution_timeout_seconds,
            max_execution_seconds=settings.max_execution_seconds,
            heartbeat_seconds=settings.heartbeat_seconds,
            form_wait_seconds=settings.form_wait_seconds,
            max_invocations_per_provider=settings.max_invocations_per_provider,
            queue_size=settings.stream_queue_size,
            call_keepalive_seconds=settings.call_keepalive_seconds,
            reattach_grace_seconds=settings.reattach_grace_seconds,
            host_id=settings.host_id,
            host_address=settings.advertise_address,
        )
        self.servicer = BrokerServicer(self.broker)
        self.fatal = asyncio.Event()
        """Set when this broker was superseded: ``serve`` then shuts down and exits ``exit_code``."""
        self.exit_code = SUPERSEDED_EXIT_CODE
        self._set_serving: Callable[[bool], Awaitable[None]] | None = None
        self._background: set[asyncio.Task[None]] = set()
        metrics.PENDING_FORMS.set_function(lambda: len(self.broker.awaiting_interaction_ids()))

    def bind_health(self, set_serving: Callable[[bool], Awaitable[None]]) -> None:
        """Keep the health setter so a superseded broker turns NOT_SERVING at once."""
        self._set_serving = set_serving

    def bind_readiness(self, set_ready: Callable[[bool], Awaitable[None]]) -> None:
        """The named health service ("takes new calls") follows :meth:`Broker.takes_new_calls`: SERVING once a
        provider registered, NOT_SERVING while none is, and at once on drain or shutdown."""

        def flip(ready: bool) -> None:
            task: asyncio.Task[None] = asyncio.ensure_future(set_ready(ready))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        self.broker.on_readiness = flip

    def ready(self) -> bool:
        """Readiness once started (``serve`` sets the named health service to it)."""
        return self.broker.takes_new_calls()

    def _superseded(self) -> None:
        """A newer broker fenced this Host epoch (HostLink STALE_EPOCH): fail the form-bound calls,
        go NOT_SERVING (out of rotation) and let ``serve`` exit ``SUPERSEDED_EXIT_CODE``
        (docs/design.md#host-epoch-and-fencing)."""
        log.error(
            "host_superseded",
            extra={"host_id": self.settings.host_id, "host_epoch": self.host_link.epoch, "code": SUPERSEDED_EXIT_CODE},
        )
        self.broker.host_stale()
        if self._set_serving is not None:
            task: asyncio.Task[None] = asyncio.ensure_future(self._set_serving(False))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self.fatal.set()

    def register(self, server: grpc.aio.Server) -> None:
        """Add the ``CapabilityBrokerService`` servicer."""
        broker_pb2_grpc.add_CapabilityBrokerServiceServicer_to_server(self.servicer, server)

    async def start(self) -> None:
        """Start the HostLink (new Host epoch) and the provider liveness sweep."""
        await self.host_link.start()
        await self.broker.start()

    async def stop(self) -> None:
        """Drain (``Settings.drain_budget_seconds``), then settle live invocations lost, close pending
        forms host_restarted, end streams, close the link."""
        await self.broker.drain(self.settings.drain_budget_seconds())
        await self.broker.shutdown(timeout=self.settings.grace_seconds)
        await self.host_link.stop()


async def build(settings: Settings) -> BrokerApp:
    """Build the broker app from ``settings`` (nothing connects until ``start``)."""
    return BrokerApp(settings)


async def main() -> None:
    """Run the broker until SIGINT/SIGTERM."""
    settings = Settings()
    logs.configure("broker", settings.log_level)
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    runner.run(main())
