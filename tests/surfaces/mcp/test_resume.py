"""Resumable 2025-11-25 streams (pure logic): the event store replays a stream only to a ``GET`` of the session
that stored it, and a call's client is gone only when its closed stream is not resumed within the grace."""

from __future__ import annotations

import asyncio

from mcp.server.streamable_http import EventMessage
from mcp_types import JSONRPCNotification
from starlette.types import Message

from services.core.auth import Principal, Role
from surfaces.mcp import resume
from surfaces.mcp.auth import PRINCIPAL_STATE
from surfaces.mcp.resume import RequestTag, SessionEventStore


async def _never() -> Message:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def _tag(session: str, principal: Principal | None = None) -> RequestTag:
    state = {PRINCIPAL_STATE: principal} if principal is not None else {}
    return RequestTag({"type": "http", "headers": [], "state": state}, _never, session)


def _note(n: int) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n})


async def _store(
    store: SessionEventStore,
    session: str,
    stream: str,
    message: JSONRPCNotification | None,
    principal: Principal | None = None,
) -> str:
    token = resume._current.set(_tag(session, principal))
    try:
        return await store.store_event(stream, message)
    finally:
        resume._current.reset(token)


async def _replay(store: SessionEventStore, tag: RequestTag, last: str) -> tuple[str | None, list[EventMessage]]:
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    token = resume._current.set(tag)
    try:
        return await store.replay_events_after(last, send), sent
    finally:
        resume._current.reset(token)


async def test_a_stream_is_replayed_after_the_last_event_to_its_own_session_only() -> None:
    store = SessionEventStore()
    priming = await _store(store, "s1", "2", None)
    await _store(store, "s2", "2", _note(0))  # another session's request 2
    await _store(store, "s1", "3", _note(9))  # another request of the same session
    first = await _store(store, "s1", "2", _note(1))
    await _store(store, "s1", "2", _note(2))

    stream, sent = await _replay(store, _tag("s1"), priming)
    assert stream == "2"
    assert [event.message.params for event in sent] == [{"n": 1}, {"n": 2}]  # type: ignore[union-attr]
    stream, sent = await _replay(store, _tag("s1"), first)
    assert [event.message.params for event in sent] == [{"n": 2}]  # type: ignore[union-attr]

    assert await _replay(store, _tag("s2"), priming) == (None, [])
    assert await _replay(store, _tag(""), priming) == (None, [])
    assert await _replay(store, _tag("s1"), "no-such-event") == (None, [])


async def test_a_stream_is_replayed_only_to_the_principal_that_stored_it_even_with_its_session_id() -> None:
    alice = Principal("alice", frozenset({Role.CALLER}))
    bob = Principal("bob", frozenset({Role.CALLER}))
    store = SessionEventStore()
    priming = await _store(store, "s1", "2", None, alice)
    await _store(store, "s1", "2", _note(1), alice)

    assert await _replay(store, _tag("s1", bob), priming) == (None, [])
    assert await _replay(store, _tag("s1"), priming) == (None, [])  # the open endpoint's "local" is not alice
    stream, sent = await _replay(store, _tag("s1", alice), priming)
    assert stream == "2"
    assert [event.message.params for event in sent] == [{"n": 1}]  # type: ignore[union-attr]


async def test_the_store_keeps_its_newest_events_only() -> None:
    store = SessionEventStore(max_events=2)
    oldest = await _store(store, "s1", "2", _note(1))
    await _store(store, "s1", "2", _note(2))
    await _store(store, "s1", "2", _note(3))
    assert await _replay(store, _tag("s1"), oldest) == (None, [])


async def test_a_closed_stream_not_resumed_within_the_grace_means_the_client_is_gone() -> None:
    store = SessionEventStore()
    tag = _tag("s1")
    tag.gone.set()
    async with asyncio.timeout(10):
        await store.until_gone(tag, "2", grace_seconds=0.05)


async def test_a_stream_resumed_within_the_grace_keeps_the_call_until_the_resumed_stream_is_gone() -> None:
    store = SessionEventStore()
    posted = _tag("s1")
    priming = await _store(store, "s1", "2", None)
    waiting = asyncio.ensure_future(store.until_gone(posted, "2", grace_seconds=600))
    posted.gone.set()
    resumed = _tag("s1")
    stream, _sent = await _replay(store, resumed, priming)
    assert stream == "2"
    for _ in range(100):  # yield to the loop (no time passes)
        await asyncio.sleep(0)
    assert not waiting.done(), "the resumed stream is open: the client is still there"
    waiting.cancel()
