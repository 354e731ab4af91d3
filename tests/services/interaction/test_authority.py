"""InteractionAuthority directly over real Redis: races, trimmed resume tokens, caps, principals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.auth import ANONYMOUS, Principal, Role
from services.core.limits import Limits
from services.core.status import ServiceError
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.keys import Keys
from services.interaction.main import redis_client
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore
from tests.services.interaction.harness import accept, binding, make_form

ix = interaction_pb2
SURFACE_A = Principal(name="a", roles=frozenset({Role.SURFACE}), sessions=frozenset({"s-a"}))


@pytest.fixture
async def authority(redis_url: str) -> AsyncIterator[InteractionAuthority]:
    settings = Settings(redis_url=redis_url, events_maxlen=1)
    client: redis.asyncio.Redis = redis_client(settings)
    store = InteractionStore(client, Keys("test"), retention_ms=60_000, events_maxlen=settings.events_maxlen)
    yield InteractionAuthority(store, settings)
    await client.aclose()


async def test_fifty_concurrent_answers_commit_exactly_one(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())

    async def attempt(n: int) -> str:
        try:
            await authority.answer(ANONYMOUS, opened.interaction_id, accept(f"v{n}"), submission_id=f"s{n}")
        except ServiceError as error:
            return error.reason
        return "OK"

    outcomes = await asyncio.gather(*(attempt(n) for n in range(50)))
    assert outcomes.count("OK") == 1
    assert set(outcomes) == {"OK", "ALREADY_SETTLED"}


async def test_a_token_whose_events_were_trimmed_yields_a_fresh_snapshot(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    start = await authority.attach_start(ANONYMOUS, ["s-a"], "")
    token = authority.token(start.positions)
    for n in range(120):  # 240 events: whole stream nodes get trimmed past the token
        opened = await authority.open(epoch, binding("s-a", f"inv-{n}"), make_form())
        await authority.close(epoch, opened.interaction_id, ix.CLOSE_REASON_STOPPED)
    last = await authority.open(epoch, binding("s-a", "inv-last"), make_form())
    resumed = await authority.attach_start(ANONYMOUS, ["s-a"], token)
    assert resumed.snapshot is not None
    assert [i.interaction_id for i in resumed.snapshot] == [last.interaction_id]
    fresh = authority.token(resumed.positions)
    assert (await authority.attach_start(ANONYMOUS, ["s-a"], fresh)).snapshot is None


async def test_a_token_for_other_sessions_yields_a_fresh_snapshot(authority: InteractionAuthority) -> None:
    await authority.begin_epoch()
    start = await authority.attach_start(ANONYMOUS, ["s-a"], "")
    token = authority.token(start.positions)
    assert (await authority.attach_start(ANONYMOUS, ["s-a"], token)).snapshot is None
    assert (await authority.attach_start(ANONYMOUS, ["s-a", "s-b"], token)).snapshot is not None


async def test_an_answer_over_the_byte_cap_is_refused_before_anything_is_read(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url)
    client: redis.asyncio.Redis = redis_client(settings)
    store = InteractionStore(client, Keys("test"), retention_ms=60_000, events_maxlen=100)
    authority = InteractionAuthority(store, settings, limits=Limits(max_answer_bytes=64))
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    with pytest.raises(errors.LimitExceeded):
        await authority.answer(ANONYMOUS, opened.interaction_id, accept("x" * 100))
    assert (await authority.get(ANONYMOUS, opened.interaction_id)).state == ix.INTERACTION_STATE_PENDING
    await client.aclose()


async def test_a_scoped_principal_sees_only_its_sessions(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    mine = await authority.open(epoch, binding("s-a", "inv-a"), make_form())
    theirs = await authority.open(epoch, binding("s-b", "inv-b"), make_form())
    assert [i.interaction_id for i in await authority.list_pending(SURFACE_A)] == [mine.interaction_id]
    with pytest.raises(errors.InteractionNotFound):
        await authority.get(SURFACE_A, theirs.interaction_id)
    with pytest.raises(errors.InteractionNotFound):
        await authority.answer(SURFACE_A, theirs.interaction_id, form_pb2.Answer(action=form_pb2.ACTION_DECLINE))
    assert (await authority.get(ANONYMOUS, theirs.interaction_id)).state == ix.INTERACTION_STATE_PENDING


async def test_wait_requests_are_capped_by_the_service_maximum(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form(), wait_seconds=10_000)
    waited = opened.expires_at.ToMilliseconds() - opened.created_at.ToMilliseconds()
    assert waited == int(authority.settings.form_wait_max_seconds * 1000)
