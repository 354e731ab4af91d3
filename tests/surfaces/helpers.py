"""Test helpers for the surfaces: screen text of a Textual app, a scripted forms backend, and a HostLink
player that opens forms on the real Interaction service the way the broker does."""

from __future__ import annotations

import asyncio
import html
import re
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from google.protobuf import duration_pb2
from textual.app import App

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from maka_client import AttachedSurface, InteractionErrorReason, MakaError
from services.core.auth import bearer_metadata
from services.core.form import Answer, Form
from services.core.key_file import generate_key_file
from services.core.serving import RunningServer, start_server
from surfaces.common.interactions import (
    AttachEvent,
    CloseReason,
    InteractionState,
    InteractionView,
)

_TEXT = re.compile(r'<text[^>]*\by="([0-9.]+)"[^>]*>(.*?)</text>', re.DOTALL)


def screen_text(app: App[Any]) -> str:
    """What the terminal shows right now, line by line (from the app's SVG screenshot)."""
    svg = app.export_screenshot()
    lines: dict[float, list[str]] = {}
    for y, text in _TEXT.findall(svg):
        lines.setdefault(float(y), []).append(html.unescape(text).replace("\xa0", " "))
    return "\n".join("".join(parts) for _, parts in sorted(lines.items()))


def view_of(
    form: Form,
    *,
    interaction_id: str = "ix-1",
    session_id: str = "s1",
    tool_name: str = "deployer:deploy",
    expires_at: datetime | None = None,
) -> InteractionView:
    """A pending :class:`InteractionView` around ``form`` (for scripted feeds)."""
    return InteractionView(
        interaction_id=interaction_id,
        session_id=session_id,
        turn_id="t1",
        tool_use_id="tu1",
        tool_name=tool_name,
        host_epoch=1,
        state=InteractionState.PENDING,
        form=form,
        answer=None,
        close_reason=CloseReason.UNSPECIFIED,
        created_at=None,
        expires_at=expires_at,
        settled_at=None,
        proto=interaction_pb2.Interaction(),
    )


@dataclass
class ScriptedBackend:
    """A :class:`surfaces.tui.app.FormsBackend` fed by the test: put events (or an exception to raise) on
    ``events``; answers are recorded in ``answers`` and fail with ``answer_error`` when set; ``get``
    serves ``known``."""

    events: asyncio.Queue[AttachEvent | Exception] = field(default_factory=lambda: asyncio.Queue())
    answers: list[tuple[str, Answer, str | None, str]] = field(default_factory=lambda: [])
    answer_error: MakaError | None = None
    attached: list[tuple[str, ...]] = field(default_factory=lambda: [])
    closed: bool = False
    known: dict[str, InteractionView] = field(default_factory=lambda: {})
    """What ``get`` returns, by id (NOT_FOUND otherwise)."""
    surfaces: list[AttachedSurface] = field(default_factory=lambda: [])
    """What ``list_surfaces`` returns (it raises ``surfaces_error`` when set)."""
    surfaces_error: MakaError | None = None
    surfaces_asked: int = 0
    """How many times ``list_surfaces`` was called."""

    async def attach(self, session_ids: Sequence[str] = (), resume_token: str = "") -> AsyncIterator[AttachEvent]:
        self.attached.append(tuple(session_ids))
        while True:
            item = await self.events.get()
            if isinstance(item, Exception):
                raise item
            yield item

    async def answer(
        self,
        interaction_id: str,
        answer: Answer,
        *,
        submission_id: str | None = None,
        session_id: str = "",
    ) -> InteractionView:
        self.answers.append((interaction_id, answer, submission_id, session_id))
        if self.answer_error is not None:
            raise self.answer_error
        view = view_of(Form(message="", fields=()), interaction_id=interaction_id, session_id=session_id)
        return replace(view, state=InteractionState.ANSWERED, answer=answer, close_reason=CloseReason.ANSWERED)

    async def get(self, interaction_id: str, *, session_id: str = "") -> InteractionView:
        view = self.known.get(interaction_id)
        if view is None:
            raise MakaError(grpc.StatusCode.NOT_FOUND, "no such interaction", reason=InteractionErrorReason.NOT_FOUND)
        return view

    async def list_surfaces(self) -> tuple[list[AttachedSurface], int]:
        self.surfaces_asked += 1
        if self.surfaces_error is not None:
            raise self.surfaces_error
        return list(self.surfaces), 0

    async def close(self) -> None:
        self.closed = True


class BrokerLink:
    """Plays the Capability broker on the Interaction service's ``HostLink``: ``hello`` with
    ``begin_new_epoch`` (or ``resume_epoch`` when given: a broker whose link dropped), then ``open``
    forms and ``close`` them, reading the ordered replies.

    Use as ``async with BrokerLink(channel) as link:``; the stream stays open (so leases live) until exit.
    """

    def __init__(
        self, channel: grpc.aio.Channel, *, resume_epoch: int = 0, token: str | None = None, host_id: str = ""
    ) -> None:
        self._stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        self.host_id = host_id
        """The Host this broker serves (``Hello.host_id``; empty: the tier's only Host)."""
        self._metadata = bearer_metadata(token)
        self._resume_epoch = resume_epoch
        self._tag = uuid.uuid4().hex[:8]
        self._call: (
            grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse]
            | None
        ) = None
        self.epoch = 0
        self.settled: list[interaction_pb2.Interaction] = []
        self._settled_taken = 0
        self._refs = 0

    async def __aenter__(self) -> BrokerLink:
        self._call = self._stub.HostLink(metadata=self._metadata)
        hello = (
            interaction_service_pb2.Hello(resume_epoch=self._resume_epoch, host_id=self.host_id)
            if self._resume_epoch
            else interaction_service_pb2.Hello(begin_new_epoch=True, host_id=self.host_id)
        )
        await self._call.write(interaction_service_pb2.HostLinkRequest(hello=hello))
        reply = await self._read("epoch")
        self.epoch = reply.epoch.host_epoch
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._call is not None:
            self._call.cancel()

    async def _read(self, frame: str) -> interaction_service_pb2.HostLinkResponse:
        assert self._call is not None
        async with asyncio.timeout(10):
            while True:
                reply = await self._call.read()
                assert isinstance(reply, interaction_service_pb2.HostLinkResponse), "HostLink ended"
                kind = reply.WhichOneof("frame")
                if kind == "settled":
                    self.settled.append(reply.settled.interaction)
                    if frame != "settled":
                        continue
                assert kind in (frame, "open_rejected"), f"expected {frame}, got {kind}: {reply}"
                return reply

    async def open(
        self,
        form: form_pb2.Form,
        *,
        session_id: str = "s1",
        invocation_id: str | None = None,
        tool_name: str = "deployer:deploy",
        wait_seconds: int = 0,
        made_for: interaction_pb2.Person | None = None,
    ) -> interaction_pb2.Interaction:
        """Open ``form`` for a fresh invocation of ``session_id`` (made for ``made_for`` when given); returns the
        stored Interaction."""
        assert self._call is not None
        self._refs += 1
        ref = f"r{self._refs}"
        binding = interaction_pb2.Binding(
            session_id=session_id,
            turn_id="turn-1",
            tool_use_id=f"tu-{self._refs}",
            invocation_id=invocation_id or f"inv-{self._tag}-{self._refs}",
            registration_id="reg-1",
            connection_id="conn-1",
            provider_correlation_id=f"corr-{self._refs}",
            tool_name=tool_name,
            made_for=made_for,
        )
        await self._call.write(
            interaction_service_pb2.HostLinkRequest(
                open=interaction_service_pb2.OpenInteraction(
                    request_ref=ref, binding=binding, form=form, wait=duration_pb2.Duration(seconds=wait_seconds)
                )
            )
        )
        reply = await self._read("opened")
        assert reply.WhichOneof("frame") == "opened", f"open rejected: {reply.open_rejected}"
        return reply.opened.interaction

    async def next_settled(self) -> interaction_pb2.Interaction:
        """The next settlement pushed to this broker (``settled`` frames, in order; read when none is buffered)."""
        if self._settled_taken >= len(self.settled):
            await self._read("settled")
        self._settled_taken += 1
        return self.settled[self._settled_taken - 1]

    async def close(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """Close a pending form with ``reason`` (stop, provider lost, ...)."""
        assert self._call is not None
        await self._call.write(
            interaction_service_pb2.HostLinkRequest(
                close=interaction_service_pb2.CloseInteraction(interaction_id=interaction_id, reason=reason)
            )
        )
        await self._read("closed")

    async def deliver(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
    ) -> interaction_service_pb2.DeliveryRecorded:
        """Report an answered form's delivery (``ReportDelivery``), as the broker does."""
        assert self._call is not None
        await self._call.write(
            interaction_service_pb2.HostLinkRequest(
                delivery=interaction_service_pb2.ReportDelivery(
                    interaction_id=interaction_id, delivery=delivery, lost_reason=lost_reason
                )
            )
        )
        return (await self._read("delivery_recorded")).delivery_recorded


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (for a server that must come back on the same address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LiveInteraction:
    """A running in-process Interaction service: its address, a channel to it, and the broker's link."""

    address: str
    channel: grpc.aio.Channel
    link: BrokerLink
    server: RunningServer


_ANSWER_KEY: list[Path] = []


def _answer_key() -> Path:
    """One answer key for every in-process Interaction service of this test process (a restarted service
    reads what the earlier one sealed)."""
    if not _ANSWER_KEY:
        path = Path(tempfile.mkdtemp(prefix="maka-test-answer-key-")) / "answer.key"
        generate_key_file(path)
        _ANSWER_KEY.append(path)
    return _ANSWER_KEY[0]


@asynccontextmanager
async def interaction_service(
    redis_url: str,
    *,
    port: int = 0,
    resume_epoch: int = 0,
    broker_token: str | None = None,
    link_host_id: str = "",
    **settings: Any,
) -> AsyncIterator[LiveInteraction]:
    """Start the real Interaction service (``services.interaction.main.build`` + ``start_server``) on
    ``127.0.0.1:port`` over ``redis_url``, with a :class:`BrokerLink` that began a new Host epoch (or
    resumed ``resume_epoch``; authenticating with ``broker_token``; for Host ``link_host_id``, empty: the only
    one). Extra keyword arguments are
    Interaction ``Settings`` fields. Stopping ``server`` early (to simulate an outage) is allowed."""
    from services.interaction.main import build
    from services.interaction.settings import Settings

    # The reaper ticks rarely here: surface tests never rely on it, and a cancel landing mid-tick can be
    # swallowed (InteractionApp.stop then waits forever on the reaper task; reported to the service owner).
    settings.setdefault("reaper_interval_seconds", 30.0)
    settings.setdefault("answer_key_file", _answer_key())  # answers sealed, as every shipped stack runs
    config = Settings(listen=f"127.0.0.1:{port}", redis_url=redis_url, grace_seconds=0.5, **settings)
    server = await start_server(await build(config), config)
    address = f"127.0.0.1:{server.port}"
    channel = grpc.aio.insecure_channel(address)
    try:
        async with BrokerLink(channel, resume_epoch=resume_epoch, token=broker_token, host_id=link_host_id) as link:
            yield LiveInteraction(address=address, channel=channel, link=link, server=server)
    finally:
        await channel.close()
        await server.stop()  # also when the test stopped it (an outage): stopping again is harmless, and an error shows


def text_field(name: str, *, label: str = "", required: bool = False) -> form_pb2.Field:
    """A plain string field."""
    return form_pb2.Field(name=name, label=label or name, required=required, string=form_pb2.StringField())


def deploy_form(message: str = "Where should build-42 go?") -> form_pb2.Form:
    """The deploy-target form: environment select (default staging), replica count, dry-run flag, regions."""
    envs = [form_pb2.Option(value="staging", label="Staging"), form_pb2.Option(value="production", label="Production")]
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
                required=True,
                single_select=form_pb2.SingleSelectField(options=envs, default_value="staging"),
            ),
            form_pb2.Field(
                name="replicas",
                label="Replicas",
                description="How many copies to run.",
                integer=form_pb2.NumberField(minimum=1, maximum=10, default_value=2),
            ),
            form_pb2.Field(name="dry_run", label="Dry run", boolean=form_pb2.BooleanField()),
            form_pb2.Field(
                name="regions",
                label="Regions",
                multi_select=form_pb2.MultiSelectField(
                    options=[form_pb2.Option(value="eu", label="Europe"), form_pb2.Option(value="us", label="US")],
                    max_items=2,
                ),
            ),
        ],
    )
