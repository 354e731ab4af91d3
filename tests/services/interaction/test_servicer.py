"""The InteractionService over a real grpc.aio server and real Redis: HostLink, Attach, unary RPCs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction import audit
from services.interaction.host_link import OPEN_CONCURRENCY
from services.interaction.settings import Settings
from tests.helpers.waiting import eventually
from tests.services.interaction.harness import (
    ADMIN_SURFACE_TOKEN,
    BROKER_TOKEN,
    FRAME_TIMEOUT,
    SURFACE_A_TOKEN,
    SURFACE_B_TOKEN,
    Link,
    Service,
    Surface,
    accept,
    channel,
    make_form,
    start_service,
)


async def test_open_snapshot_answer_settles_and_every_side_sees_it(
    broker_channel: grpc.aio.Channel,
    surface_channel: grpc.aio.Channel,
    surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub,
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    assert opened.interaction_id.startswith("ix_")
    assert opened.state == interaction_pb2.INTERACTION_STATE_PENDING
    assert opened.host_epoch == link.epoch
    assert opened.binding.provider_correlation_id == "corr-1"

    surface = await Surface.attach(surface_channel, ("s-a",))
    snapshot = (await surface.next("snapshot")).snapshot
    assert [i.interaction_id for i in snapshot.pending] == [opened.interaction_id]
    assert snapshot.pending[0].form.fields[0].name == "target"
    assert snapshot.resume_token

    await surface.answer("sub-1", opened.interaction_id, accept("prod", replicas=2))
    outcome = (await surface.next("answer_outcome")).answer_outcome
    assert outcome.accepted, outcome
    assert outcome.submission_id == "sub-1"
    assert outcome.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert outcome.interaction.answer.values["target"].string_value == "prod"

    event = (await surface.next("event")).event
    assert event.event.kind == interaction_pb2.EVENT_KIND_ANSWERED
    assert event.event.interaction.interaction_id == opened.interaction_id
    assert event.resume_token != snapshot.resume_token

    settled = await link.next_settled()
    assert settled.interaction_id == opened.interaction_id
    assert settled.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert settled.close_reason == interaction_pb2.CLOSE_REASON_ANSWERED
    assert settled.answer.values["replicas"].integer_value == 2

    got = await surface_stub.GetInteraction(
        interaction_service_pb2.GetInteractionRequest(interaction_id=opened.interaction_id)
    )
    assert got.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    listed = await surface_stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["s-a"]))
    assert list(listed.pending) == []
    await surface.close()
    await link.close()


async def test_live_open_reaches_an_attached_surface_as_an_opened_event(
    broker_channel: grpc.aio.Channel, surface_channel: grpc.aio.Channel
) -> None:
    surface = await Surface.attach(surface_channel, ("s-a",))
    assert list((await surface.next("snapshot")).snapshot.pending) == []
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    event = (await surface.next("event")).event.event
    assert event.kind == interaction_pb2.EVENT_KIND_OPENED
    assert event.interaction.interaction_id == opened.interaction_id
    await surface.close()
    await link.close()


async def test_fifty_concurrent_answers_from_two_surfaces_have_exactly_one_winner(
    broker_channel: grpc.aio.Channel, service: Service
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    async with channel(service, SURFACE_A_TOKEN) as ch1, channel(service, SURFACE_A_TOKEN) as ch2:
        one = await Surface.attach(ch1, ("s-a",))
        two = await Surface.attach(ch2, ("s-a",))
        await one.next("snapshot")
        await two.next("snapshot")
        for n in range(25):
            await one.answer(f"one-{n}", opened.interaction_id, accept(f"one-{n}"))
            await two.answer(f"two-{n}", opened.interaction_id, accept(f"two-{n}"))
        outcomes = [(await s.next("answer_outcome")).answer_outcome for s in (one, two) for _ in range(25)]
        winners = [o for o in outcomes if o.accepted]
        assert len(winners) == 1
        losers = [o for o in outcomes if not o.accepted]
        assert {o.reason for o in losers} == {interaction_pb2.ERROR_REASON_ALREADY_SETTLED}
        winning_value = winners[0].interaction.answer.values["target"].string_value
        assert winning_value == winners[0].submission_id
        assert all(o.interaction.answer.values["target"].string_value == winning_value for o in losers)
        settled = await link.next_settled()
        assert settled.answer.values["target"].string_value == winning_value
        await one.close()
        await two.close()
    await link.close()


async def test_retrying_the_same_submission_returns_the_same_outcome_and_a_different_one_is_already_settled(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    request = interaction_service_pb2.AnswerRequest(
        interaction_id=opened.interaction_id, submission_id="sub-x", answer=accept("prod")
    )
    first = await surface_stub.Answer(request)
    retry = await surface_stub.Answer(request)
    assert retry.interaction == first.interaction
    different = interaction_service_pb2.AnswerRequest(
        interaction_id=opened.interaction_id, submission_id="sub-y", answer=accept("dev")
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await surface_stub.Answer(different)
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.ABORTED
    assert detail.reason == InteractionErrorReason.ALREADY_SETTLED
    # The retry with changed content under the first id still returns the first outcome.
    same_id_other_content = interaction_service_pb2.AnswerRequest(
        interaction_id=opened.interaction_id, submission_id="sub-x", answer=accept("dev")
    )
    again = await surface_stub.Answer(same_id_other_content)
    assert again.interaction.answer.values["target"].string_value == "prod"
    await link.close()


async def test_answer_for_another_sessions_form_is_not_found_like_an_unknown_id(
    broker_channel: grpc.aio.Channel, service: Service
) -> None:
    link = await Link.connect(broker_channel)
    foreign = await link.open("s-b", "inv-b")
    async with channel(service, SURFACE_A_TOKEN) as ch:
        stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
            interaction_service_pb2_grpc.InteractionServiceStub(ch)
        )
        details = []
        for interaction_id in (foreign.interaction_id, "ix_does_not_exist"):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Answer(
                    interaction_service_pb2.AnswerRequest(
                        interaction_id=interaction_id, submission_id="s", answer=accept("prod")
                    )
                )
            details.append(error_from_rpc(caught.value))
        assert [d.code for d in details] == [grpc.StatusCode.NOT_FOUND] * 2
        assert [d.reason for d in details] == [InteractionErrorReason.NOT_FOUND] * 2
        assert details[0].message.replace(foreign.interaction_id, "X") == details[1].message.replace(
            "ix_does_not_exist", "X"
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=foreign.interaction_id)
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        # The foreign form is untouched.
        listed = await stub.ListPending(interaction_service_pb2.ListPendingRequest())
        assert list(listed.pending) == []
    await link.close()


async def test_answer_with_the_wrong_session_id_is_not_found(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await surface_stub.Answer(
            interaction_service_pb2.AnswerRequest(
                interaction_id=opened.interaction_id, session_id="s-b", answer=accept("prod")
            )
        )
    assert error_from_rpc(caught.value).reason == InteractionErrorReason.NOT_FOUND
    await link.close()


async def test_answer_after_close_is_refused_with_the_closure_reason(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    reply = await link.request(
        interaction_service_pb2.HostLinkRequest(
            close=interaction_service_pb2.CloseInteraction(
                interaction_id=opened.interaction_id, reason=interaction_pb2.CLOSE_REASON_STOPPED
            )
        )
    )
    assert reply.closed.changed
    assert reply.closed.interaction.close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    settled = await link.next_settled()
    assert settled.close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await surface_stub.Answer(
            interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=accept("prod"))
        )
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.FAILED_PRECONDITION
    assert detail.reason == InteractionErrorReason.CLOSED
    assert detail.metadata["close_reason"] == "stopped"
    again = await link.request(
        interaction_service_pb2.HostLinkRequest(
            close=interaction_service_pb2.CloseInteraction(
                interaction_id=opened.interaction_id, reason=interaction_pb2.CLOSE_REASON_PROVIDER_LOST
            )
        )
    )
    assert not again.closed.changed
    assert again.closed.interaction.close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    await link.close()


async def test_invalid_answer_is_refused_with_field_violations_and_the_form_stays_pending(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    bad = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values={"replicas": form_pb2.Value(integer_value=9)})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await surface_stub.Answer(
            interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=bad)
        )
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.INVALID_ARGUMENT
    assert detail.reason == InteractionErrorReason.INVALID_ANSWER
    assert {path for path, _ in detail.violations} >= {"/target", "/replicas"}
    listed = await surface_stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["s-a"]))
    assert [i.interaction_id for i in listed.pending] == [opened.interaction_id]
    await link.close()


async def test_decline_and_cancel_are_answers(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    for n, action in enumerate((form_pb2.ACTION_DECLINE, form_pb2.ACTION_CANCEL)):
        opened = await link.open("s-a", f"inv-{n}")
        answered = await surface_stub.Answer(
            interaction_service_pb2.AnswerRequest(
                interaction_id=opened.interaction_id, answer=form_pb2.Answer(action=action)
            )
        )
        assert answered.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert answered.interaction.answer.action == action
    await link.close()


async def test_open_rejects_a_bad_form_and_an_incomplete_binding_without_ending_the_link(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    duplicate = form_pb2.Form(
        message="m",
        fields=[
            form_pb2.Field(
                name="pick",
                label="Pick",
                single_select=form_pb2.SingleSelectField(
                    options=[form_pb2.Option(value="a", label="A"), form_pb2.Option(value="a", label="A2")]
                ),
            )
        ],
    )
    rejected = await link.open_raw("s-a", "inv-1", form=duplicate)
    assert rejected.WhichOneof("frame") == "open_rejected"
    assert rejected.open_rejected.request_ref == "ref-inv-1"
    assert rejected.open_rejected.reason == interaction_pb2.ERROR_REASON_INVALID_FORM
    assert rejected.open_rejected.violations

    request = interaction_service_pb2.OpenInteraction(
        request_ref="r2", binding=interaction_pb2.Binding(session_id="s-a"), form=make_form()
    )
    reply = await link.request(interaction_service_pb2.HostLinkRequest(open=request))
    assert reply.open_rejected.reason == interaction_pb2.ERROR_REASON_INVALID_REQUEST

    assert (await link.open("s-a", "inv-1")).state == interaction_pb2.INTERACTION_STATE_PENDING
    listed = await surface_stub.ListPending(interaction_service_pb2.ListPendingRequest())
    assert len(listed.pending) == 1
    await link.close()


async def test_a_second_pending_form_for_one_invocation_is_rejected(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    await link.open("s-a", "inv-1")
    reply = await link.open_raw("s-a", "inv-1")
    assert reply.open_rejected.reason == interaction_pb2.ERROR_REASON_ALREADY_PENDING
    await link.close()


async def test_canonical_ids_are_minted_by_the_service_not_the_provider(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    a = await link.open("s-a", "inv-1")
    b = await link.open("s-a", "inv-2")
    assert a.interaction_id != b.interaction_id
    assert "corr-1" not in a.interaction_id
    await link.close()


async def test_surface_roles_cannot_open_a_host_link(service: Service) -> None:
    async with channel(service, SURFACE_A_TOKEN) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await Link.connect(ch)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_health_reports_serving_for_the_interaction_service(service: Service) -> None:
    async with channel(service) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        reply = await health.Check(  # type: ignore[attr-defined]
            health_pb2.HealthCheckRequest(service="maka.interaction.v1.InteractionService")
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_attach_to_a_session_outside_the_token_scope_is_permission_denied(service: Service) -> None:
    async with channel(service, SURFACE_A_TOKEN) as ch:
        surface = await Surface.attach(ch, ("s-b",))
        await surface.ended()
        assert surface.error is not None
        detail = error_from_rpc(surface.error)
        assert (detail.code, detail.reason) == (
            grpc.StatusCode.PERMISSION_DENIED,
            InteractionErrorReason.PERMISSION_DENIED,
        )


class GatedOpens:
    """Wraps ``InteractionAuthority.open`` of the running service: counts opens in flight and holds
    each one until :attr:`release` is set."""

    def __init__(self, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = asyncio.Event()
        original = service.app.authority.open

        async def gated(*args: Any, **kwargs: Any) -> interaction_pb2.Interaction:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await self.release.wait()
                return await original(*args, **kwargs)
            finally:
                self.in_flight -= 1

        monkeypatch.setattr(service.app.authority, "open", gated)


async def test_pipelined_opens_on_one_link_run_64_at_a_time_and_each_reply_carries_its_request_ref(
    service: Service, broker_channel: grpc.aio.Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = GatedOpens(service, monkeypatch)
    link = await Link.connect(broker_channel)
    for n in range(200):
        await link.send_open(f"ref-{n}", f"s-{n % 3}", f"inv-{n}")

    await eventually(lambda: gate.in_flight == OPEN_CONCURRENCY, what="64 opens in flight")
    gate.release.set()
    replies = await link.replies_by_ref(200)

    assert gate.max_in_flight == OPEN_CONCURRENCY
    assert sorted(replies) == sorted(f"ref-{n}" for n in range(200))
    for ref, reply in replies.items():
        assert reply.WhichOneof("frame") == "opened", reply
        assert reply.opened.interaction.binding.invocation_id == ref.replace("ref-", "inv-")
    await link.close()


async def test_back_to_back_opens_of_one_invocation_are_decided_in_the_order_sent(
    service: Service, broker_channel: grpc.aio.Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_started = asyncio.Event()
    second_done = asyncio.Event()
    calls = 0
    original = service.app.authority.open

    async def racing(*args: Any, **kwargs: Any) -> interaction_pb2.Interaction:
        # Give the later open every chance to overtake the earlier one if they were not ordered.
        nonlocal calls
        calls += 1
        if calls == 1:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.3):
                    await second_started.wait()
                    await second_done.wait()
            return await original(*args, **kwargs)
        second_started.set()
        try:
            return await original(*args, **kwargs)
        finally:
            second_done.set()

    monkeypatch.setattr(service.app.authority, "open", racing)
    link = await Link.connect(broker_channel)
    await link.send_open("first", "s-a", "inv-x")
    await link.send_open("second", "s-a", "inv-x")

    replies = await link.replies_by_ref(2)

    assert replies["first"].WhichOneof("frame") == "opened"
    assert replies["second"].open_rejected.reason == interaction_pb2.ERROR_REASON_ALREADY_PENDING
    await link.close()


async def test_a_close_sent_before_a_reopen_of_its_invocation_frees_the_invocation_first(
    broker_channel: grpc.aio.Channel,
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    close = interaction_service_pb2.CloseInteraction(
        interaction_id=opened.interaction_id, reason=interaction_pb2.CLOSE_REASON_STOPPED
    )
    await link.call.write(interaction_service_pb2.HostLinkRequest(close=close))
    await link.send_open("again", "s-a", "inv-1")

    async with asyncio.timeout(FRAME_TIMEOUT):
        first, second = await link.replies.get(), await link.replies.get()

    assert first.closed.changed
    assert second.opened.request_ref == "again"
    assert second.opened.interaction.interaction_id != opened.interaction_id
    await link.close()


async def test_a_link_that_stops_writing_still_gets_a_reply_for_every_open(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    for n in range(100):
        await link.send_open(f"ref-{n}", "s-a", f"inv-{n}")
    await link.call.done_writing()

    replies = await link.replies_by_ref(100)

    assert all(r.WhichOneof("frame") == "opened" for r in replies.values())
    await link.close()


async def _host_link_ending(service: Any, first: interaction_service_pb2.HostLinkRequest | None) -> tuple[Any, ...]:
    async with channel(service, BROKER_TOKEN) as ch:
        call = interaction_service_pb2_grpc.InteractionServiceStub(ch).HostLink()
        if first is not None:
            await call.write(first)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async with asyncio.timeout(FRAME_TIMEOUT):
                await call.read()
    detail = error_from_rpc(ended.value)
    return detail.code, detail.reason, detail.message


async def test_a_host_link_whose_first_frame_is_not_hello_or_comes_too_late_is_told_so_naming_hello_and_its_setting(
    settings: Settings,
) -> None:
    service = await start_service(settings.model_copy(update={"host_link_hello_timeout_seconds": 0.2}))
    try:
        invalid = (grpc.StatusCode.INVALID_ARGUMENT, InteractionErrorReason.INVALID_REQUEST)
        silent = await _host_link_ending(service, None)
        assert silent == (
            *invalid,
            "no hello frame within 0.2 s (MAKA_HOST_LINK_HELLO_TIMEOUT_SECONDS); the stream ends",
        )
        heartbeat = interaction_service_pb2.HostLinkRequest(heartbeat=interaction_service_pb2.Heartbeat())
        assert await _host_link_ending(service, heartbeat) == (*invalid, "the first HostLink frame must be hello")
    finally:
        await service.running.stop()


async def test_an_attach_stream_that_never_subscribes_ends_invalid_request_after_the_subscribe_deadline(
    settings: Settings,
) -> None:
    service = await start_service(settings.model_copy(update={"attach_subscribe_timeout_seconds": 0.2}))
    try:
        async with channel(service, ADMIN_SURFACE_TOKEN) as ch:
            call = interaction_service_pb2_grpc.InteractionServiceStub(ch).Attach()
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async with asyncio.timeout(FRAME_TIMEOUT):
                    await call.read()
        detail = error_from_rpc(ended.value)
        assert (detail.code, detail.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            InteractionErrorReason.INVALID_REQUEST,
        )
        assert (
            detail.message == "no subscribe frame within 0.2 s (MAKA_ATTACH_SUBSCRIBE_TIMEOUT_SECONDS); the stream ends"
        )
    finally:
        await service.running.stop()


# --- Who answered, ListHistory, audit (docs/design.md#history) ---------------------------------------------

HISTORY_CANARY = "history-canary-7c41e0"


@pytest.fixture
def history_settings(settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """The service on a Host of its own (history is per Host), auditing to a file (the service log again after)."""
    yield settings.model_copy(update={"host_id": f"hist-{secrets.token_hex(4)}", "audit_log": tmp_path / "audit.jsonl"})
    audit.configure(None)


async def test_an_answer_over_attach_names_the_token_and_the_subscribes_surface_kind(
    history_settings: Settings,
) -> None:
    service = await start_service(history_settings)
    try:
        async with channel(service, BROKER_TOKEN) as broker, channel(service, SURFACE_A_TOKEN) as surface_a:
            link = await Link.connect(broker)
            opened = await link.open("s-a", "inv-1")
            surface = await Surface.attach(surface_a, ("s-a",), surface_kind="tui")
            await surface.next("snapshot")
            await surface.answer("sub-1", opened.interaction_id, accept("prod"))
            outcome = (await surface.next("answer_outcome")).answer_outcome
            expected = interaction_pb2.AnsweredBy(
                principal="a", principal_kind=interaction_pb2.PRINCIPAL_KIND_TOKEN, surface_kind="tui"
            )
            assert outcome.interaction.answered_by == expected
            assert (await surface.next("event")).event.event.interaction.answered_by == expected
            assert (await link.next_settled()).answered_by == expected  # the broker's settled push
            await surface.close()
            await link.close()
    finally:
        await service.running.stop()


async def test_list_history_shows_visible_settled_forms_newest_first_paged_and_never_a_value(
    history_settings: Settings,
) -> None:
    service = await start_service(history_settings)
    try:
        async with (
            channel(service, BROKER_TOKEN) as broker,
            channel(service, SURFACE_A_TOKEN) as surface_a,
            channel(service, SURFACE_B_TOKEN) as surface_b,
        ):
            link = await Link.connect(broker)
            answered = await link.open("s-a", "inv-1")
            stub_a = interaction_service_pb2_grpc.InteractionServiceStub(surface_a)
            await stub_a.Answer(
                interaction_service_pb2.AnswerRequest(
                    interaction_id=answered.interaction_id, answer=accept(HISTORY_CANARY), surface_kind="web"
                )
            )
            stopped = await link.open("s-a", "inv-2")
            await link.request(
                interaction_service_pb2.HostLinkRequest(
                    close=interaction_service_pb2.CloseInteraction(
                        interaction_id=stopped.interaction_id, reason=interaction_pb2.CLOSE_REASON_STOPPED
                    )
                )
            )
            first = await stub_a.ListHistory(interaction_service_pb2.ListHistoryRequest(page_size=1))
            assert [e.interaction_id for e in first.entries] == [stopped.interaction_id]
            assert not first.entries[0].HasField("answered_by")
            second = await stub_a.ListHistory(
                interaction_service_pb2.ListHistoryRequest(page_size=1, page_token=first.next_page_token)
            )
            (entry,) = second.entries
            assert entry.interaction_id == answered.interaction_id
            assert (entry.answered_by.principal, entry.answered_by.surface_kind) == ("a", "web")
            assert entry.action == form_pb2.ACTION_ACCEPT
            assert HISTORY_CANARY.encode() not in first.SerializeToString() + second.SerializeToString()
            stub_b = interaction_service_pb2_grpc.InteractionServiceStub(surface_b)
            assert list((await stub_b.ListHistory(interaction_service_pb2.ListHistoryRequest())).entries) == []
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await stub_b.ListHistory(interaction_service_pb2.ListHistoryRequest(session_ids=["s-a"]))
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
            await link.close()
    finally:
        await service.running.stop()


async def test_the_audit_file_gets_one_json_line_per_transition_and_never_a_value(
    history_settings: Settings,
) -> None:
    service = await start_service(history_settings)
    try:
        async with channel(service, BROKER_TOKEN) as broker, channel(service, SURFACE_A_TOKEN) as surface_a:
            link = await Link.connect(broker)
            opened = await link.open("s-a", "inv-1")
            stub_a = interaction_service_pb2_grpc.InteractionServiceStub(surface_a)
            await stub_a.Answer(
                interaction_service_pb2.AnswerRequest(
                    interaction_id=opened.interaction_id, answer=accept(HISTORY_CANARY), surface_kind="cli"
                )
            )
            await link.request(
                interaction_service_pb2.HostLinkRequest(
                    delivery=interaction_service_pb2.ReportDelivery(
                        interaction_id=opened.interaction_id, delivery=interaction_pb2.DELIVERY_STATE_DELIVERED
                    )
                )
            )
            await link.close()
    finally:
        await service.running.stop()
    assert history_settings.audit_log is not None
    text = history_settings.audit_log.read_text()
    assert HISTORY_CANARY not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert [(e["event"], e["interaction_id"]) for e in events] == [
        ("form_opened", opened.interaction_id),
        ("form_answered", opened.interaction_id),
        ("form_delivery", opened.interaction_id),
    ]
    answered = events[1]
    assert (answered["principal"], answered["surface_kind"], answered["action"]) == ("a", "cli", "accept")
    assert events[2]["delivery"] == "delivered"
