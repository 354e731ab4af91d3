"""surfaces.common.interactions against the real Interaction service (in-process, real Redis)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path

import grpc
import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from maka_client import InteractionErrorReason, MakaError, Reattaching, ReattachPolicy
from maka_client._gen.maka.interaction.v1 import interaction_service_pb2 as wire
from maka_client.surface import decode_attach
from services.core.form import Action, Answer, MultiSelectField, NumberField, SingleSelectField
from surfaces.common.interactions import (
    TOKEN_ENV,
    AttachEvent,
    CloseReason,
    Delivery,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormOpened,
    FormSnapshot,
    Interactions,
    InteractionState,
    InteractionView,
    view_event,
)
from surfaces.common.wire import same
from tests.surfaces.helpers import BrokerLink, deploy_form, free_port, interaction_service

FAST = ReattachPolicy(initial_delay=0.05, max_delay=0.2)


def decode_event(response: interaction_service_pb2.AttachResponse) -> AttachEvent | None:
    """One ``AttachResponse`` as the surfaces see it."""
    event = decode_attach(same(wire.AttachResponse, response))
    return view_event(event) if event is not None else None


async def next_event(events: AsyncGenerator[AttachEvent, None], *, skip_disconnects: bool = False) -> AttachEvent:
    async with asyncio.timeout(10):
        while True:
            event = await anext(events)
            if skip_disconnects and isinstance(event, Reattaching):
                continue
            return event


async def test_list_pending_decodes_the_form_opened_through_hostlink(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1", wait_seconds=120)
        await live.link.open(deploy_form("other"), session_id="s2")
        async with Interactions.connect(live.address) as client:
            views = await client.pending(["s1"])
        assert [v.interaction_id for v in views] == [opened.interaction_id]
        view = views[0]
        assert view.pending
        assert view.session_id == "s1"
        assert view.tool_name == "deployer:deploy"
        assert view.form.requester.claimed_server == "deployer"
        assert view.form.message == "Where should build-42 go?"
        env, replicas, _, regions = view.form.fields
        assert isinstance(env, SingleSelectField)
        assert env.default == "staging"
        assert isinstance(replicas, NumberField)
        assert replicas.integer
        assert isinstance(regions, MultiSelectField)
        assert view.expires_at is not None
        assert view.created_at is not None
        assert 100 < (view.expires_at - view.created_at).total_seconds() <= 120


async def test_answer_commits_once_and_a_second_answer_gets_already_settled(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            answer = Answer(Action.ACCEPT, {"environment": "production", "replicas": 3, "regions": ("eu",)})
            first = await client.answer(opened.interaction_id, answer, submission_id="sub-1", session_id="s1")
            assert first.state is InteractionState.ANSWERED
            assert first.answer is not None
            assert first.answer.values["replicas"] == 3
            again = await client.answer(opened.interaction_id, answer, submission_id="sub-1", session_id="s1")
            assert again.state is InteractionState.ANSWERED  # same submission id: same outcome
            with pytest.raises(MakaError) as refused:
                await client.answer(opened.interaction_id, Answer(Action.DECLINE), submission_id="sub-2")
            assert refused.value.reason == InteractionErrorReason.ALREADY_SETTLED
            stored = await client.get(opened.interaction_id)
            assert stored.answer is not None
            assert stored.answer.action is Action.ACCEPT


async def test_invalid_answer_is_refused_with_violations_and_leaves_the_form_pending(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            with pytest.raises(MakaError) as refused:
                await client.answer(opened.interaction_id, Answer(Action.ACCEPT, {"replicas": 99}))
            assert refused.value.reason == InteractionErrorReason.INVALID_ANSWER
            assert any(path == "/replicas" for path, _ in refused.value.violations)
            assert (await client.get(opened.interaction_id)).pending


async def test_unknown_or_other_session_ids_are_not_found(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        opened = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            with pytest.raises(MakaError) as missing:
                await client.get("no-such-id")
            assert missing.value.reason == InteractionErrorReason.NOT_FOUND
            with pytest.raises(MakaError) as elsewhere:
                await client.answer(opened.interaction_id, Answer(Action.CANCEL), session_id="s2")
            assert elsewhere.value.reason == InteractionErrorReason.NOT_FOUND


async def test_attach_yields_snapshot_then_live_opened_answered_and_closed_events(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        first = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            events = client.attach(["s1"])
            snapshot = await next_event(events)
            assert isinstance(snapshot, FormSnapshot)
            assert [v.interaction_id for v in snapshot.pending] == [first.interaction_id]
            assert snapshot.resume_token
            second = await live.link.open(deploy_form("round 2"), session_id="s1")
            opened = await next_event(events)
            assert isinstance(opened, FormOpened)
            assert opened.interaction.interaction_id == second.interaction_id
            await client.answer(first.interaction_id, Answer(Action.DECLINE))
            answered = await next_event(events)
            assert isinstance(answered, FormAnswered)
            assert answered.interaction.interaction_id == first.interaction_id
            await live.link.close(second.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
            closed = await next_event(events)
            assert isinstance(closed, FormClosed)
            assert closed.reason is CloseReason.STOPPED
            await events.aclose()


async def test_attach_reports_a_committed_answer_recorded_lost_and_get_shows_its_delivery(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        form = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            events = client.attach(["s1"])
            assert isinstance(await next_event(events), FormSnapshot)
            committed = await client.answer(form.interaction_id, Answer(Action.DECLINE))
            assert committed.delivery is Delivery.PENDING
            assert isinstance(await next_event(events), FormAnswered)
            recorded = await live.link.deliver(
                form.interaction_id, interaction_pb2.DELIVERY_STATE_LOST, interaction_pb2.CLOSE_REASON_STOPPED
            )
            assert recorded.changed
            lost = await next_event(events)
            assert isinstance(lost, FormDeliveryRecorded)
            assert lost.interaction.delivery is Delivery.LOST
            assert lost.interaction.delivery_lost_reason is CloseReason.STOPPED
            view = await client.get(form.interaction_id)
            assert view.to_json()["delivery"] == "lost"
            assert view.to_json()["delivery_lost_reason"] == "stopped"
            await events.aclose()


async def test_attach_reconnects_after_a_service_restart_and_resumes_live(redis_url: str) -> None:
    port = free_port()
    async with interaction_service(redis_url, port=port) as live:
        kept = await live.link.open(deploy_form(), session_id="s1")
        epoch = live.link.epoch
        client = Interactions.connect(live.address, reattach=FAST)
        events = client.attach(["s1"])
        snapshot = await next_event(events)
        assert isinstance(snapshot, FormSnapshot)
        await live.server.stop()  # the stream breaks while the service is down
        dropped = await next_event(events)
        assert isinstance(dropped, Reattaching)
    try:
        # A new replica on the same address, same Redis; the broker re-attaches to the same Host epoch.
        async with interaction_service(redis_url, port=port, resume_epoch=epoch) as again:
            later = await again.link.open(deploy_form("after the outage"), session_id="s1")
            seen: list[AttachEvent] = []
            while not any(
                isinstance(e, FormOpened) and e.interaction.interaction_id == later.interaction_id for e in seen
            ):
                seen.append(await next_event(events, skip_disconnects=True))
            assert client.reconnects >= 1
            assert not any(isinstance(e, FormClosed) for e in seen), "the kept form was not closed by the outage"
            assert (await client.get(kept.interaction_id)).pending
    finally:
        await events.aclose()
        await client.close()


async def test_a_host_restart_closes_attached_forms_as_host_restarted(redis_url: str) -> None:
    async with interaction_service(redis_url) as live:
        old = await live.link.open(deploy_form(), session_id="s1")
        async with Interactions.connect(live.address) as client:
            events = client.attach(["s1"])
            assert isinstance(await next_event(events), FormSnapshot)
            async with BrokerLink(live.channel):  # a freshly started broker begins a new Host epoch
                closed = await next_event(events)
            assert isinstance(closed, FormClosed)
            assert closed.interaction.interaction_id == old.interaction_id
            assert closed.reason is CloseReason.HOST_RESTARTED
            await events.aclose()


async def test_surface_token_from_the_environment_scopes_what_the_client_sees(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": "broker-secret-1", "name": "broker", "roles": ["broker"]},
                    {"token": "surface-secret-1", "name": "tui", "roles": ["surface"], "sessions": ["s1"]},
                ]
            }
        )
    )
    async with interaction_service(redis_url, broker_token="broker-secret-1", auth_tokens_file=tokens) as live:
        mine = await live.link.open(deploy_form(), session_id="s1")
        await live.link.open(deploy_form(), session_id="s2")
        monkeypatch.setenv(TOKEN_ENV, "surface-secret-1")
        async with Interactions.connect(live.address) as client:
            assert [v.interaction_id for v in await client.pending()] == [mine.interaction_id]
        monkeypatch.delenv(TOKEN_ENV)
        async with Interactions.connect(live.address) as anonymous:
            with pytest.raises(MakaError) as refused:
                await anonymous.pending()
            assert refused.value.grpc_status_code is grpc.StatusCode.UNAUTHENTICATED
            events = anonymous.attach(["s1"])
            with pytest.raises(MakaError) as attach_refused:
                await next_event(events)
            assert attach_refused.value.grpc_status_code is grpc.StatusCode.UNAUTHENTICATED
            assert anonymous.reconnects == 0  # not retried: a reconnect cannot fix a missing token


# --- decoding Attach frames (pure) ---------------------------------------------------------------


def record(**kwargs: object) -> interaction_pb2.Interaction:
    form = form_pb2.Form(
        message="m",
        requester=form_pb2.Requester(provider_id="p", claimed_server="srv", claimed_tool="tool"),
        fields=[form_pb2.Field(name="x", label="X", string=form_pb2.StringField())],
    )
    message = interaction_pb2.Interaction(
        interaction_id="ix",
        binding=interaction_pb2.Binding(session_id="s1", tool_name="srv:tool"),
        state=interaction_pb2.INTERACTION_STATE_PENDING,
        form=form,
    )
    for key, value in kwargs.items():
        setattr(message, key, value)
    return message


def test_snapshot_and_events_decode_to_typed_values_with_resume_tokens() -> None:
    snapshot = decode_event(
        interaction_service_pb2.AttachResponse(
            snapshot=interaction_service_pb2.Snapshot(pending=[record()], resume_token="t1")
        )
    )
    assert isinstance(snapshot, FormSnapshot)
    assert snapshot.resume_token == "t1"
    assert snapshot.pending[0].form.fields[0].name == "x"
    closed_record = record(
        state=interaction_pb2.INTERACTION_STATE_CLOSED, close_reason=interaction_pb2.CLOSE_REASON_TIMED_OUT
    )
    closed = decode_event(
        interaction_service_pb2.AttachResponse(
            event=interaction_service_pb2.Event(
                event=interaction_pb2.InteractionEvent(
                    kind=interaction_pb2.EVENT_KIND_CLOSED, interaction=closed_record
                ),
                resume_token="t2",
            )
        )
    )
    assert isinstance(closed, FormClosed)
    assert closed.reason is CloseReason.TIMED_OUT
    assert closed.interaction.state is InteractionState.CLOSED
    opened = decode_event(
        interaction_service_pb2.AttachResponse(
            event=interaction_service_pb2.Event(
                event=interaction_pb2.InteractionEvent(kind=interaction_pb2.EVENT_KIND_OPENED, interaction=record()),
                resume_token="t3",
            )
        )
    )
    assert isinstance(opened, FormOpened)
    assert opened.interaction.expires_at is None  # no bounded wait recorded: no limit shown


def test_answer_outcome_frames_are_not_events() -> None:
    response = interaction_service_pb2.AttachResponse(
        answer_outcome=interaction_service_pb2.AnswerOutcome(accepted=True)
    )
    assert decode_event(response) is None


def test_a_form_breaking_the_contract_becomes_a_fieldless_stand_in_instead_of_killing_the_stream() -> None:
    broken = record()
    broken.form.fields.add(name="nokind")
    view = InteractionView.from_proto(broken)
    assert view.form.fields == ()
    assert "cannot be shown" in view.form.message
    assert view.form.requester.claimed_server == "srv"
