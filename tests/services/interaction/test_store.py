"""InteractionStore over real Redis: the batched host_restarted script and the epoch fence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from maka.interaction.v1 import interaction_pb2
from services.core.auth import ANONYMOUS
from services.interaction.authority import InteractionAuthority
from services.interaction.keys import Keys
from services.interaction.redis_client import redis_client
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore, Record
from tests.services.interaction.harness import accept, binding, make_form

KEYS = Keys("test")


@pytest.fixture
async def authority(redis_url: str) -> AsyncIterator[InteractionAuthority]:
    settings = Settings(redis_url=redis_url)
    client = redis_client(settings)
    store = InteractionStore(client, KEYS, retention_ms=60_000, events_maxlen=10_000)
    yield InteractionAuthority(store, settings)
    await client.aclose()


def closed_copy(record: Record) -> interaction_pb2.Interaction:
    new = interaction_pb2.Interaction()
    new.CopyFrom(record.interaction)
    new.state = interaction_pb2.INTERACTION_STATE_CLOSED
    new.close_reason = interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    return new


async def test_the_fence_counts_every_form_pending_at_that_instant(authority: InteractionAuthority) -> None:
    epoch, pending = await authority.store.begin_epoch()
    assert pending == 0
    for n in range(3):
        await authority.open(epoch, binding("s-a", f"inv-{n}"), make_form())
    assert await authority.store.begin_epoch() == (epoch + 1, 3)
    assert await authority.store.older_pending(epoch + 1) == 3
    assert await authority.store.older_pending(epoch) == 0


async def test_the_batch_script_skips_a_form_answered_after_it_was_read(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.fence_epoch()
    first = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
    second = await authority.open(epoch, binding("s-b", "inv-2"), make_form())
    records = await authority.store.get_many([first.interaction_id, second.interaction_id, "ix_unknown"])
    assert records == [
        await authority.store.get(first.interaction_id),
        await authority.store.get(second.interaction_id),
        None,
    ]
    read = [r for r in records if r is not None]
    await authority.answer(ANONYMOUS, first.interaction_id, accept(), submission_id="sub-1")
    await authority.store.begin_epoch()

    closed = await authority.store.restart_batch([(r, closed_copy(r)) for r in read])

    assert closed == [second.interaction_id]
    answered = await authority.store.get(first.interaction_id)
    assert answered is not None
    assert answered.state == "answered"
    restarted = await authority.store.get(second.interaction_id)
    assert restarted is not None
    assert restarted.state == "closed"
    assert restarted.interaction.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED


async def test_the_batch_script_refuses_forms_of_the_current_epoch(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.fence_epoch()
    opened = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
    (record,) = await authority.store.get_many([opened.interaction_id])
    assert record is not None

    assert await authority.store.restart_batch([(record, closed_copy(record))]) == []

    stored = await authority.store.get(opened.interaction_id)
    assert stored is not None
    assert stored.state == "pending"
    assert await authority.store.pending_ids() == [opened.interaction_id]
    assert await authority.store.client.exists(KEYS.settled()) == 0


async def test_the_batch_script_refuses_a_record_whose_session_or_epoch_does_not_match(
    authority: InteractionAuthority,
) -> None:
    epoch, _ = await authority.fence_epoch()
    opened = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
    (record,) = await authority.store.get_many([opened.interaction_id])
    assert record is not None
    await authority.store.begin_epoch()
    forged = Record(record.interaction, record.state, "s-b", record.epoch, record.invocation_id, "")
    older = Record(record.interaction, record.state, record.session_id, record.epoch - 1, record.invocation_id, "")

    assert await authority.store.restart_batch([(forged, closed_copy(record)), (older, closed_copy(record))]) == []

    stored = await authority.store.get(opened.interaction_id)
    assert stored is not None
    assert stored.state == "pending"
