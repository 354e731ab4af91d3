"""Test harness for the Interaction service: a real grpc.aio server over real Redis, and thin
HostLink (broker) / Attach (surface) clients that sort frames into queues."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.channels import open_channel
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings
from services.interaction.main import InteractionApp, build
from services.interaction.settings import Settings

BROKER_TOKEN = "broker-token-123"
ADMIN_SURFACE_TOKEN = "surface-all-123"
SURFACE_A_TOKEN = "surface-a-12345"
SURFACE_B_TOKEN = "surface-b-12345"
FRAME_TIMEOUT = 10.0


def write_tokens(path: Path) -> Path:
    """A tokens file: broker, a surface seeing every session, and surfaces seeing only s-a / s-b."""
    path.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
                    {"token": ADMIN_SURFACE_TOKEN, "name": "all", "roles": ["surface"]},
                    {"token": SURFACE_A_TOKEN, "name": "a", "roles": ["surface"], "sessions": ["s-a"]},
                    {"token": SURFACE_B_TOKEN, "name": "b", "roles": ["surface"], "sessions": ["s-b"]},
                ]
            }
        )
    )
    return path


def make_form(*, required: bool = True) -> form_pb2.Form:
    """A small deployment form: a required target string and an optional bounded integer."""
    return form_pb2.Form(
        message="Where should I deploy?",
        fields=[
            form_pb2.Field(
                name="target", label="Target", required=required, string=form_pb2.StringField(max_length=40)
            ),
            form_pb2.Field(name="replicas", label="Replicas", integer=form_pb2.NumberField(minimum=1, maximum=5)),
        ],
        requester=form_pb2.Requester(provider_id="prov-1", provider_display_name="Example", claimed_tool="deploy"),
    )


def accept(target: str = "prod", **extra: int) -> form_pb2.Answer:
    """An ``accept`` answer for :func:`make_form`."""
    values = {"target": form_pb2.Value(string_value=target)}
    values.update({k: form_pb2.Value(integer_value=v) for k, v in extra.items()})
    return form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values=values)


def binding(
    session: str = "s-a", invocation: str = "inv-1", made_for: interaction_pb2.Person | None = None
) -> interaction_pb2.Binding:
    """A complete binding for ``session`` / ``invocation`` (made for ``made_for`` when given)."""
    return interaction_pb2.Binding(
        made_for=made_for,
        session_id=session,
        turn_id="turn-1",
        tool_use_id="tu-1",
        invocation_id=invocation,
        registration_id="reg-1",
        connection_id="conn-1",
        provider_correlation_id="corr-1",
        tool_name="deploy:deploy",
    )


@dataclass
class Service:
    """A running Interaction service and how to reach it."""

    settings: Settings
    running: RunningServer
    app: InteractionApp

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.running.port}"

    def channel(self, token: str | None = None) -> grpc.aio.Channel:
        return open_channel(self.target, token=token, tls=ClientTlsSettings())


async def start_service(settings: Settings) -> Service:
    """Build and start the service in-process on 127.0.0.1:0."""
    app = await build(settings)
    assert isinstance(app, InteractionApp)
    running = await start_server(app, settings)
    return Service(settings, running, app)


@dataclass
class Link:
    """A broker's HostLink: replies in ``replies``, pushed settlements in ``settled``."""

    call: grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse]
    replies: asyncio.Queue[interaction_service_pb2.HostLinkResponse] = field(default_factory=asyncio.Queue)
    settled: asyncio.Queue[interaction_pb2.Interaction] = field(default_factory=asyncio.Queue)
    epoch: int = 0
    closed_count: int = 0
    _task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, channel: grpc.aio.Channel, *, resume_epoch: int = 0, watched: tuple[str, ...] = ()) -> Link:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        link = cls(stub.HostLink())
        hello = interaction_service_pb2.Hello(watched_interaction_ids=list(watched))
        if resume_epoch:
            hello.resume_epoch = resume_epoch
        else:
            hello.begin_new_epoch = True
        await link.call.write(interaction_service_pb2.HostLinkRequest(hello=hello))
        async with asyncio.timeout(FRAME_TIMEOUT):
            first = await link.call.read()
        assert isinstance(first, interaction_service_pb2.HostLinkResponse), first
        link.epoch, link.closed_count = first.epoch.host_epoch, first.epoch.closed_count
        link._task = asyncio.create_task(link._read())
        return link

    async def _read(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            while True:
                frame = await self.call.read()
                if not isinstance(frame, interaction_service_pb2.HostLinkResponse):  # grpc.aio.EOF
                    return
                if frame.WhichOneof("frame") == "settled":
                    await self.settled.put(frame.settled.interaction)
                else:
                    await self.replies.put(frame)

    async def request(
        self, request: interaction_service_pb2.HostLinkRequest
    ) -> interaction_service_pb2.HostLinkResponse:
        await self.call.write(request)
        async with asyncio.timeout(FRAME_TIMEOUT):
            return await self.replies.get()

    async def open(
        self,
        session: str = "s-a",
        invocation: str = "inv-1",
        *,
        form: form_pb2.Form | None = None,
        wait: float = 0,
        made_for: interaction_pb2.Person | None = None,
    ) -> interaction_pb2.Interaction:
        """Open a form and return the canonical record (fails the test on open_rejected)."""
        reply = await self.open_raw(session, invocation, form=form, wait=wait, made_for=made_for)
        assert reply.WhichOneof("frame") == "opened", reply
        return reply.opened.interaction

    async def open_raw(
        self,
        session: str = "s-a",
        invocation: str = "inv-1",
        *,
        form: form_pb2.Form | None = None,
        wait: float = 0,
        made_for: interaction_pb2.Person | None = None,
    ) -> interaction_service_pb2.HostLinkResponse:
        request = interaction_service_pb2.OpenInteraction(
            request_ref=f"ref-{invocation}", binding=binding(session, invocation, made_for)
        )
        request.form.CopyFrom(form if form is not None else make_form())
        if wait:
            request.wait.FromMilliseconds(int(wait * 1000))
        return await self.request(interaction_service_pb2.HostLinkRequest(open=request))

    async def send_open(self, ref: str, session: str = "s-a", invocation: str = "inv-1") -> None:
        """Write one open frame without waiting for its reply (pipelining)."""
        request = interaction_service_pb2.OpenInteraction(request_ref=ref, binding=binding(session, invocation))
        request.form.CopyFrom(make_form())
        await self.call.write(interaction_service_pb2.HostLinkRequest(open=request))

    async def replies_by_ref(self, count: int) -> dict[str, interaction_service_pb2.HostLinkResponse]:
        """The next ``count`` open replies (opened / open_rejected), keyed by ``request_ref``."""
        out: dict[str, interaction_service_pb2.HostLinkResponse] = {}
        async with asyncio.timeout(FRAME_TIMEOUT * 3):
            while len(out) < count:
                reply = await self.replies.get()
                kind = reply.WhichOneof("frame")
                assert kind in ("opened", "open_rejected"), reply
                ref = reply.opened.request_ref if kind == "opened" else reply.open_rejected.request_ref
                assert ref not in out, ref
                out[ref] = reply
        return out

    async def open_many(self, count: int, sessions: int) -> dict[str, str]:
        """Open ``count`` forms pipelined over ``sessions`` sessions (``s-0``...); returns id → session."""
        for n in range(count):
            await self.send_open(f"ref-{n}", f"s-{n % sessions}", f"inv-{n}")
        replies = await self.replies_by_ref(count)
        opened = {
            r.opened.interaction.interaction_id: r.opened.interaction.binding.session_id for r in replies.values()
        }
        assert len(opened) == count, [r for r in replies.values() if r.WhichOneof("frame") != "opened"][:1]
        return opened

    async def next_settled(self) -> interaction_pb2.Interaction:
        async with asyncio.timeout(FRAME_TIMEOUT):
            return await self.settled.get()

    async def close(self) -> None:
        self.call.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class Surface:
    """A surface's Attach stream: every frame lands in ``frames``."""

    call: grpc.aio.StreamStreamCall[interaction_service_pb2.AttachRequest, interaction_service_pb2.AttachResponse]
    frames: asyncio.Queue[interaction_service_pb2.AttachResponse] = field(default_factory=asyncio.Queue)
    error: grpc.aio.AioRpcError | None = None
    token: str = ""
    _stash: list[interaction_service_pb2.AttachResponse] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    @classmethod
    async def attach(
        cls, channel: grpc.aio.Channel, sessions: tuple[str, ...] = ("s-a",), token: str = "", surface_kind: str = ""
    ) -> Surface:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        surface = cls(stub.Attach())
        await surface.call.write(
            interaction_service_pb2.AttachRequest(
                subscribe=interaction_service_pb2.Subscribe(
                    session_ids=list(sessions), resume_token=token, surface_kind=surface_kind
                )
            )
        )
        surface._task = asyncio.create_task(surface._read())
        return surface

    async def _read(self) -> None:
        try:
            async for frame in self.call:
                kind = frame.WhichOneof("frame")
                if kind == "snapshot":
                    self.token = frame.snapshot.resume_token
                elif kind == "event":
                    self.token = frame.event.resume_token
                await self.frames.put(frame)
        except grpc.aio.AioRpcError as error:
            self.error = error
        except asyncio.CancelledError:
            pass

    async def next(self, kind: str | None = None) -> interaction_service_pb2.AttachResponse:
        """The oldest unconsumed frame (of ``kind`` when given; other frames stay queued), bounded by
        FRAME_TIMEOUT. Events and answer outcomes may interleave in either order."""
        async with asyncio.timeout(FRAME_TIMEOUT):
            while True:
                for index, frame in enumerate(self._stash):
                    if kind is None or frame.WhichOneof("frame") == kind:
                        return self._stash.pop(index)
                self._stash.append(await self.frames.get())

    async def ended(self) -> None:
        """Wait (bounded by FRAME_TIMEOUT) until the stream ended; its error, if any, is in ``error``."""
        assert self._task is not None
        async with asyncio.timeout(FRAME_TIMEOUT):
            await self._task

    async def next_or_end(self) -> interaction_service_pb2.AttachResponse | None:
        """The next frame, or ``None`` once the stream ended with nothing left (bounded by FRAME_TIMEOUT)."""
        assert self._task is not None
        if self._stash:
            return self._stash.pop(0)
        getter = asyncio.ensure_future(self.frames.get())
        async with asyncio.timeout(FRAME_TIMEOUT):
            await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()
        return None if self.frames.empty() else self.frames.get_nowait()

    async def events(self, count: int) -> list[interaction_pb2.InteractionEvent]:
        return [(await self.next("event")).event.event for _ in range(count)]

    async def answer(self, submission_id: str, interaction_id: str, answer: form_pb2.Answer) -> None:
        await self.call.write(
            interaction_service_pb2.AttachRequest(
                answer=interaction_service_pb2.SubmitAnswer(
                    submission_id=submission_id, interaction_id=interaction_id, answer=answer
                )
            )
        )

    async def close(self) -> None:
        self.call.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@contextlib.asynccontextmanager
async def channel(service: Service, token: str | None = None) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to ``service`` closed on exit."""
    ch = service.channel(token)
    try:
        yield ch
    finally:
        await ch.close()
