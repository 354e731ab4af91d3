"""InteractionAuthority directly over real Redis: races, trimmed resume tokens, caps, principals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from redis.asyncio.cluster import RedisCluster

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.auth import ANONYMOUS, Principal, Role
from services.core.limits import Limits
from services.core.status import ServiceError
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.keys import Keys
from services.interaction.redis_client import redis_client
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore
from tests.helpers.waiting import eventually
from tests.services.interaction.harness import accept, binding, make_form

SURFACE_A = Principal(name="a", roles=frozenset({Role.SURFACE}), sessions=frozenset({"s-a"}))


@pytest.fixture
async def authority(redis_url: str) -> AsyncIterator[InteractionAuthority]:
    settings = Settings(redis_url=redis_url, events_maxlen=1)
    client = redis_client(settings)
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
        await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
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
    client = redis_client(settings)
    store = InteractionStore(client, Keys("test"), retention_ms=60_000, events_maxlen=100)
    authority = InteractionAuthority(store, settings, limits=Limits(max_answer_bytes=64))
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    with pytest.raises(errors.LimitExceeded):
        await authority.answer(ANONYMOUS, opened.interaction_id, accept("x" * 100))
    assert (await authority.get(ANONYMOUS, opened.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING
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
    assert (await authority.get(ANONYMOUS, theirs.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_wait_requests_are_capped_by_the_service_maximum(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form(), wait_seconds=10_000)
    waited = opened.expires_at.ToMilliseconds() - opened.created_at.ToMilliseconds()
    assert waited == int(authority.settings.form_wait_max_seconds * 1000)


@pytest.fixture
async def roomy(redis_url: str) -> AsyncIterator[InteractionAuthority]:
    """An authority whose event Streams keep every entry (no trimming within a test)."""
    settings = Settings(redis_url=redis_url)
    client = redis_client(settings)
    store = InteractionStore(client, Keys("test"), retention_ms=60_000, events_maxlen=100_000)
    yield InteractionAuthority(store, settings)
    await client.aclose()


async def open_many(authority: InteractionAuthority, epoch: int, count: int, sessions: int) -> dict[str, str]:
    """Open ``count`` forms spread over ``sessions`` sessions (32 at a time); returns id → session."""
    gate = asyncio.Semaphore(32)

    async def one(n: int) -> tuple[str, str]:
        async with gate:
            session = f"s-{n % sessions}"
            opened = await authority.open(epoch, binding(session, f"inv-{epoch}-{n}"), make_form())
            return opened.interaction_id, session

    return dict(await asyncio.gather(*(one(n) for n in range(count))))


async def stream_entries(client: redis.asyncio.Redis | RedisCluster, key: str) -> list[dict[bytes, bytes]]:
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(key)  # type: ignore[assignment]
    return [fields for _id, fields in entries]


async def test_one_epoch_change_closes_1200_pending_forms_of_several_sessions_with_every_event(
    roomy: InteractionAuthority,
) -> None:
    keys = roomy.store.keys
    client = roomy.store.client
    old, _ = await roomy.begin_epoch()
    opened = await open_many(roomy, old, 1200, sessions=7)

    new, older_pending = await roomy.begin_epoch()

    assert (new, older_pending) == (old + 1, 1200)
    records = await roomy.store.get_many(list(opened))
    assert all(r is not None and r.state == "closed" for r in records)
    assert {r.interaction.close_reason for r in records if r is not None} == {
        interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    }
    assert all(r is not None and r.interaction.settled_at.ToMilliseconds() > 0 for r in records)
    for session in {f"s-{n}" for n in range(7)}:
        events = [
            interaction_pb2.InteractionEvent.FromString(f[b"pb"])
            for f in await stream_entries(client, keys.events(session))
        ]
        closed = {e.interaction.interaction_id for e in events if e.kind == interaction_pb2.EVENT_KIND_CLOSED}
        assert closed == {i for i, s in opened.items() if s == session}
        assert all(
            e.interaction.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
            for e in events
            if e.kind == interaction_pb2.EVENT_KIND_CLOSED
        )
        assert await client.zcard(keys.session_pending(session)) == 0
    settled = await stream_entries(client, keys.settled())
    assert sorted(f[b"id"].decode() for f in settled) == sorted(opened)
    assert {int(f[b"epoch"]) for f in settled} == {old}
    assert await roomy.store.pending_ids() == []
    assert await client.exists(keys.leases(old)) == 0
    assert await client.keys(keys.invocation("*")) == []
    # The invocations are free again in the new epoch.
    reopened = await roomy.open(new, binding("s-0", f"inv-{old}-0"), make_form())
    assert reopened.host_epoch == new


async def test_closing_older_epochs_leaves_answered_forms_and_forms_of_the_current_epoch_alone(
    roomy: InteractionAuthority,
) -> None:
    old, _ = await roomy.begin_epoch()
    opened = await open_many(roomy, old, 20, sessions=2)
    answered = next(iter(opened))
    await roomy.answer(ANONYMOUS, answered, accept(), submission_id="sub-1")
    new, older_pending = await roomy.fence_epoch()
    current = await roomy.open(new, binding("s-0", "inv-current"), make_form())

    assert older_pending == 19
    assert await roomy.close_older_epochs() == 19
    assert await roomy.close_older_epochs() == 0

    assert (await roomy.get(ANONYMOUS, answered)).state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert [i.interaction_id for i in await roomy.list_pending(ANONYMOUS)] == [current.interaction_id]


async def test_two_replicas_closing_the_same_older_forms_close_each_exactly_once(
    roomy: InteractionAuthority, redis_url: str
) -> None:
    settings = Settings(redis_url=redis_url)
    other_client = redis_client(settings)
    other = InteractionAuthority(
        InteractionStore(other_client, Keys("test"), retention_ms=60_000, events_maxlen=100_000), settings
    )
    old, _ = await roomy.begin_epoch()
    opened = await open_many(roomy, old, 1100, sessions=3)
    await roomy.fence_epoch()

    counts = await asyncio.gather(roomy.close_older_epochs(), other.close_older_epochs())

    assert sum(counts) == 1100
    settled = await stream_entries(roomy.store.client, roomy.store.keys.settled())
    assert sorted(f[b"id"].decode() for f in settled) == sorted(opened)
    await other_client.aclose()


async def test_older_forms_left_pending_by_an_interrupted_closer_are_closed_by_the_reaper(
    roomy: InteractionAuthority,
) -> None:
    old, _ = await roomy.begin_epoch()
    opened = await open_many(roomy, old, 30, sessions=2)
    new, _ = await roomy.fence_epoch()  # fenced, but nothing closed (as if the closer was stopped)
    current = await roomy.open(new, binding("s-0", "inv-current"), make_form())

    assert await roomy.reap_once() == 30

    records = await roomy.store.get_many(list(opened))
    assert all(
        r is not None and r.interaction.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED for r in records
    )
    assert await roomy.store.older_pending(new) == 0
    assert await roomy.reap_once() == 0
    assert (await roomy.get(ANONYMOUS, current.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def test_a_background_closer_finishes_the_job_after_the_fence(roomy: InteractionAuthority) -> None:
    old, _ = await roomy.begin_epoch()
    opened = await open_many(roomy, old, 600, sessions=4)
    await roomy.fence_epoch()

    roomy.close_older_epochs_soon()

    async def none_pending() -> bool:
        return await roomy.store.pending_ids() == []

    done: bool = await eventually(none_pending, what="every older form closed")
    assert done
    settled = await stream_entries(roomy.store.client, roomy.store.keys.settled())
    assert len(settled) == len(opened)
    await roomy.aclose()


async def test_an_answer_records_delivery_once_and_a_later_report_changes_nothing(
    authority: InteractionAuthority,
) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    answered = await authority.answer(ANONYMOUS, opened.interaction_id, accept("v"))
    assert answered.delivery == interaction_pb2.DELIVERY_STATE_PENDING
    changed, after = await authority.record_delivery(
        epoch, opened.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED
    )
    assert changed
    assert after is not None
    assert after.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED
    changed, after = await authority.record_delivery(
        epoch, opened.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_STOPPED
    )
    assert not changed
    assert after is not None
    assert after.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED
    stored = await authority.get(ANONYMOUS, opened.interaction_id)
    assert stored.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED
    assert stored.delivery_lost_reason == interaction_pb2.CLOSE_REASON_UNSPECIFIED


async def test_a_delivery_report_of_a_closed_form_or_with_a_bad_reason_changes_nothing(
    authority: InteractionAuthority,
) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    changed, after = await authority.record_delivery(
        epoch, opened.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED
    )
    assert not changed
    assert after is not None
    assert after.state == interaction_pb2.INTERACTION_STATE_CLOSED
    with pytest.raises(errors.InvalidRequest):
        await authority.record_delivery(
            epoch, opened.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_ANSWERED
        )


async def test_a_new_host_epoch_records_an_undelivered_answer_of_the_old_epoch_lost_host_restarted(
    authority: InteractionAuthority,
) -> None:
    old, _ = await authority.begin_epoch()
    opened = await authority.open(old, binding(), make_form())
    await authority.answer(ANONYMOUS, opened.interaction_id, accept("v"))
    await authority.begin_epoch()  # the old broker is gone before it confirmed delivery
    record = await authority.get(ANONYMOUS, opened.interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert record.delivery == interaction_pb2.DELIVERY_STATE_LOST
    assert record.delivery_lost_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    # The stale broker's late report changes nothing: the new epoch decided.
    changed, after = await authority.record_delivery(
        old, opened.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED
    )
    assert not changed
    assert after is not None
    assert after.delivery == interaction_pb2.DELIVERY_STATE_LOST
    assert await authority.store.undelivered_ids(10) == []


async def test_the_reaper_records_an_older_epochs_undelivered_answer_lost_after_another_replica_moved_the_epoch(
    authority: InteractionAuthority, redis_url: str
) -> None:
    first, _ = await authority.begin_epoch()
    opened = await authority.open(first, binding(), make_form())
    await authority.answer(ANONYMOUS, opened.interaction_id, accept("v"))
    assert await authority.reap_once() == 0  # swept at this epoch: the answer is current, delivery pending
    assert (await authority.get(ANONYMOUS, opened.interaction_id)).delivery == interaction_pb2.DELIVERY_STATE_PENDING
    settings = Settings(redis_url=redis_url)
    other_client = redis_client(settings)
    other = InteractionAuthority(
        InteractionStore(other_client, Keys("test"), retention_ms=60_000, events_maxlen=100), settings
    )
    await other.fence_epoch()  # a new broker on another replica; that replica's sweep did not run
    await other_client.aclose()

    await authority.reap_once()

    record = await authority.get(ANONYMOUS, opened.interaction_id)
    assert record.delivery == interaction_pb2.DELIVERY_STATE_LOST
    assert record.delivery_lost_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    assert await authority.store.undelivered_ids(10) == []


async def test_a_replayed_open_gets_the_invocations_pending_form_and_any_other_open_is_refused_and_logged(
    authority: InteractionAuthority, caplog: pytest.LogCaptureFixture
) -> None:
    epoch, _ = await authority.begin_epoch()
    first = await authority.open(epoch, binding("s-a", "inv-replayed"), make_form())

    again = await authority.open(epoch, binding("s-a", "inv-replayed"), make_form(), replay=True)
    assert again.interaction_id == first.interaction_id, "the open whose reply was lost"
    with pytest.raises(errors.AlreadyPending):
        await authority.open(epoch, binding("s-a", "inv-replayed"), make_form())  # not a replay
    other = binding("s-a", "inv-replayed")
    other.provider_correlation_id = "corr-2"
    with caplog.at_level("WARNING", logger="maka.interaction.authority"), pytest.raises(errors.AlreadyPending):
        await authority.open(epoch, other, make_form(), replay=True)
    [refused] = [r for r in caplog.records if r.getMessage() == "replay_refused"]
    assert (refused.state, refused.same_binding) == ("pending", False)  # type: ignore[attr-defined]


async def test_a_stale_broker_cannot_record_a_pending_delivery(authority: InteractionAuthority) -> None:
    old, _ = await authority.begin_epoch()
    opened = await authority.open(old, binding(), make_form())
    await authority.answer(ANONYMOUS, opened.interaction_id, accept("v"))
    await authority.fence_epoch()  # fenced, older deliveries not yet recorded lost
    with pytest.raises(errors.StaleEpoch):
        await authority.record_delivery(old, opened.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED)


async def test_fencing_an_invocation_closes_its_pending_form_and_refuses_any_later_open(
    authority: InteractionAuthority,
) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding("s-a", "inv-lost-reply"), make_form())
    changed, after = await authority.close_invocation(
        epoch, "inv-lost-reply", interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED
    )
    assert changed
    assert after is not None
    assert after.interaction_id == opened.interaction_id
    assert after.close_reason == interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED
    # An open of the same invocation that arrives late (its reply would be lost) cannot commit.
    with pytest.raises(errors.AlreadyPending):
        await authority.open(epoch, binding("s-a", "inv-lost-reply"), make_form())
    assert await authority.list_pending(ANONYMOUS) == []


async def test_fencing_an_invocation_before_its_open_arrives_refuses_the_open(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    changed, after = await authority.close_invocation(epoch, "inv-early", interaction_pb2.CLOSE_REASON_STOPPED)
    assert not changed
    assert after is None
    with pytest.raises(errors.AlreadyPending):
        await authority.open(epoch, binding("s-a", "inv-early"), make_form())
