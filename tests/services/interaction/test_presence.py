"""Attached-surface presence entries (services/interaction/presence.py) over the session's real redis-server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from services.core.auth import Principal, Role
from services.interaction.keys import ALL_SESSIONS, Keys
from services.interaction.presence import MAX_KIND_CHARS, Presence, clean_kind
from services.interaction.store import InteractionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _principal(name: str, sessions: set[str] | None = None) -> Principal:
    return Principal(name=name, roles=frozenset({Role.SURFACE}), sessions=frozenset(sessions or {"*"}))


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[InteractionStore]:
    client = redis.asyncio.Redis.from_url(redis_url)
    yield InteractionStore(client, Keys(f"p-{uuid.uuid4().hex[:8]}"), retention_ms=60_000, events_maxlen=100)
    await client.aclose()


async def test_a_surface_kind_is_display_text_cut_to_its_cap() -> None:
    assert clean_kind("tui\x07\x1b[31m\u202e") == "tui[31m"
    assert len(clean_kind("w" * 500)) == MAX_KIND_CHARS


async def test_a_caller_with_some_sessions_sees_only_surfaces_watching_one_of_them_and_only_those_sessions(
    store: InteractionStore,
) -> None:
    presence = Presence(ttl_seconds=30)
    await presence.join(store, _principal("mixed"), "web", ["s1", "secret-session"])
    await presence.join(store, _principal("elsewhere"), "tui", ["s9"])
    await presence.join(store, _principal("all"), "cli", [ALL_SESSIONS])
    listed, omitted = await presence.listed(store, _principal("viewer", {"s1"}), cap=10)
    assert omitted == 0
    by_name = {s.principal: s for s in listed}
    assert set(by_name) == {"mixed", "all"}
    assert list(by_name["mixed"].session_ids) == ["s1"]
    assert by_name["mixed"].session_count == 1  # never how many sessions the viewer may not see
    assert by_name["all"].all_sessions
    everyone, _ = await presence.listed(store, _principal("admin"), cap=10)
    assert {s.principal: s.session_count for s in everyone} == {"mixed": 2, "elsewhere": 1, "all": 0}


async def test_expired_and_foreign_entries_are_skipped_and_deleted_and_the_cap_counts_the_rest(
    store: InteractionStore,
) -> None:
    clock = Clock()
    presence = Presence(ttl_seconds=10, clock=clock)
    for index in range(3):
        await presence.join(store, _principal(f"p{index}"), "web", ["s1"])
    await store.put_surfaces({"junk": b"not an entry", "junk2": b"12:\xff\xff"}, 60_000)
    listed, omitted = await presence.listed(store, _principal("admin"), cap=2)
    assert ([s.principal for s in listed], omitted) == (["p0", "p1"], 1)
    assert "junk" not in await store.surfaces()
    clock.now += 11  # past the TTL without a refresh
    assert await presence.listed(store, _principal("admin"), cap=10) == ([], 0)
    assert await store.surfaces() == {}


async def test_a_refresh_keeps_live_streams_listed_and_leave_removes_one_at_once(store: InteractionStore) -> None:
    clock = Clock()
    presence = Presence(ttl_seconds=10, clock=clock)
    kept = await presence.join(store, _principal("kept"), "web", ["s1"])
    gone = await presence.join(store, _principal("gone"), "tui", ["s1"])
    await presence.leave(gone)
    clock.now += 8
    await presence.refresh()
    clock.now += 8  # 16 s after joining, 8 s after the refresh
    listed, _ = await presence.listed(store, _principal("admin"), cap=10)
    assert [s.principal for s in listed] == ["kept"]
    assert presence.streams == 1
    await presence.leave(kept)
    assert await store.surfaces() == {}


async def test_once_closing_a_stream_that_joins_or_leaves_writes_nothing_and_its_entry_expires_with_its_ttl(
    store: InteractionStore,
) -> None:
    presence = Presence(ttl_seconds=30)
    early = await presence.join(store, _principal("early"), "web", [ALL_SESSIONS])
    await presence.aclose()  # the service is closing Redis: a late handler must not open a connection
    late = await presence.join(store, _principal("late"), "tui", [ALL_SESSIONS])
    await presence.leave_soon(early)
    await presence.leave_soon(late)
    listed = set(await store.surfaces())
    assert listed == {early}, "the late join wrote nothing, the late leave deleted nothing"
    assert presence.streams == 0
