"""What the store reads of one Host's sorted sets and Streams: pending ids, due deadlines, snapshots, history.

Rules: reads only, no script; every key comes from :mod:`services.interaction.keys`; a snapshot of pending ids
and Stream positions is read at once (MULTI), so an Attach misses no change between them. See
docs/design.md#lua-scripts and docs/design.md#history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from maka.interaction.v1 import interaction_service_pb2
from services.interaction.keys import ALL_SESSIONS, Keys
from services.interaction.store_calls import as_text as _s
from services.interaction.store_calls import store_call as _store_call


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """Where a session's event Stream stands (for resume-token checks)."""

    exists: bool
    first_id: str = "0-0"
    length: int = 0
    entries_added: int = 0


class StoreReads:
    """The reads of :class:`~services.interaction.store.InteractionStore` that run no script."""

    client: redis.asyncio.Redis | RedisCluster
    keys: Keys

    @_store_call
    async def undelivered_ids(self, limit: int) -> list[str]:
        """Answered ids whose delivery is not yet recorded, oldest answer first."""
        return [_s(v) for v in await self.client.zrange(self.keys.undelivered(), 0, limit - 1)]

    @_store_call
    async def pending_ids(self) -> list[str]:
        """Every pending id of the Host."""
        return [_s(v) for v in await self.client.zrange(self.keys.pending(), 0, -1)]

    @_store_call
    async def older_pending(self, epoch: int) -> int:
        """How many pending forms belong to epochs other than ``epoch`` (atomically, MULTI).

        Every pending id is in ``pending`` and in the lease set of its own epoch, so this is
        ``ZCARD pending - ZCARD leases:{epoch}``.
        """
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zcard(self.keys.pending())
            pipe.zcard(self.keys.leases(epoch))
            total, current = await pipe.execute()
        return int(total) - int(current)

    @_store_call
    async def due_leases(self, epoch: int, now_ms: int, limit: int) -> list[str]:
        """Ids of ``epoch`` whose lease deadline is at or before ``now_ms``."""
        values = await self.client.zrangebyscore(self.keys.leases(epoch), "-inf", now_ms, start=0, num=limit)
        return [_s(v) for v in values]

    @_store_call
    async def due_waits(self, now_ms: int, limit: int) -> list[str]:
        """Pending ids whose bounded wait ended at or before ``now_ms``."""
        values = await self.client.zrangebyscore(self.keys.pending(), "-inf", now_ms, start=0, num=limit)
        return [_s(v) for v in values]

    @_store_call
    async def lease_deadline(self, epoch: int) -> int | None:
        """The latest lease deadline (ms) of ``epoch``, if any lease exists."""
        top = await self.client.zrange(self.keys.leases(epoch), -1, -1, withscores=True)
        return int(top[0][1]) if top else None

    @_store_call
    async def session_snapshot(self, session_ids: Sequence[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
        """Atomically (MULTI): each scope's pending ids and its event Stream's last id ("0-0" if none).

        A scope is a session id or :data:`ALL_SESSIONS` (every pending id, the Host-wide Stream).
        """
        async with self.client.pipeline(transaction=True) as pipe:
            for sid in session_ids:
                pipe.zrange(self.keys.pending() if sid == ALL_SESSIONS else self.keys.session_pending(sid), 0, -1)
                pipe.xrevrange(self.keys.events(sid), "+", "-", count=1)
            results = await pipe.execute()
        pending: dict[str, list[str]] = {}
        positions: dict[str, str] = {}
        for index, sid in enumerate(session_ids):
            pending[sid] = [_s(v) for v in results[2 * index]]
            last = results[2 * index + 1]
            positions[sid] = _s(last[0][0]) if last else "0-0"
        return pending, positions

    @_store_call
    async def stream_info(self, session_id: str) -> StreamInfo:
        """Where the session's event Stream stands (``exists=False`` when it was never written or expired)."""
        try:
            info = await self.client.xinfo_stream(self.keys.events(session_id))
        except redis.exceptions.ResponseError:
            return StreamInfo(exists=False)
        first = info.get("first-entry")
        return StreamInfo(
            exists=True,
            first_id=_s(first[0]) if first else "0-0",
            length=int(info.get("length", 0)),
            entries_added=int(info.get("entries-added", 0)),
        )

    @_store_call
    async def history_page(
        self, before: tuple[int, str] | None, count: int
    ) -> list[tuple[int, str, interaction_service_pb2.HistoryEntry]]:
        """Up to ``count`` history entries, newest first, strictly older than ``before`` (``(settled ms, id)``,
        the last one a previous page returned; None: from the newest) as ``(settled ms, id, entry)``. An id
        whose entry was trimmed meanwhile is skipped. Ties in time are ordered by id, descending (Redis's
        reverse order), so pages never repeat or skip an entry."""
        top: str | int = "+inf" if before is None else before[0]
        scored: list[tuple[str, int]] = []
        offset, batch = 0, count + 64
        while len(scored) < count:
            raw: list[Any] = await self.client.zrevrangebyscore(
                self.keys.history(), top, "-inf", start=offset, num=batch, withscores=True
            )
            offset += len(raw)
            for member, value in raw:
                interaction_id, score = _s(member), int(value)
                if before is None or score < before[0] or interaction_id < before[1]:
                    scored.append((interaction_id, score))
            if len(raw) < batch:
                break
        scored = scored[:count]
        if not scored:
            return []
        values: list[Any] = await self.client.hmget(self.keys.history_entries(), [i for i, _ in scored])
        return [
            (score, interaction_id, interaction_service_pb2.HistoryEntry.FromString(value))
            for (interaction_id, score), value in zip(scored, values, strict=True)
            if value is not None
        ]

    @_store_call
    async def settled_position(self) -> str:
        """The last id of the Host-wide settled Stream ("0-0" when empty)."""
        last = await self.client.xrevrange(self.keys.settled(), "+", "-", count=1)
        return _s(last[0][0]) if last else "0-0"
