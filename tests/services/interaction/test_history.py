"""Who answered, the history of settled forms and the audit events, over real Redis (docs/design.md#history)."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.auth import ANONYMOUS, Principal, Role
from services.core.logs import JsonFormatter
from services.interaction import audit, errors
from services.interaction.authority import InteractionAuthority
from services.interaction.history import HistoryCursor
from services.interaction.keys import Keys
from services.interaction.redis_client import redis_client
from services.interaction.settings import Settings
from services.interaction.store import HistoryPolicy, InteractionStore
from tests.services.interaction.harness import accept, binding, make_form

ALICE = Principal(name="alice-laptop", roles=frozenset({Role.SURFACE}))
SURFACE_A = Principal(name="a", roles=frozenset({Role.SURFACE}), sessions=frozenset({"s-a"}))

Factory = Callable[..., InteractionAuthority]


class Clock:
    """A settable clock (seconds since the Unix epoch)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def make_authority(redis_url: str) -> AsyncIterator[Factory]:
    """Authorities over real Redis, each on a fresh Host (history is per Host)."""
    settings = Settings(redis_url=redis_url)
    client = redis_client(settings)

    def make(history: HistoryPolicy | None = None, clock: Callable[[], float] | None = None) -> InteractionAuthority:
        store = InteractionStore(
            client,
            Keys(f"h-{secrets.token_hex(4)}"),
            retention_ms=60_000,
            events_maxlen=1000,
            history=history or HistoryPolicy(),
        )
        return InteractionAuthority(store, settings, clock=clock) if clock else InteractionAuthority(store, settings)

    yield make
    await client.aclose()


@pytest.fixture
def authority(make_authority: Factory) -> InteractionAuthority:
    return make_authority()


async def test_an_answer_records_the_principal_and_surface_that_answered_it(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    answered = await authority.answer(ALICE, opened.interaction_id, accept(), surface_kind="web\x1b[31m")
    expected = interaction_pb2.AnsweredBy(
        principal="alice-laptop", principal_kind=interaction_pb2.PRINCIPAL_KIND_TOKEN, surface_kind="web[31m"
    )
    assert answered.answered_by == expected
    assert (await authority.get(ANONYMOUS, opened.interaction_id)).answered_by == expected
    (entry,), _ = await authority.list_history(ANONYMOUS)
    assert entry.answered_by == expected


async def test_an_anonymous_answer_is_recorded_as_anonymous(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    opened = await authority.open(epoch, binding(), make_form())
    answered = await authority.answer(ANONYMOUS, opened.interaction_id, accept(), surface_kind="cli")
    assert (answered.answered_by.principal, answered.answered_by.principal_kind) == (
        "anonymous",
        interaction_pb2.PRINCIPAL_KIND_ANONYMOUS,
    )


async def test_closes_nobody_answered_have_no_answerer_in_record_or_history(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    stopped = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
    left = await authority.open(epoch, binding("s-a", "inv-2"), make_form())
    await authority.close(epoch, stopped.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    await authority.begin_epoch()  # the next broker: the form left pending closes host_restarted
    entries, _ = await authority.list_history(ANONYMOUS)
    assert [(e.interaction_id, e.close_reason) for e in entries] == [
        (left.interaction_id, interaction_pb2.CLOSE_REASON_HOST_RESTARTED),
        (stopped.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED),
    ]
    assert all(not e.HasField("answered_by") and e.state == interaction_pb2.INTERACTION_STATE_CLOSED for e in entries)
    assert not (await authority.get(ANONYMOUS, left.interaction_id)).HasField("answered_by")


async def test_history_lists_newest_first_with_tool_provenance_action_and_delivery(
    authority: InteractionAuthority,
) -> None:
    epoch, _ = await authority.begin_epoch()
    first = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
    await authority.answer(ALICE, first.interaction_id, form_pb2.Answer(action=form_pb2.ACTION_DECLINE))
    second = await authority.open(epoch, binding("s-b", "inv-2"), make_form())
    await authority.answer(ALICE, second.interaction_id, accept(), surface_kind="tui")
    await authority.record_delivery(epoch, second.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED)
    entries, token = await authority.list_history(ANONYMOUS)
    assert token == ""
    newest, oldest = entries
    assert (newest.interaction_id, oldest.interaction_id) == (second.interaction_id, first.interaction_id)
    assert (newest.tool_name, newest.session_id, newest.invocation_id) == ("deploy:deploy", "s-b", "inv-2")
    assert (newest.requester.provider_display_name, newest.requester.claimed_tool) == ("Example", "deploy")
    assert (newest.action, newest.delivery) == (form_pb2.ACTION_ACCEPT, interaction_pb2.DELIVERY_STATE_DELIVERED)
    assert newest.HasField("delivery_recorded_at")
    assert newest.HasField("settled_at")
    assert newest.host_id == authority.host_id
    assert (oldest.action, oldest.delivery) == (form_pb2.ACTION_DECLINE, interaction_pb2.DELIVERY_STATE_PENDING)


async def test_history_pages_never_repeat_or_skip_an_entry(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    ids = []
    for n in range(7):
        opened = await authority.open(epoch, binding("s-a", f"inv-{n}"), make_form())
        await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        ids.append(opened.interaction_id)
    seen: list[str] = []
    settled: list[tuple[int, str]] = []
    token = ""
    while True:
        page, token = await authority.list_history(ANONYMOUS, page_size=3, page_token=token)
        assert len(page) <= 3
        seen += [e.interaction_id for e in page]
        settled += [(e.settled_at.ToMilliseconds(), e.interaction_id) for e in page]
        if not token:
            break
    # Every entry once, newest first (two forms closed in the same millisecond order by id: the next test).
    assert sorted(seen) == sorted(ids)
    assert len(seen) == len(ids)
    assert settled == sorted(settled, reverse=True)


async def test_forms_settled_in_the_same_millisecond_page_by_id(make_authority: Factory) -> None:
    clock = Clock()
    authority = make_authority(clock=clock)
    epoch, _ = await authority.begin_epoch()
    ids = []
    for n in range(5):
        opened = await authority.open(epoch, binding("s-a", f"inv-{n}"), make_form())
        await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        ids.append(opened.interaction_id)
    seen: list[str] = []
    token = ""
    for _ in range(5):
        page, token = await authority.list_history(ANONYMOUS, page_size=2, page_token=token)
        seen += [e.interaction_id for e in page]
        if not token:
            break
    assert sorted(seen, reverse=True) == seen
    assert sorted(seen) == sorted(ids)


async def test_history_shows_only_sessions_the_caller_may_see(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    mine = await authority.open(epoch, binding("s-a", "inv-a"), make_form())
    theirs = await authority.open(epoch, binding("s-b", "inv-b"), make_form())
    for opened in (mine, theirs):
        await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    entries, _ = await authority.list_history(SURFACE_A)
    assert [e.interaction_id for e in entries] == [mine.interaction_id]
    only_b, _ = await authority.list_history(ANONYMOUS, ["s-b"])
    assert [e.interaction_id for e in only_b] == [theirs.interaction_id]
    with pytest.raises(errors.SessionForbidden):
        await authority.list_history(SURFACE_A, ["s-b"])


async def test_a_malformed_page_token_is_an_invalid_request(authority: InteractionAuthority) -> None:
    with pytest.raises(errors.InvalidRequest):
        await authority.list_history(ANONYMOUS, page_token="not-a-token")
    assert HistoryCursor.decode(HistoryCursor(12, "ix_a").encode()) == HistoryCursor(12, "ix_a")


async def test_history_keeps_at_most_its_cap_dropping_the_oldest(make_authority: Factory, redis_url: str) -> None:
    authority = make_authority(HistoryPolicy(max_entries=3))
    epoch, _ = await authority.begin_epoch()
    ids = []
    for n in range(5):
        opened = await authority.open(epoch, binding("s-a", f"inv-{n}"), make_form())
        await authority.close(epoch, opened.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        ids.append(opened.interaction_id)
    entries, _ = await authority.list_history(ANONYMOUS)
    assert [e.interaction_id for e in entries] == ids[:1:-1]
    client = redis.asyncio.Redis.from_url(redis_url)
    assert await client.hlen(authority.store.keys.history_entries()) == 3
    await client.aclose()


async def test_history_drops_entries_past_its_retention(make_authority: Factory) -> None:
    clock = Clock()
    authority = make_authority(HistoryPolicy(retention_ms=60_000), clock=clock)
    epoch, _ = await authority.begin_epoch()
    old = await authority.open(epoch, binding("s-a", "inv-old"), make_form())
    await authority.close(epoch, old.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    clock.now += 61
    new = await authority.open(epoch, binding("s-a", "inv-new"), make_form())
    await authority.close(epoch, new.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    entries, _ = await authority.list_history(ANONYMOUS)
    assert [e.interaction_id for e in entries] == [new.interaction_id]


class Captured(logging.Handler):
    """Every audit line, formatted as the service writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


async def test_each_transition_is_audited_once_with_ids_principal_action_and_reason(
    authority: InteractionAuthority,
) -> None:
    captured = Captured()
    audit.AUDIT.addHandler(captured)
    try:
        epoch, _ = await authority.begin_epoch()
        answered = await authority.open(epoch, binding("s-a", "inv-1"), make_form())
        await authority.answer(ALICE, answered.interaction_id, accept(), surface_kind="web")
        with pytest.raises(errors.AlreadySettled):  # refused: not audited
            await authority.answer(ALICE, answered.interaction_id, accept(), surface_kind="web")
        await authority.record_delivery(
            epoch, answered.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_STOPPED
        )
        closed = await authority.open(epoch, binding("s-a", "inv-2"), make_form())
        await authority.close(epoch, closed.interaction_id, interaction_pb2.CLOSE_REASON_TIMED_OUT)
    finally:
        audit.AUDIT.removeHandler(captured)
    events = [json.loads(line) for line in captured.lines]
    assert [(e["event"], e["interaction_id"]) for e in events] == [
        ("form_opened", answered.interaction_id),
        ("form_answered", answered.interaction_id),
        ("form_delivery", answered.interaction_id),
        ("form_opened", closed.interaction_id),
        ("form_closed", closed.interaction_id),
    ]
    opened_event, answer_event, delivery_event, _, close_event = events
    assert answer_event["logger"] == "maka.audit"
    assert (answer_event["principal"], answer_event["principal_kind"], answer_event["surface_kind"]) == (
        "alice-laptop",
        "token",
        "web",
    )
    assert (answer_event["action"], answer_event["tool_name"], answer_event["host_id"]) == (
        "accept",
        "deploy:deploy",
        authority.host_id,
    )
    assert (delivery_event["delivery"], delivery_event["delivery_lost_reason"]) == ("lost", "stopped")
    assert close_event["close_reason"] == "timed_out"
    assert "principal" not in close_event
    assert opened_event["expires_at"] > opened_event["created_at"]


async def test_forms_a_new_epoch_closes_are_audited_host_restarted(authority: InteractionAuthority) -> None:
    epoch, _ = await authority.begin_epoch()
    left = await authority.open(epoch, binding("s-a", "inv-left"), make_form())
    captured = Captured()
    audit.AUDIT.addHandler(captured)
    try:
        await authority.begin_epoch()
    finally:
        audit.AUDIT.removeHandler(captured)
    (event,) = [json.loads(line) for line in captured.lines]
    assert (event["event"], event["interaction_id"], event["close_reason"]) == (
        "form_closed",
        left.interaction_id,
        "host_restarted",
    )
    assert event["host_epoch"] == epoch
