"""Fan-out at team scale: thousands of Attach streams over many Hosts plus HostLinks on ONE replica.

One Interaction service process (``python -m services.interaction.main``) serves ``hosts`` Runtime Hosts
over a private ``redis-server``. This process plays every client: ``links_per_host`` HostLinks per Host
(the first begins the Host epoch, the others resume it, like brokers reconnecting) and
``sessions_per_host`` Attach streams per Host (one session each), spread over a few HTTP/2
connections. Then each Host's first link opens one form per session; every subscriber must see its
snapshot, then its form's ``opened`` event; one form per Host is answered and its settlement must
reach every HostLink of that Host.

Sampled all along: the replica's Redis connections (``CLIENT LIST``, connections named
``maka-interaction``) and the named service's health. Delivery = receipt at the subscriber minus the
form's ``created_at`` (the same machine clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc
import grpc.aio
import redis.asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.processes import InteractionProcess
from bench.stats import summarize
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import bearer_metadata
from services.core.key_file import generate_key_file
from services.interaction.redis_client import CLIENT_NAME

SERVICE = "maka.interaction.v1.InteractionService"
STEP_TIMEOUT = 120.0
"""Bound of each phase (snapshots, opens, deliveries, settlements)."""
CHANNEL_STREAMS = 100
"""Streams per HTTP/2 connection of the load client."""


def host_ids(count: int) -> list[str]:
    """``h00``, ``h01``, ... (stable, sortable)."""
    return [f"h{n:02d}" for n in range(count)]


def tokens_document(hosts: Sequence[str], broker_groups: int = 2) -> tuple[dict[str, object], dict[str, str]]:
    """A tokens file for ``hosts``: ``broker_groups`` broker tokens each naming a slice of the Hosts, one
    surface token seeing every Host, and ``surface-h00`` seeing only the first Host. Returns
    ``(document, host → broker token)`` (``"surface"`` and ``"surface-h00"`` are keys too)."""
    tokens: list[dict[str, object]] = []
    by_host: dict[str, str] = {}
    size = -(-len(hosts) // broker_groups)
    for group in range(broker_groups):
        members = list(hosts[group * size : (group + 1) * size])
        token = f"broker-group-{group}-token"
        tokens.append({"name": f"broker-{group}", "token": token, "roles": ["broker"], "hosts": members})
        by_host.update({h: token for h in members})
    tokens.append({"name": "surfaces", "token": "surface-all-token", "roles": ["surface"]})
    tokens.append({"name": "surface-h00", "token": "surface-h00-token", "roles": ["surface"], "hosts": [hosts[0]]})
    by_host["surface"] = "surface-all-token"
    by_host["surface-h00"] = "surface-h00-token"
    return {"tokens": tokens}, by_host


def small_form() -> form_pb2.Form:
    """A one-field form (the payload is not what is measured here)."""
    return form_pb2.Form(
        message="Approve?",
        fields=[form_pb2.Field(name="ok", label="OK", required=True, boolean=form_pb2.BooleanField())],
        requester=form_pb2.Requester(provider_id="bench", provider_display_name="bench", claimed_tool="approve"),
    )


def binding(session: str, invocation: str) -> interaction_pb2.Binding:
    """A complete binding (what a broker sends)."""
    return interaction_pb2.Binding(
        session_id=session,
        turn_id="turn",
        tool_use_id="tu",
        invocation_id=invocation,
        registration_id="reg",
        connection_id="conn",
        tool_name="bench:approve",
    )


_RESUMABLE = frozenset({grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE})
"""Stream ends a surface resumes from (maka_client.SurfaceClient.attach does the same)."""


@dataclass
class FanoutResult:
    """What one fan-out run observed (delivery in ms)."""

    hosts: int
    subscribers: int
    links: int
    pool_size: int
    followers: int
    snapshots: int = 0
    deliveries: int = 0
    settlements_expected: int = 0
    settlements_received: int = 0
    answered_events: int = 0
    max_redis_connections: int = 0
    """This replica's connections (CLIENT LIST entries named like an Interaction service, minus
    ``other_redis_connections``)."""
    other_redis_connections: int = 0
    """Such connections already open before the replica started (another Interaction service on the same
    Redis, e.g. the bench's stack); subtracted from every sample."""
    connection_samples: int = 0
    health_samples: int = 0
    health_not_serving: int = 0
    attach_s: float = 0.0
    subscriber_reconnects: int = 0
    """Attach streams that ended at the transport level and resumed with their token (counted, not hidden)."""
    subscriber_ends: dict[str, int] = field(default_factory=dict)
    """How those streams ended, by gRPC status code (``CANCELLED`` before a snapshot was gRPC refusing the
    burst of stream starts past its pending-call limit: ``MAKA_MAX_PENDING_CALLS``)."""
    delivery_ms: dict[str, float] = field(default_factory=dict)
    rss_kib: int = 0

    def to_json(self) -> dict[str, object]:
        """Plain JSON (for bench reports)."""
        return asdict(self)


async def _count_connections(client: redis.asyncio.Redis) -> int:
    listing: list[dict[str, object]] = await client.client_list()  # type: ignore[assignment]
    return sum(1 for c in listing if c.get("name") == CLIENT_NAME)


def _rss_kib(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class _Sampler:
    """Samples CLIENT LIST and the named service's health until stopped."""

    def __init__(self, redis_url: str, channel: grpc.aio.Channel, result: FanoutResult) -> None:
        self.redis = redis.asyncio.Redis.from_url(redis_url)
        self.health = health_pb2_grpc.HealthStub(channel)
        self.result = result
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            count = await _count_connections(self.redis) - self.result.other_redis_connections
            self.result.max_redis_connections = max(self.result.max_redis_connections, count)
            self.result.connection_samples += 1
            reply = await self.health.Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(service=SERVICE), timeout=10
            )
            self.result.health_samples += 1
            if reply.status != health_pb2.HealthCheckResponse.SERVING:
                self.result.health_not_serving += 1
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if self._task.done() and not self._task.cancelled() and self._task.exception() is not None:
                raise self._task.exception()  # type: ignore[misc]
        await self.redis.aclose()


@contextlib.asynccontextmanager
async def channels(target: str, count: int) -> AsyncIterator[list[grpc.aio.Channel]]:
    """``count`` channels, each its own HTTP/2 connection (local subchannel pools)."""
    opened = [
        grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1), ("grpc.http2.bdp_probe", 0)])
        for _ in range(count)
    ]
    try:
        yield opened
    finally:
        for channel in opened:
            await channel.close()


class _Link:
    """A HostLink playing a broker: hello, then opens; collects settlements."""

    def __init__(self, channel: grpc.aio.Channel, token: str, host: str) -> None:
        self.host = host
        self.stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        self.metadata = bearer_metadata(token)
        self.requests: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None] = asyncio.Queue()
        self.epoch = 0
        self.settled: set[str] = set()
        self.opened: dict[str, interaction_pb2.Interaction] = {}
        self.all_opened = asyncio.Event()
        self.expected_opens = 0
        self.settled_changed = asyncio.Event()
        self.call: (
            grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse]
            | None
        ) = None
        self._reader: asyncio.Task[None] | None = None

    async def _requests(self) -> AsyncIterator[interaction_service_pb2.HostLinkRequest]:
        while (item := await self.requests.get()) is not None:
            yield item

    async def connect(self, resume_epoch: int = 0) -> int:
        hello = interaction_service_pb2.Hello(host_id=self.host)
        if resume_epoch:
            hello.resume_epoch = resume_epoch
        else:
            hello.begin_new_epoch = True
        await self.requests.put(interaction_service_pb2.HostLinkRequest(hello=hello))
        self.call = self.stub.HostLink(self._requests(), metadata=self.metadata)
        first = await self.call.read()
        assert isinstance(first, interaction_service_pb2.HostLinkResponse), first
        assert first.WhichOneof("frame") == "epoch", first
        self.epoch = first.epoch.host_epoch
        self._reader = asyncio.create_task(self._read())
        return self.epoch

    async def _read(self) -> None:
        assert self.call is not None
        while isinstance(response := await self.call.read(), interaction_service_pb2.HostLinkResponse):
            frame = response.WhichOneof("frame")
            if frame == "opened":
                self.opened[response.opened.request_ref] = response.opened.interaction
                if len(self.opened) >= self.expected_opens:
                    self.all_opened.set()
            elif frame == "open_rejected":
                raise RuntimeError(f"open rejected: {response.open_rejected.message}")
            elif frame == "settled":
                self.settled.add(response.settled.interaction.interaction_id)
                self.settled_changed.set()

    async def open_all(self, sessions: Sequence[str]) -> None:
        self.expected_opens = len(sessions)
        for n, session in enumerate(sessions):
            await self.requests.put(
                interaction_service_pb2.HostLinkRequest(
                    open=interaction_service_pb2.OpenInteraction(
                        request_ref=f"{self.host}-{n}", binding=binding(session, f"inv-{session}"), form=small_form()
                    )
                )
            )
        await asyncio.wait_for(self.all_opened.wait(), STEP_TIMEOUT)

    async def wait_settled(self, interaction_id: str) -> None:
        async with asyncio.timeout(STEP_TIMEOUT):
            while interaction_id not in self.settled:
                self.settled_changed.clear()
                await self.settled_changed.wait()

    async def close(self) -> None:
        await self.requests.put(None)
        if self.call is not None:
            self.call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._reader


class _Subscriber:
    """One Attach stream of one session: records the snapshot and the arrival of each event."""

    def __init__(self, channel: grpc.aio.Channel, token: str, host: str, session: str) -> None:
        self.host, self.session = host, session
        self.stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        self.metadata = bearer_metadata(token)
        self.snapshot = asyncio.Event()
        self.opened = asyncio.Event()
        self.answered = asyncio.Event()
        self.delivery_ms = 0.0
        self.token = ""
        self.reconnects = 0
        self.ends: dict[str, int] = {}
        """gRPC status code → how many times this stream ended with it (and resumed)."""
        self.error: BaseException | None = None
        self.call: (
            grpc.aio.StreamStreamCall[interaction_service_pb2.AttachRequest, interaction_service_pb2.AttachResponse]
            | None
        ) = None
        self._reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._run())

    async def _run(self) -> None:
        """Follow, resuming with the last token after a transport-level end (as every surface does)."""
        while True:
            try:
                await self._follow()
            except grpc.aio.AioRpcError as error:
                if error.code() not in _RESUMABLE:
                    self.error = error
                    return
                self.ends[error.code().name] = self.ends.get(error.code().name, 0) + 1
            except (grpc.aio.UsageError, RuntimeError) as error:
                self.error = error
                return
            self.reconnects += 1
            await asyncio.sleep(0.2)

    def _saw_opened(self, interaction: interaction_pb2.Interaction) -> None:
        if not self.opened.is_set():
            self.delivery_ms = time.time() * 1000 - interaction.created_at.ToMilliseconds()
            self.opened.set()

    async def _follow(self) -> None:
        subscribe = interaction_service_pb2.AttachRequest(
            subscribe=interaction_service_pb2.Subscribe(
                session_ids=[self.session], host_id=self.host, resume_token=self.token
            )
        )

        async def requests() -> AsyncIterator[interaction_service_pb2.AttachRequest]:
            yield subscribe
            await asyncio.Event().wait()  # keep the request side open

        self.call = self.stub.Attach(requests(), metadata=self.metadata)
        async for response in self.call:
            frame = response.WhichOneof("frame")
            if frame == "snapshot":
                self.token = response.snapshot.resume_token
                for interaction in response.snapshot.pending:
                    self._saw_opened(interaction)
                self.snapshot.set()
            elif frame == "event":
                self.token = response.event.resume_token
                kind = response.event.event.kind
                if kind == interaction_pb2.EVENT_KIND_OPENED:
                    self._saw_opened(response.event.event.interaction)
                elif kind == interaction_pb2.EVENT_KIND_ANSWERED:
                    self.answered.set()

    async def close(self) -> None:
        if self.call is not None:
            self.call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._reader


async def run_fanout(
    target: str,
    redis_url: str,
    tokens: dict[str, str],
    hosts: Sequence[str],
    *,
    sessions_per_host: int,
    links_per_host: int,
    pool_size: int,
    followers: int,
    pid: int = 0,
    other_connections: int = 0,
) -> FanoutResult:
    """Run the scenario of the module docstring against a started replica; returns what it saw.

    Raises TimeoutError when a phase does not complete within :data:`STEP_TIMEOUT`.
    """
    result = FanoutResult(
        hosts=len(hosts),
        subscribers=len(hosts) * sessions_per_host,
        links=len(hosts) * links_per_host,
        pool_size=pool_size,
        followers=followers,
        other_redis_connections=other_connections,
    )
    streams = result.subscribers + result.links
    async with channels(target, max(1, -(-streams // CHANNEL_STREAMS))) as pool:
        sampler = _Sampler(redis_url, pool[0], result)
        sampler.start()
        links: dict[str, list[_Link]] = {}
        subscribers: list[_Subscriber] = []
        try:
            index = 0
            for host in hosts:
                first = _Link(pool[index % len(pool)], tokens[host], host)
                index += 1
                epoch = await first.connect()
                others = [_Link(pool[(index + n) % len(pool)], tokens[host], host) for n in range(links_per_host - 1)]
                index += links_per_host - 1
                await asyncio.gather(*(link.connect(epoch) for link in others))
                links[host] = [first, *others]
            started = time.monotonic()
            for host in hosts:
                for n in range(sessions_per_host):
                    sub = _Subscriber(pool[index % len(pool)], tokens["surface"], host, f"s{n:03d}")
                    index += 1
                    sub.start()
                    subscribers.append(sub)
            try:
                async with asyncio.timeout(STEP_TIMEOUT):
                    await asyncio.gather(*(s.snapshot.wait() for s in subscribers))
            except TimeoutError:
                failed = [s for s in subscribers if not s.snapshot.is_set()]
                errors = {repr(s.error)[:200] + f" at {getattr(s, 'error_at', 0) - started:.1f}s" for s in failed}
                raise TimeoutError(f"{len(failed)} subscribers got no snapshot: {sorted(errors)[:5]}") from None
            result.attach_s = time.monotonic() - started
            result.snapshots = sum(1 for s in subscribers if s.snapshot.is_set())
            sessions = [f"s{n:03d}" for n in range(sessions_per_host)]
            await asyncio.gather(*(links[host][0].open_all(sessions) for host in hosts))
            async with asyncio.timeout(STEP_TIMEOUT):
                await asyncio.gather(*(s.opened.wait() for s in subscribers))
            result.deliveries = sum(1 for s in subscribers if s.opened.is_set())
            summary = summarize([s.delivery_ms / 1000 for s in subscribers])
            result.delivery_ms = {"p50": summary.p50, "p99": summary.p99, "max": summary.max}
            surface = interaction_service_pb2_grpc.InteractionServiceStub(pool[0])
            answered: dict[str, str] = {}
            for host in hosts:
                interaction = links[host][0].opened[f"{host}-0"]
                reply = await surface.Answer(
                    interaction_service_pb2.AnswerRequest(
                        host_id=host,
                        interaction_id=interaction.interaction_id,
                        submission_id=f"sub-{host}",
                        answer=form_pb2.Answer(
                            action=form_pb2.ACTION_ACCEPT, values={"ok": form_pb2.Value(boolean_value=True)}
                        ),
                    ),
                    metadata=bearer_metadata(tokens["surface"]),
                    timeout=30,
                )
                assert reply.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED
                answered[host] = interaction.interaction_id
            result.settlements_expected = sum(len(links[h]) for h in hosts)
            await asyncio.gather(*(link.wait_settled(answered[h]) for h in hosts for link in links[h]))
            result.settlements_received = sum(1 for h in hosts for link in links[h] if answered[h] in link.settled)
            first_subscribers = [s for s in subscribers if s.session == sessions[0]]
            async with asyncio.timeout(STEP_TIMEOUT):
                await asyncio.gather(*(s.answered.wait() for s in first_subscribers))
            result.answered_events = sum(1 for s in first_subscribers if s.answered.is_set())
            result.subscriber_reconnects = sum(s.reconnects for s in subscribers)
            for sub in subscribers:
                for code, count in sub.ends.items():
                    result.subscriber_ends[code] = result.subscriber_ends.get(code, 0) + count
            if pid:
                result.rss_kib = _rss_kib(pid)
        finally:
            await sampler.stop()
            await asyncio.gather(*(s.close() for s in subscribers))
            await asyncio.gather(*(link.close() for group in links.values() for link in group))
    return result


def replica_env(
    redis_url: str, hosts: Sequence[str], tokens_file: Path, *, pool_size: int, followers: int
) -> dict[str, str]:
    """The environment of a replica serving ``hosts``; its answer key (docs/security.md "Answer values at
    rest") is ``answer.key`` beside ``tokens_file``, so replicas sharing the tokens file share the key."""
    key_file = tokens_file.parent / "answer.key"
    generate_key_file(key_file)
    return {
        "MAKA_REDIS_URL": redis_url,
        "MAKA_ANSWER_KEY_FILE": str(key_file),
        "MAKA_HOST_IDS": ",".join(hosts),
        "MAKA_AUTH_TOKENS_FILE": str(tokens_file),
        "MAKA_REDIS_POOL_SIZE": str(pool_size),
        "MAKA_REDIS_FOLLOWERS": str(followers),
        "MAKA_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
        "MAKA_GRACE_SECONDS": "1",
    }


def write_tokens(path: Path, hosts: Sequence[str]) -> dict[str, str]:
    """Write :func:`tokens_document` to ``path``; returns host → token."""
    document, by_host = tokens_document(hosts)
    path.write_text(json.dumps(document))
    return by_host


async def run_team_scale(
    redis_url: str, work: Path, *, hosts: int, sessions_per_host: int, links_per_host: int, pool_size: int = 16
) -> FanoutResult:
    """Start one replica serving ``hosts`` Hosts over ``redis_url`` (keys ``maka:{hNN}:...``, apart from
    any other Host's), run :func:`run_fanout` against it, stop it."""
    ids = host_ids(hosts)
    tokens = write_tokens(work / "fanout-tokens.json", ids)
    followers = 2
    env = replica_env(redis_url, ids, work / "fanout-tokens.json", pool_size=pool_size, followers=followers)
    probe = redis.asyncio.Redis.from_url(redis_url)
    try:
        others = await _count_connections(probe)  # the stack's own Interaction service, if any
    finally:
        await probe.aclose()
    process = InteractionProcess(work / "fanout", env)
    port = await process.start()
    try:
        assert process.process is not None
        return await run_fanout(
            f"127.0.0.1:{port}",
            redis_url,
            tokens,
            ids,
            sessions_per_host=sessions_per_host,
            links_per_host=links_per_host,
            pool_size=pool_size,
            followers=followers,
            pid=process.process.pid,
            other_connections=others,
        )
    finally:
        process.stop()
