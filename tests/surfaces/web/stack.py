"""A real stack for web-surface tests: the Interaction service (in-process, real Redis), the broker's
``HostLink`` played by :class:`tests.surfaces.helpers.BrokerLink`, and the web surface on uvicorn.

- :func:`running_stack` — async context manager for async tests (everything in the test's loop).
- :class:`WebStackThread` — the same stack in a background thread with its own loop, for the sync
  Playwright tests (the sync Playwright API cannot run inside an active asyncio loop).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc.aio
from pydantic import SecretStr

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.serving import RunningServer, start_server
from services.interaction.main import build as build_interaction
from services.interaction.settings import Settings as InteractionSettings
from surfaces.web.main import RunningWeb, WebApp, start_web
from surfaces.web.main import build as build_web
from surfaces.web.settings import WebSettings
from tests.helpers.loop_thread import LoopThread
from tests.surfaces.helpers import BrokerLink

T = TypeVar("T")


def every_kind_form(message: str = "Where should build-42 go?") -> form_pb2.Form:
    """A form with every field kind, defaults, descriptions, required marks and a long option list."""
    regions = [form_pb2.Option(value=f"region-{i:02d}", label=f"Region {i:02d}") for i in range(1, 21)]
    regions.append(form_pb2.Option(value="mars-base", label="Mars Base Alpha"))
    return form_pb2.Form(
        message=message,
        requester=form_pb2.Requester(
            provider_id="mcp-provider-1",
            provider_display_name="Local MCP provider",
            claimed_server="deployer",
            claimed_tool="deploy",
        ),
        fields=[
            form_pb2.Field(
                name="environment",
                label="Environment",
                description="Where the artifact is deployed.",
                required=True,
                single_select=form_pb2.SingleSelectField(
                    options=[
                        form_pb2.Option(value="staging", label="Staging"),
                        form_pb2.Option(value="production", label="Production"),
                    ],
                    default_value="staging",
                ),
            ),
            form_pb2.Field(
                name="region",
                label="Region",
                required=True,
                single_select=form_pb2.SingleSelectField(options=regions),
            ),
            form_pb2.Field(
                name="channels",
                label="Notify channels",
                description="Pick one or two.",
                multi_select=form_pb2.MultiSelectField(
                    options=[
                        form_pb2.Option(value="email", label="Email"),
                        form_pb2.Option(value="chat", label="Chat"),
                        form_pb2.Option(value="pager", label="Pager"),
                    ],
                    min_items=1,
                    max_items=2,
                    default_value=form_pb2.StringList(values=["chat"]),
                ),
            ),
            form_pb2.Field(
                name="replicas",
                label="Replicas",
                required=True,
                integer=form_pb2.NumberField(minimum=1, maximum=10, default_value=2),
            ),
            form_pb2.Field(
                name="canary",
                label="Canary share",
                description="Fraction of traffic for the canary.",
                number=form_pb2.NumberField(minimum=0, maximum=1),
            ),
            form_pb2.Field(name="confirm", label="I have read the release notes", boolean=form_pb2.BooleanField()),
            form_pb2.Field(
                name="contact",
                label="Contact email",
                string=form_pb2.StringField(format=form_pb2.STRING_FORMAT_EMAIL),
            ),
            form_pb2.Field(
                name="dashboard",
                label="Dashboard URL",
                string=form_pb2.StringField(format=form_pb2.STRING_FORMAT_URI),
            ),
            form_pb2.Field(
                name="window_day",
                label="Window day",
                string=form_pb2.StringField(format=form_pb2.STRING_FORMAT_DATE, default_value="2026-12-01"),
            ),
            form_pb2.Field(
                name="window_start",
                label="Window start",
                string=form_pb2.StringField(format=form_pb2.STRING_FORMAT_DATE_TIME),
            ),
            form_pb2.Field(
                name="note",
                label="Release note",
                description="Shown to the on-call engineer.",
                string=form_pb2.StringField(min_length=3, max_length=80, default_value="Routine deploy"),
            ),
        ],
    )


def text_form(message: str, *, claimed_tool: str = "deploy", required: bool = True) -> form_pb2.Form:
    """A one-field form (a required text ``target``)."""
    return form_pb2.Form(
        message=message,
        requester=form_pb2.Requester(
            provider_id="mcp-provider-1",
            provider_display_name="Local MCP provider",
            claimed_server="deployer",
            claimed_tool=claimed_tool,
        ),
        fields=[
            form_pb2.Field(name="target", label="Target", required=required, string=form_pb2.StringField(min_length=1))
        ],
    )


@dataclass
class WebStack:
    """A running Interaction service, a broker link on it, and (optionally) web surfaces."""

    interaction: RunningServer
    target: str
    channel: grpc.aio.Channel
    link: BrokerLink

    async def web(
        self,
        sessions: Sequence[str] = (),
        token: str = "",
        listen: str = "127.0.0.1:0",
        *,
        undo_seconds: float = 0.0,
        **settings_fields: Any,
    ) -> tuple[WebApp, RunningWeb]:
        """Start a web surface on ``listen`` (127.0.0.1:0) showing ``sessions`` (empty: all); Dismiss sends at
        once unless ``undo_seconds`` gives it an undo countdown."""
        settings = WebSettings(
            interaction_target=self.target,
            web_listen=listen,
            sessions=list(sessions),
            surface_token=SecretStr(token),
            web_undo_seconds=undo_seconds,
            **settings_fields,
        )
        app = await build_web(settings)
        return app, await start_web(app, settings)


def interaction_settings(redis_url: str, **fields: Any) -> InteractionSettings:
    """Interaction-service settings for tests: port 0, a private Host id, long leases (no heartbeats needed);
    ``fields`` sets more (e.g. ``approver_policies_file``)."""
    return InteractionSettings(
        listen="127.0.0.1:0",
        redis_url=redis_url,
        host_id=f"web-{uuid.uuid4().hex[:10]}",
        lease_seconds=600,
        grace_seconds=0.5,
        **fields,
    )


@asynccontextmanager
async def running_stack(redis_url: str, **fields: Any) -> AsyncIterator[WebStack]:
    """The Interaction service (more settings in ``fields``) + a broker link, in this loop; stopped on exit."""
    settings = interaction_settings(redis_url, **fields)
    app = await build_interaction(settings)
    server = await start_server(app, settings)
    target = f"127.0.0.1:{server.port}"
    channel = grpc.aio.insecure_channel(target)
    try:
        async with BrokerLink(channel) as link:
            yield WebStack(interaction=server, target=target, channel=channel, link=link)
    finally:
        await channel.close()
        await server.stop()


class WebStackThread:
    """:func:`running_stack` in a background thread with its own event loop (for sync browser tests).

    ``run(coro)`` executes a coroutine on that loop and returns its result (bounded wait).
    """

    def __init__(self, redis_url: str, **interaction_fields: Any) -> None:
        self._redis_url = redis_url
        self._fields = interaction_fields
        self._thread = LoopThread("web-test-stack")
        self._cm: Any = None
        self.stack: WebStack | None = None
        self._webs: list[tuple[WebApp, RunningWeb]] = []

    def start(self) -> WebStack:
        """Start the loop and the stack; returns the stack."""
        self._thread.start()
        self._cm = running_stack(self._redis_url, **self._fields)
        self.stack = self.run(self._cm.__aenter__())
        return self.stack

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
        """Run ``coro`` on the stack's loop and wait for its result."""
        return self._thread.run(coro, timeout)

    def web(
        self, sessions: Sequence[str] = (), token: str = "", *, undo_seconds: float = 0.0, **settings_fields: Any
    ) -> str:
        """Start a web surface for ``sessions`` (more ``WebSettings`` fields in ``settings_fields``); returns its
        base URL (stopped with the stack)."""
        assert self.stack is not None
        app, running = self.run(self.stack.web(sessions, token, undo_seconds=undo_seconds, **settings_fields))
        self._webs.append((app, running))
        return running.url

    def open(
        self,
        form: form_pb2.Form,
        session_id: str,
        *,
        wait_seconds: int = 0,
        made_for: interaction_pb2.Person | None = None,
    ) -> interaction_pb2.Interaction:
        """Open ``form`` in ``session_id`` through the broker link (a fresh invocation; a call made for
        ``made_for`` when given)."""
        assert self.stack is not None
        return self.run(self.stack.link.open(form, session_id=session_id, wait_seconds=wait_seconds, made_for=made_for))

    def close(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """Close a pending form through the broker link."""
        assert self.stack is not None
        self.run(self.stack.link.close(interaction_id, reason))

    def deliver(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
    ) -> None:
        """Report an answered form's delivery through the broker link."""
        assert self.stack is not None
        self.run(self.stack.link.deliver(interaction_id, delivery, lost_reason))

    def get(self, interaction_id: str) -> interaction_pb2.Interaction:
        """The Interaction as the service stores it."""
        assert self.stack is not None
        stub = interaction_service_pb2_grpc.InteractionServiceStub(self.stack.channel)
        request = interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id)

        async def fetch() -> interaction_pb2.Interaction:
            return (await stub.GetInteraction(request)).interaction

        return self.run(fetch())

    def stop(self) -> None:
        """Stop web surfaces, the stack and the loop."""

        async def shutdown() -> None:
            for app, running in self._webs:
                await running.stop()
                await app.close()
            if self._cm is not None:
                await self._cm.__aexit__(None, None, None)

        try:
            self.run(shutdown())
        finally:
            self._thread.stop(10)


@dataclass
class PoolStack:
    """One Interaction service serving several Hosts, one broker link per Host (``links``), and web surfaces."""

    interaction: RunningServer
    target: str
    channel: grpc.aio.Channel
    links: dict[str, BrokerLink]

    async def web(self, **settings_fields: Any) -> tuple[WebApp, RunningWeb]:
        """Start a web surface (``settings_fields``: e.g. ``host_ids="*"``) on a free loopback port."""
        settings = WebSettings(interaction_target=self.target, web_listen="127.0.0.1:0", **settings_fields)
        app = await build_web(settings)
        return app, await start_web(app, settings)

    async def get(self, host_id: str, interaction_id: str) -> interaction_pb2.Interaction:
        """The Interaction as ``host_id``'s store holds it."""
        stub = interaction_service_pb2_grpc.InteractionServiceStub(self.channel)
        request = interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id, host_id=host_id)
        return (await stub.GetInteraction(request)).interaction


@asynccontextmanager
async def running_pool(redis_url: str, hosts: Sequence[str]) -> AsyncIterator[PoolStack]:
    """The Interaction service serving ``hosts`` (``MAKA_HOST_IDS``) and a broker link per Host, in this loop."""
    settings = interaction_settings(redis_url).model_copy(update={"host_id": hosts[0], "host_ids": ",".join(hosts)})
    app = await build_interaction(settings)
    server = await start_server(app, settings)
    target = f"127.0.0.1:{server.port}"
    channel = grpc.aio.insecure_channel(target)
    links: dict[str, BrokerLink] = {}
    try:
        for host in hosts:
            links[host] = await BrokerLink(channel, host_id=host).__aenter__()
        yield PoolStack(interaction=server, target=target, channel=channel, links=links)
    finally:
        for link in links.values():
            await link.__aexit__(None, None, None)
        await channel.close()
        await server.stop()
