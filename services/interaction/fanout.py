"""Fan-out: one multiplexed follower per replica for every subscribed event Stream (docs/design.md#fan-out).

Every Attach and HostLink stream of a replica subscribes here instead of holding its own blocking
``XREAD``. :class:`FanOut` runs ``lanes`` follower tasks; each owns the Streams of the Hosts hashed to it
and reads all of them with one blocking ``XREAD`` (in cluster mode a single ``XREAD`` may only name keys
of one slot, so a lane that owns several Hosts reads them in turn without blocking and blocks briefly
on one when all were idle). So the replica uses at most ``lanes`` connections to follow, whatever the
number of streams, and commands share the rest of ``redis_pool_size`` (the store's limiter).

Each entry is decoded once and offered to the in-memory subscribers of its Stream. A subscriber has a
bounded queue: one that falls ``queue_size`` entries behind is dropped and its iterator raises
:class:`SubscriberOverflow` once it has yielded what it had, so its stream ends resumably (the client
resumes with the token of the last event it got and loses nothing). A slow subscriber never stalls the
others. A subscriber that starts behind a Stream already followed catches up by itself with ``XRANGE``
(paced by its own consumer) before it joins the live feed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from services.core import metrics
from services.interaction.keys import hash_tag, wake_key
from services.interaction.redis_client import Client

log = logging.getLogger("maka.interaction.fanout")

V = TypeVar("V")
Decoder = Callable[[dict[bytes, bytes]], V]
"""Turns one Stream entry's fields into the value subscribers get (called once per entry)."""

StreamId = tuple[int, int]
_REDIS_DOWN = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.ResponseError,  # e.g. CLUSTERDOWN / READONLY during a failover: retried
)
_WAKE_TTL_MS = 60_000


def parse_id(value: str | bytes) -> StreamId:
    """``"1700000000000-3"`` → ``(1700000000000, 3)``; raises ValueError."""
    text = value.decode() if isinstance(value, bytes) else value
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def _text(value: StreamId) -> str:
    return f"{value[0]}-{value[1]}"


class SubscriberOverflow(Exception):
    """The subscriber fell too far behind and was dropped; end its stream resumably."""


class Subscription(Generic[V]):
    """One subscriber's view of some Streams: an async iterator of ``(key, entry id, value)``.

    Use as an async context manager (or call :meth:`close`) so it leaves the fan-out.
    """

    def __init__(self, hub: FanOut, positions: dict[str, StreamId], decode: Decoder[V], queue_size: int) -> None:
        self._hub = hub
        self.decode = decode
        self.positions = dict(positions)
        """The last entry id delivered (or the start position) per key."""
        self.queue: asyncio.Queue[tuple[str, str, V]] = asyncio.Queue(queue_size)
        self._backlog: collections.deque[tuple[str, str, V]] = collections.deque()
        self.catching_up: set[str] = set()
        """Keys still read by this subscriber's own XRANGE before it joins their live feed."""
        self.overflowed = False
        self.closed = False

    def offer(self, key: str, entry_id: StreamId, text_id: str, value: V) -> bool:
        """Queue one live entry (skipping entries at or before our position); False on overflow."""
        if entry_id <= self.positions[key]:
            return True
        try:
            self.queue.put_nowait((key, text_id, value))
        except asyncio.QueueFull:
            self.overflowed = True
            return False
        self.positions[key] = entry_id
        return True

    def __aiter__(self) -> Subscription[V]:
        return self

    async def __anext__(self) -> tuple[str, str, V]:
        while True:
            if self._backlog:
                return self._backlog.popleft()
            if self.catching_up and not self.overflowed:
                await self._hub.catch_up(self, next(iter(self.catching_up)), self._backlog)
                continue
            if self.overflowed and self.queue.empty():
                raise SubscriberOverflow()
            return await self.queue.get()

    def close(self) -> None:
        """Leave every feed (idempotent)."""
        if not self.closed:
            self.closed = True
            self._hub.remove(self)

    async def __aenter__(self) -> Subscription[V]:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.close()


@dataclass(eq=False)
class _Feed:
    key: str
    tag: str
    head: StreamId
    decode: Decoder[Any]
    lane: _Lane
    subscribers: set[Subscription[Any]] = field(default_factory=set)


@dataclass(eq=False)
class _Lane:
    index: int
    feeds: dict[str, _Feed] = field(default_factory=dict)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    blocking_tag: str | None = None
    """The slot (hash tag) of the blocking XREAD in flight, if any."""
    woken: bool = False
    turn: int = 0


class FanOut:
    """The replica's followers (see the module docstring). ``start`` it inside the serving loop."""

    def __init__(
        self,
        client: Client,
        *,
        lanes: int,
        queue_size: int,
        block_ms: int = 1000,
        poll_ms: int = 50,
        count: int = 256,
        retry_seconds: float = 0.5,
        limiter: asyncio.Semaphore | None = None,
    ) -> None:
        self.client = client
        self.queue_size = queue_size
        self.block_ms = block_ms
        self.poll_ms = poll_ms
        self.count = count
        self.retry_seconds = retry_seconds
        self.limiter = limiter if limiter is not None else asyncio.Semaphore(8)
        self.cluster = isinstance(client, RedisCluster)
        self.replica_id = uuid.uuid4().hex[:12]
        self._lanes = [_Lane(i) for i in range(lanes)]
        self._feeds: dict[str, _Feed] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._wakers: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()
        self.subscribers = 0
        """Live subscriptions (for metrics and tests)."""

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start one follower task per lane."""
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run(lane), name=f"fanout-{lane.index}") for lane in self._lanes]

    async def aclose(self) -> None:
        """Stop the followers (their XREAD in flight still completes in Redis).

        A cancellation delivered inside a Redis call can surface as a Redis error, which a follower survives
        by retrying (on a new connection, after the client is closed): so the followers stop looping once
        closing, and are cancelled until they have ended (bounded: a read cancelled mid-reply may take its
        connection's timeout to unwind)."""
        self._closing.set()
        pending = {*self._tasks, *self._wakers}
        deadline = asyncio.get_running_loop().time() + 2.0
        while pending and asyncio.get_running_loop().time() < deadline:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.2)
        self._tasks = []

    # --- subscribers ------------------------------------------------------------------------------

    def subscribe(self, positions: dict[str, str], decode: Decoder[V]) -> Subscription[V]:
        """Follow ``positions`` (key → the last entry id already seen); every later entry is yielded once.

        Raises ValueError for a malformed position.
        """
        parsed = {key: parse_id(pos) for key, pos in positions.items()}
        self.start()
        sub: Subscription[V] = Subscription(self, parsed, decode, self.queue_size)
        self.subscribers += 1
        for key, position in parsed.items():
            if not self._join(sub, key, position):
                sub.catching_up.add(key)
        return sub

    def _join(self, sub: Subscription[Any], key: str, position: StreamId) -> bool:
        """Join ``key``'s live feed when it is not ahead of ``position`` (creating it at ``position``)."""
        feed = self._feeds.get(key)
        if feed is None:
            tag = hash_tag(key)
            lane = self._lanes[zlib.crc32(tag.encode()) % len(self._lanes)]
            feed = _Feed(key, tag, position, sub.decode, lane)
            self._feeds[key] = feed
            lane.feeds[key] = feed
            lane.idle.set()
            self._wake(lane)
        elif feed.head > position:
            return False
        feed.subscribers.add(sub)
        sub.positions[key] = position
        return True

    async def catch_up(
        self, sub: Subscription[Any], key: str, backlog: collections.deque[tuple[str, str, Any]]
    ) -> None:
        """Read the next entries of ``key`` after ``sub``'s position into ``backlog`` (XRANGE, at most
        ``count``), or join the live feed once the subscriber reached it."""
        position = sub.positions[key]
        try:
            async with self.limiter:
                entries: Any = await self.client.xrange(key, f"({_text(position)}", "+", count=self.count)
        except _REDIS_DOWN:
            await asyncio.sleep(self.retry_seconds)
            return
        for entry_id, fields in entries:
            parsed = parse_id(entry_id)
            try:
                value = sub.decode(fields)
            except Exception:
                log.exception("undecodable_entry", extra={"stream_key_tag": hash_tag(key)})
                continue
            backlog.append((key, _text(parsed), value))
            position = parsed
        sub.positions[key] = position
        if len(entries) < self.count:  # at the end of what exists now: join (or keep reading if the feed moved on)
            if self._join(sub, key, position):
                sub.catching_up.discard(key)
            elif not entries:  # the feed is ahead but nothing is left to read (trimmed): join at its head
                feed = self._feeds[key]
                sub.positions[key] = feed.head
                feed.subscribers.add(sub)
                sub.catching_up.discard(key)

    def remove(self, sub: Subscription[Any]) -> None:
        """Drop ``sub`` from every feed; feeds left without subscribers stop being read."""
        if sub.closed and not sub.positions:
            return
        self.subscribers -= 1
        for key in list(sub.positions):
            feed = self._feeds.get(key)
            if feed is None:
                continue
            feed.subscribers.discard(sub)
            if not feed.subscribers:
                del self._feeds[key]
                feed.lane.feeds.pop(key, None)
        sub.positions = {}
        sub.catching_up.clear()

    # --- followers --------------------------------------------------------------------------------

    def _wake(self, lane: _Lane) -> None:
        """End the lane's blocking XREAD so it includes a new feed now (one XADD, coalesced)."""
        if lane.blocking_tag is None or lane.woken:
            return
        lane.woken = True
        task = asyncio.create_task(self._send_wake(wake_key(lane.blocking_tag, self.replica_id, lane.index)))
        self._wakers.add(task)
        task.add_done_callback(self._wakers.discard)

    async def _send_wake(self, key: str) -> None:
        with contextlib.suppress(*_REDIS_DOWN):
            async with self.limiter:
                pipe = self.client.pipeline(transaction=False)
                pipe.xadd(key, {"w": "1"}, maxlen=1, approximate=False)
                pipe.pexpire(key, _WAKE_TTL_MS)
                await pipe.execute()

    def _groups(self, lane: _Lane) -> list[list[_Feed]]:
        if not self.cluster:
            return [list(lane.feeds.values())]
        by_tag: dict[str, list[_Feed]] = {}
        for feed in lane.feeds.values():
            by_tag.setdefault(feed.tag, []).append(feed)
        return list(by_tag.values())

    async def _run(self, lane: _Lane) -> None:
        while not self._closing.is_set():
            if not lane.feeds:
                lane.idle.clear()
                await lane.idle.wait()
                continue
            try:
                groups = self._groups(lane)
                if len(groups) == 1:
                    await self._read(lane, groups[0], self.block_ms)
                    continue
                got = 0
                for group in groups:
                    got += await self._read(lane, group, None)
                if not got:
                    lane.turn = (lane.turn + 1) % len(groups)
                    await self._read(lane, groups[lane.turn], self.poll_ms)
            except _REDIS_DOWN:
                if self._closing.is_set():
                    return
                await asyncio.sleep(self.retry_seconds)
            except Exception:
                if self._closing.is_set():
                    return
                log.exception("fanout_read_failed")
                await asyncio.sleep(self.retry_seconds)

    async def _read(self, lane: _Lane, feeds: list[_Feed], block_ms: int | None) -> int:
        """One XREAD of ``feeds`` (blocking ``block_ms`` when set); dispatch; returns entries read."""
        streams: dict[Any, Any] = {feed.key: _text(feed.head) for feed in feeds}
        if block_ms is not None:
            tag = "fanout" if not self.cluster else feeds[0].tag
            streams[wake_key(tag, self.replica_id, lane.index)] = "$"
            lane.blocking_tag, lane.woken = tag, False
        try:
            reply: Any = await self.client.xread(streams, count=self.count, block=block_ms)
        finally:
            lane.blocking_tag = None
        by_key = {feed.key: feed for feed in feeds}
        read = 0
        for raw_key, entries in reply or []:
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            feed = by_key.get(key)
            if feed is None or self._feeds.get(key) is not feed:
                continue  # the wake Stream, or a feed dropped (or replaced) while we read
            read += len(entries)
            self._dispatch(feed, entries)
        return read

    def _dispatch(self, feed: _Feed, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        for raw_id, fields in entries:
            entry_id = parse_id(raw_id)
            if entry_id <= feed.head:
                continue
            feed.head = entry_id
            try:
                value = feed.decode(fields)
            except Exception:
                log.exception("undecodable_entry", extra={"stream_key_tag": feed.tag})
                continue
            text_id = _text(entry_id)
            for sub in list(feed.subscribers):
                if not sub.offer(feed.key, entry_id, text_id, value):
                    log.warning(
                        "subscriber_overflow", extra={"queue_size": self.queue_size, "stream_key_tag": feed.tag}
                    )
                    metrics.SUBSCRIBER_OVERFLOWS.inc()
                    self.remove(sub)
