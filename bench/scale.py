"""Scale: many forms pending at once in a running stack.

The forms are opened through the Interaction service's ``HostLink`` directly, **playing the broker**
(resuming the real broker's Host epoch), not through real MCP calls: opening 10,000 forms through
10,000 live ``tools/call`` invocations would measure the example server and the provider instead.
Delivery is measured to a real ``Attach`` subscriber (:class:`Interactions`, as every surface uses).

Measured (see :class:`ScaleResult`): Redis bytes per pending form (``INFO memory`` ``used_memory`` delta /
count), each process's RSS (``/proc/<pid>/status`` ``VmRSS``), open-to-surface delivery delay while the
forms are pending, and the time to close them all when a new Host epoch begins (RFC criterion 9:
``host_restarted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc.aio
import redis.asyncio

from bench.stats import Summary, summarize
from bench.system import rss_kib
from examples.deploy_server import DEPLOY_MESSAGE, DEPLOY_SCHEMA
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.channels import open_channel
from services.core.form import Requester, decode_requested_schema, form_to_proto
from services.interaction.keys import Keys
from surfaces.common.interactions import CloseReason, FormClosed, FormOpened, FormSnapshot, Interactions

OPEN_TIMEOUT = 30.0
"""Seconds one open (or one probe's delivery) may take before the scale run fails."""


def deploy_form() -> form_pb2.Form:
    """The example ``deploy`` form as the provider would send it (decoded from the server's schema)."""
    requester = Requester("mcp:examples", "examples", "examples", "deploy")
    form = decode_requested_schema(DEPLOY_SCHEMA, message=DEPLOY_MESSAGE, requester=requester)
    return form_to_proto(form)


@dataclass
class ScaleResult:
    """What the scale run measured (times in ms summaries or seconds, memory in bytes/KiB)."""

    pending: int
    sessions: int
    redis_used_memory_before: int
    redis_used_memory_after: int
    redis_bytes_per_form: float
    rss_kib_before: dict[str, int]
    rss_kib_after: dict[str, int]
    fill_s: float
    fill_opens_per_s: float
    delivery_during_fill: Summary
    delivery_at_full: Summary
    epoch_change_closed: int
    epoch_change_reply_s: float
    epoch_change_surface_s: float
    notes: list[str] = field(default_factory=lambda: list[str]())
    delivery_at_full_ms: list[float] = field(default_factory=lambda: list[float]())

    def to_json(self) -> dict[str, object]:
        """For ``latest.json``."""
        return {
            "pending": self.pending,
            "sessions": self.sessions,
            "redis_used_memory_before": self.redis_used_memory_before,
            "redis_used_memory_after": self.redis_used_memory_after,
            "redis_bytes_per_pending_form": round(self.redis_bytes_per_form, 1),
            "rss_kib_before": self.rss_kib_before,
            "rss_kib_after": self.rss_kib_after,
            "fill_s": round(self.fill_s, 3),
            "fill_opens_per_s": round(self.fill_opens_per_s, 1),
            "delivery_during_fill_ms": self.delivery_during_fill.to_json(),
            "delivery_at_full_ms": self.delivery_at_full.to_json(),
            "epoch_change_closed": self.epoch_change_closed,
            "epoch_change_reply_s": round(self.epoch_change_reply_s, 3),
            "epoch_change_surface_s": round(self.epoch_change_surface_s, 3),
            "notes": self.notes,
        }


class BrokerPlayer:
    """A ``HostLink`` stream playing the broker: ``hello`` (resume the current epoch, or begin a new one),
    then pipelined ``open`` frames matched to their replies by ``request_ref``."""

    def __init__(self, stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub) -> None:
        self._stub = stub
        self._call: (
            grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse]
            | None
        ) = None
        self._waiting: dict[str, asyncio.Future[interaction_pb2.Interaction]] = {}
        self._refs = itertools.count()
        self._reader: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()  # grpc.aio allows one write in flight per stream
        self.epoch = 0
        self.closed_count = 0

    async def hello(self, hello: interaction_service_pb2.Hello) -> None:
        """Send ``hello`` and wait for ``EpochBegun`` (sets :attr:`epoch`, :attr:`closed_count`)."""
        self._call = self._stub.HostLink()
        await self._call.write(interaction_service_pb2.HostLinkRequest(hello=hello))
        first = await self._call.read()
        if not isinstance(first, interaction_service_pb2.HostLinkResponse) or first.WhichOneof("frame") != "epoch":
            raise RuntimeError(f"HostLink answered hello with {first!r}")
        self.epoch = first.epoch.host_epoch
        self.closed_count = first.epoch.closed_count
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._call is not None
        while True:
            response = await self._call.read()
            if not isinstance(response, interaction_service_pb2.HostLinkResponse):
                break
            frame = response.WhichOneof("frame")
            if frame == "opened":
                future = self._waiting.pop(response.opened.request_ref, None)
                if future is not None and not future.done():
                    future.set_result(response.opened.interaction)
            elif frame == "open_rejected":
                future = self._waiting.pop(response.open_rejected.request_ref, None)
                if future is not None and not future.done():
                    rejected = response.open_rejected
                    future.set_exception(RuntimeError(f"open rejected: {rejected.reason} {rejected.message}"))
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("HostLink ended"))

    async def open(self, binding: interaction_pb2.Binding, form: form_pb2.Form) -> interaction_pb2.Interaction:
        """Open one form; returns the canonical record. Raises RuntimeError when rejected."""
        assert self._call is not None
        ref = str(next(self._refs))
        future: asyncio.Future[interaction_pb2.Interaction] = asyncio.get_running_loop().create_future()
        self._waiting[ref] = future
        frame = interaction_service_pb2.HostLinkRequest(
            open=interaction_service_pb2.OpenInteraction(request_ref=ref, binding=binding, form=form)
        )
        async with self._write_lock:
            await self._call.write(frame)
        async with asyncio.timeout(OPEN_TIMEOUT):
            return await future

    async def close(self) -> None:
        """End the stream."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._reader
        if self._call is not None:
            self._call.cancel()


class Subscriber:
    """A real ``Attach`` subscriber of every session: notes when each form (by tool use id) arrives and
    counts ``host_restarted`` closures."""

    def __init__(self, client: Interactions) -> None:
        self._client = client
        self.subscribed = asyncio.Event()
        self.received: dict[str, float] = {}
        self.received_target = 0
        self.all_received = asyncio.Event()
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self.restarted = 0
        self.restarted_target = 0
        self.all_restarted = asyncio.Event()

    def expect(self, tool_use_id: str) -> asyncio.Future[float]:
        """A future resolved with the arrival time (perf_counter s) of ``tool_use_id``'s form."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters[tool_use_id] = future
        return future

    async def run(self) -> None:
        """Attach (all sessions) until cancelled."""
        async for event in self._client.attach(()):
            now = time.perf_counter()
            if isinstance(event, FormSnapshot):
                self.subscribed.set()
            elif isinstance(event, FormOpened):
                key = event.interaction.tool_use_id
                self.received[key] = now
                if self.received_target and len(self.received) >= self.received_target:
                    self.all_received.set()
                waiter = self._waiters.pop(key, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(now)
            elif isinstance(event, FormClosed) and event.reason is CloseReason.HOST_RESTARTED:
                self.restarted += 1
                if self.restarted_target and self.restarted >= self.restarted_target:
                    self.all_restarted.set()


async def _used_memory(client: redis.asyncio.Redis) -> int:
    info = await client.info("memory")
    return int(info["used_memory"])


def _rss(pids: dict[str, int]) -> dict[str, int]:
    return {name: kib for name, pid in pids.items() if (kib := rss_kib(pid)) is not None}


@contextlib.asynccontextmanager
async def _running(coro_task: asyncio.Task[None]) -> AsyncIterator[None]:
    try:
        yield
    finally:
        coro_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await coro_task


async def run_scale(
    *,
    interaction: str,
    redis_url: str,
    host_id: str,
    pids: dict[str, int],
    pending: int,
    sessions: int,
    window: int,
    probes: int,
) -> ScaleResult:
    """Open ``pending`` forms (``window`` in flight, spread over ``sessions`` sessions) on the running stack,
    then ``probes`` more one at a time while they are all pending; measure; then begin a new Host epoch.

    Raises RuntimeError/TimeoutError when an open is rejected or a delivery does not arrive in time.
    """
    form = deploy_form()
    notes = [
        "forms opened through HostLink directly (the benchmark plays the broker, resuming its epoch); "
        "delivery measured to a real Attach subscriber of every session",
        "delivery = Attach event received at the subscriber - open frame written on HostLink (same process clock)",
    ]
    redis_client = redis.asyncio.Redis.from_url(redis_url)
    try:
        epoch_raw = await redis_client.get(Keys(host_id).epoch())
        epoch = int(epoch_raw or 0)
        async with open_channel(interaction) as channel, Interactions.connect(interaction) as client:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            subscriber = Subscriber(client)
            async with _running(asyncio.create_task(subscriber.run())):
                async with asyncio.timeout(OPEN_TIMEOUT):
                    await subscriber.subscribed.wait()
                player = BrokerPlayer(stub)
                await player.hello(interaction_service_pb2.Hello(resume_epoch=epoch))
                memory_before = await _used_memory(redis_client)
                rss_before = _rss(pids)

                sent: dict[str, float] = {}
                subscriber.received_target = pending
                gate = asyncio.Semaphore(window)

                def binding(n: int, prefix: str) -> interaction_pb2.Binding:
                    key = f"{prefix}{n}"
                    return interaction_pb2.Binding(
                        session_id=f"scale-{n % sessions}",
                        turn_id=key,
                        tool_use_id=key,
                        invocation_id=f"inv-{key}",
                        registration_id="bench-registration",
                        connection_id="bench-connection",
                        tool_name="examples:deploy",
                    )

                async def open_one(n: int) -> None:
                    async with gate:
                        b = binding(n, "fill-")
                        sent[b.tool_use_id] = time.perf_counter()
                        await player.open(b, form)

                fill_start = time.perf_counter()
                async with asyncio.TaskGroup() as group:
                    for n in range(pending):
                        group.create_task(open_one(n))
                fill_s = time.perf_counter() - fill_start
                # every fill form must have reached the subscriber before we measure at full
                async with asyncio.timeout(OPEN_TIMEOUT * 4):
                    await subscriber.all_received.wait()
                during = [subscriber.received[k] - t for k, t in sent.items() if k in subscriber.received]

                memory_after = await _used_memory(redis_client)
                rss_after = _rss(pids)

                at_full: list[float] = []
                for n in range(probes):
                    b = binding(n, "probe-")
                    arrival = subscriber.expect(b.tool_use_id)
                    t0 = time.perf_counter()
                    await player.open(b, form)
                    async with asyncio.timeout(OPEN_TIMEOUT):
                        at_full.append(await arrival - t0)
                await player.close()

                subscriber.restarted_target = pending + probes
                new_epoch = BrokerPlayer(stub)
                t0 = time.perf_counter()
                await new_epoch.hello(interaction_service_pb2.Hello(begin_new_epoch=True))
                reply_s = time.perf_counter() - t0
                async with asyncio.timeout(OPEN_TIMEOUT * 10):
                    await subscriber.all_restarted.wait()
                surface_s = time.perf_counter() - t0
                await new_epoch.close()
        total = pending + probes
        return ScaleResult(
            pending=pending,
            sessions=sessions,
            redis_used_memory_before=memory_before,
            redis_used_memory_after=memory_after,
            redis_bytes_per_form=(memory_after - memory_before) / pending if pending else 0.0,
            rss_kib_before=rss_before,
            rss_kib_after=rss_after,
            fill_s=fill_s,
            fill_opens_per_s=pending / fill_s if fill_s > 0 else 0.0,
            delivery_during_fill=summarize(during),
            delivery_at_full=summarize(at_full),
            epoch_change_closed=new_epoch.closed_count,
            epoch_change_reply_s=reply_s,
            epoch_change_surface_s=surface_s,
            notes=[*notes, f"{total} forms pending when the new epoch began"],
            delivery_at_full_ms=[d * 1000 for d in at_full],
        )
    finally:
        await redis_client.aclose()
