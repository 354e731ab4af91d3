"""Attached surfaces across replicas (docs/design.md#attached-surfaces).

Each replica knows only its own Attach streams. :class:`Presence` writes one entry per live stream into
the Host's ``maka:{H}:surfaces`` hash (one hash tag, so one Redis Cluster slot): the stream's id →
``"{expires ms}:"`` + ``AttachedSurface`` bytes. The entry is written when the stream starts, deleted
when it ends, and re-written by :meth:`Presence.refresh` every third of ``ttl_seconds`` with a new
expiry; ``ListSurfaces`` reads the hash, skips (and deletes) expired entries. A replica that dies
without ending its streams thus leaves them listed for at most ``ttl_seconds``. An entry holds the
token's *name*, never the token. Presence is best effort: a Redis outage never ends an Attach stream,
it only makes the listing stale until the next refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from maka.interaction.v1 import interaction_service_pb2
from services.core.auth import Principal
from services.interaction.errors import StoreUnavailable
from services.interaction.keys import ALL_SESSIONS
from services.interaction.store import InteractionStore

log = logging.getLogger("maka.interaction.presence")

MAX_KIND_CHARS = 64
"""``Subscribe.surface_kind`` is cut to this many characters."""
MAX_SESSIONS_LISTED = 20
"""Session ids listed per surface (``session_count`` says how many it watches)."""


def clean_kind(kind: str) -> str:
    """``kind`` without control characters, cut to :data:`MAX_KIND_CHARS` (display text only)."""
    return "".join(ch for ch in kind if ch.isprintable())[:MAX_KIND_CHARS]


def encode_entry(surface: interaction_service_pb2.AttachedSurface, expires_ms: int) -> bytes:
    """One presence value: ``b"{expires_ms}:"`` + the surface's protobuf bytes."""
    return f"{expires_ms}:".encode() + surface.SerializeToString()


def decode_entry(value: bytes) -> tuple[int, interaction_service_pb2.AttachedSurface] | None:
    """``(expires_ms, surface)`` of one presence value, or None when it is not one."""
    head, sep, body = value.partition(b":")
    if not sep or not head.isdigit():
        return None
    surface = interaction_service_pb2.AttachedSurface()
    try:
        surface.ParseFromString(body)
    except Exception:  # protobuf's DecodeError: a foreign value is skipped, never fatal
        return None
    return int(head), surface


@dataclass(eq=False)
class _Entry:
    store: InteractionStore
    surface: interaction_service_pb2.AttachedSurface


class Presence:
    """The replica's Attach streams, mirrored into each Host's surfaces hash (see the module docstring)."""

    def __init__(self, *, ttl_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_ms = int(ttl_seconds * 1000)
        self.replica_id = uuid.uuid4().hex[:12]
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._last_refresh_ms = 0
        self._leaving: set[asyncio.Task[None]] = set()
        self._closing = False
        """Set by :meth:`aclose`: Redis is closing, so a stream that joins or leaves from now on writes nothing
        (a handler cancelled as the server stops runs its leave late; its entry expires with its TTL, as a
        replica that dies leaves it)."""

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def join(self, store: InteractionStore, principal: Principal, kind: str, scopes: Sequence[str]) -> str:
        """Record a new Attach stream watching ``scopes`` (session ids, or ``*`` for all); returns its id."""
        stream_id = f"{self.replica_id}:{uuid.uuid4().hex[:12]}"
        all_sessions = ALL_SESSIONS in scopes
        sessions = [] if all_sessions else list(scopes)
        surface = interaction_service_pb2.AttachedSurface(
            principal=principal.name,
            kind=clean_kind(kind),
            session_ids=sessions,
            all_sessions=all_sessions,
            session_count=len(sessions),
            host_id=store.keys.host_id,
            replica_id=self.replica_id,
        )
        surface.attached_at.FromMilliseconds(self._now_ms())
        self._entries[stream_id] = _Entry(store, surface)
        if self._closing:
            return stream_id
        with contextlib.suppress(StoreUnavailable):
            await store.put_surfaces({stream_id: encode_entry(surface, self._now_ms() + self.ttl_ms)}, self.ttl_ms)
        return stream_id

    async def leave(self, stream_id: str, *, write: bool = True) -> None:
        """The stream ended: forget it and delete its entry (best effort; not when ``write`` is false)."""
        entry = self._entries.pop(stream_id, None)
        if entry is not None and write:
            with contextlib.suppress(StoreUnavailable):
                await entry.store.remove_surfaces([stream_id])

    def leave_soon(self, stream_id: str) -> asyncio.Task[None]:
        """:meth:`leave` in a task of its own, so it finishes when the stream's handler is cancelled;
        tracked, so :meth:`aclose` waits for it before the store's client closes."""
        task = asyncio.create_task(self.leave(stream_id, write=not self._closing), name="presence-leave")
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)
        return task

    async def aclose(self, timeout: float = 2.0) -> None:
        """Wait (at most ``timeout`` s) for the leaves in flight: none may write after Redis is closed, and
        streams that join or leave from now on write nothing."""
        self._closing = True
        if self._leaving:
            await asyncio.wait(set(self._leaving), timeout=timeout)

    @property
    def streams(self) -> int:
        """Attach streams of this replica."""
        return len(self._entries)

    async def refresh(self, *, force: bool = False) -> None:
        """Re-write every entry of this replica with a new expiry, at most every third of the TTL
        (unless ``force``). Raises StoreUnavailable (the caller's loop retries next tick)."""
        now = self._now_ms()
        if not force and now - self._last_refresh_ms < self.ttl_ms // 3:
            return
        by_store: dict[int, tuple[InteractionStore, dict[str, bytes]]] = {}
        for stream_id, entry in list(self._entries.items()):
            _, values = by_store.setdefault(id(entry.store), (entry.store, {}))
            values[stream_id] = encode_entry(entry.surface, now + self.ttl_ms)
        for store, values in by_store.values():
            await store.put_surfaces(values, self.ttl_ms)
        self._last_refresh_ms = now

    async def listed(
        self, store: InteractionStore, principal: Principal, cap: int
    ) -> tuple[list[interaction_service_pb2.AttachedSurface], int]:
        """The Host's live surfaces that watch a session ``principal`` may see, oldest first, at most
        ``cap`` (and how many more were left out); a person's own only (their web tabs, TUIs and CLIs: never who
        else is attached, docs/security.md "Who may see and do what"). Session ids the principal may not see
        are removed.
        Deletes expired entries it finds. Raises StoreUnavailable."""
        now = self._now_ms()
        expired: list[str] = []
        visible: list[interaction_service_pb2.AttachedSurface] = []
        for stream_id, value in (await store.surfaces()).items():
            decoded = decode_entry(value)
            if decoded is None or decoded[0] <= now:
                expired.append(stream_id)
                continue
            surface = decoded[1]
            if principal.person and surface.principal != principal.name:
                continue  # a person sees only their own attachments, whatever their sessions
            if not principal.all_sessions:
                shown = principal.visible(surface.session_ids)
                if not surface.all_sessions and not shown:
                    continue
                del surface.session_ids[:]
                surface.session_ids.extend(shown)
                if not surface.all_sessions:
                    surface.session_count = len(shown)  # never how many sessions the caller may not see
            if len(surface.session_ids) > MAX_SESSIONS_LISTED:
                del surface.session_ids[MAX_SESSIONS_LISTED:]
            visible.append(surface)
        if expired:
            with contextlib.suppress(StoreUnavailable):
                await store.remove_surfaces(expired)
        visible.sort(key=lambda s: (s.attached_at.ToMilliseconds(), s.principal, s.kind))
        return visible[:cap], max(0, len(visible) - cap)
