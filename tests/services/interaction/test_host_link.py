"""``HostLinkSession`` (services/interaction/host_link.py) through the real gRPC server on loopback and the real
redis-server: the hello, and one test per frame kind it applies."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from tests.services.interaction.harness import FRAME_TIMEOUT, Link, accept


def _request(**frame: object) -> interaction_service_pb2.HostLinkRequest:
    return interaction_service_pb2.HostLinkRequest(**frame)  # type: ignore[arg-type]


async def _refused(channel: grpc.aio.Channel, *frames: interaction_service_pb2.HostLinkRequest) -> grpc.aio.AioRpcError:
    """Send ``frames`` on a fresh HostLink and return the status that ended it (read past any replies)."""
    call = interaction_service_pb2_grpc.InteractionServiceStub(channel).HostLink()
    for frame in frames:
        await call.write(frame)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _read_until_ended(call)
    call.cancel()
    return caught.value


async def _read_until_ended(
    call: grpc.aio.StreamStreamCall[interaction_service_pb2.HostLinkRequest, interaction_service_pb2.HostLinkResponse],
) -> None:
    async with asyncio.timeout(FRAME_TIMEOUT):
        while True:
            await call.read()


async def test_a_new_epoch_hello_replies_with_the_next_epoch_and_counts_the_older_forms_it_closes(
    broker_channel: grpc.aio.Channel,
) -> None:
    old = await Link.connect(broker_channel)
    await old.open("s-a", "inv-1")
    await old.open("s-b", "inv-2")
    new = await Link.connect(broker_channel)
    assert new.epoch == old.epoch + 1
    assert new.closed_count == 2
    await old.close()
    await new.close()


async def test_a_resumed_hello_pushes_each_watched_settlement_once_and_then_follows_new_ones(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    first = await Link.connect(broker_channel)
    answered = await first.open("s-a", "inv-1")
    await first.close()
    await surface_stub.Answer(
        interaction_service_pb2.AnswerRequest(interaction_id=answered.interaction_id, answer=accept())
    )
    again = await Link.connect(broker_channel, resume_epoch=first.epoch, watched=(answered.interaction_id,))
    assert again.epoch == first.epoch
    pushed = await again.next_settled()
    assert (pushed.interaction_id, pushed.state) == (
        answered.interaction_id,
        interaction_pb2.INTERACTION_STATE_ANSWERED,
    )
    later = await again.open("s-a", "inv-2")
    closing = interaction_service_pb2.CloseInteraction(
        interaction_id=later.interaction_id, reason=interaction_pb2.CLOSE_REASON_STOPPED
    )
    await again.request(_request(close=closing))
    # The watched settlement is not pushed a second time: the next push is the close.
    assert (await again.next_settled()).interaction_id == later.interaction_id
    await again.close()


async def test_a_hello_with_neither_a_new_nor_a_resumed_epoch_ends_the_link_invalid_request(
    broker_channel: grpc.aio.Channel,
) -> None:
    error = await _refused(broker_channel, _request(hello=interaction_service_pb2.Hello()))
    detail = error_from_rpc(error)
    assert (detail.code, detail.reason) == (grpc.StatusCode.INVALID_ARGUMENT, InteractionErrorReason.INVALID_REQUEST)


async def test_a_second_hello_after_the_first_ends_the_link_invalid_request(broker_channel: grpc.aio.Channel) -> None:
    hello = _request(hello=interaction_service_pb2.Hello(begin_new_epoch=True))
    error = await _refused(broker_channel, hello, hello)
    detail = error_from_rpc(error)
    assert (detail.code, detail.reason) == (grpc.StatusCode.INVALID_ARGUMENT, InteractionErrorReason.INVALID_REQUEST)


async def test_closing_by_invocation_id_closes_its_pending_form_and_names_it(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    reply = await link.request(
        _request(
            close=interaction_service_pb2.CloseInteraction(
                invocation_id="inv-1", reason=interaction_pb2.CLOSE_REASON_STOPPED
            )
        )
    )
    closed = reply.closed
    assert (closed.invocation_id, closed.interaction_id, closed.changed) == ("inv-1", opened.interaction_id, True)
    assert closed.interaction.close_reason == interaction_pb2.CLOSE_REASON_STOPPED
    assert (await link.next_settled()).interaction_id == opened.interaction_id
    await link.close()


async def test_closing_by_interaction_id_changes_the_form_once(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    close = _request(
        close=interaction_service_pb2.CloseInteraction(
            interaction_id=opened.interaction_id, reason=interaction_pb2.CLOSE_REASON_TIMED_OUT
        )
    )
    first = (await link.request(close)).closed
    second = (await link.request(close)).closed
    assert (first.interaction_id, first.changed) == (opened.interaction_id, True)
    assert (second.interaction_id, second.changed) == (opened.interaction_id, False)
    assert second.interaction.state == interaction_pb2.INTERACTION_STATE_CLOSED
    await link.close()


async def test_a_delivery_report_of_a_pushed_answer_is_recorded_once(
    broker_channel: grpc.aio.Channel, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    link = await Link.connect(broker_channel)
    opened = await link.open("s-a", "inv-1")
    await surface_stub.Answer(
        interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=accept())
    )
    pushed = await link.next_settled()
    assert pushed.delivery == interaction_pb2.DELIVERY_STATE_PENDING
    report = _request(
        delivery=interaction_service_pb2.ReportDelivery(
            interaction_id=opened.interaction_id, delivery=interaction_pb2.DELIVERY_STATE_DELIVERED
        )
    )
    first = (await link.request(report)).delivery_recorded
    second = (await link.request(report)).delivery_recorded
    assert (first.interaction_id, first.changed) == (opened.interaction_id, True)
    assert first.interaction.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED
    assert second.changed is False
    await link.close()


async def test_a_heartbeat_renews_the_epochs_leases_and_acks_the_new_deadline(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    await link.open("s-a", "inv-1")
    await link.open("s-b", "inv-2")
    ack = (await link.request(_request(heartbeat=interaction_service_pb2.Heartbeat()))).heartbeat_ack
    assert ack.renewed == 2
    assert ack.lease_deadline.ToMilliseconds() > 0
    await link.close()


async def test_a_refused_open_is_a_frame_and_the_link_keeps_serving(broker_channel: grpc.aio.Channel) -> None:
    link = await Link.connect(broker_channel)
    await link.open("s-a", "inv-1")
    rejected = (await link.open_raw("s-a", "inv-1")).open_rejected
    assert (rejected.request_ref, rejected.reason) == ("ref-inv-1", interaction_pb2.ERROR_REASON_ALREADY_PENDING)
    assert (await link.open("s-a", "inv-2")).binding.invocation_id == "inv-2"
    await link.close()


async def test_the_link_ends_once_the_broker_half_closes_and_its_opens_are_answered(
    broker_channel: grpc.aio.Channel,
) -> None:
    link = await Link.connect(broker_channel)
    for n in range(5):
        await link.send_open(f"ref-{n}", "s-a", f"inv-{n}")
    await link.call.done_writing()
    replies = await link.replies_by_ref(5)
    assert {reply.WhichOneof("frame") for reply in replies.values()} == {"opened"}
    async with asyncio.timeout(FRAME_TIMEOUT):
        assert await link.call.code() == grpc.StatusCode.OK
    await link.close()
