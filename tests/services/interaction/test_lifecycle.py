"""Host epochs, leases, bounded waits and resume: the service over real Redis on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import grpc.aio
import pytest
import redis.asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction.settings import Settings
from tests.helpers.redis_server import RedisServer
from tests.helpers.waiting import eventually
from tests.services.interaction.harness import (
    ADMIN_SURFACE_TOKEN,
    BROKER_TOKEN,
    Link,
    Service,
    Surface,
    accept,
    channel,
    start_service,
    write_tokens,
)


async def test_a_new_epoch_closes_older_forms_as_host_restarted_and_surfaces_see_it(
    service: Service, surface_channel: grpc.aio.Channel
) -> None:
    async with channel(service, BROKER_TOKEN) as old_ch, channel(service, BROKER_TOKEN) as new_ch:
        old = await Link.connect(old_ch)
        opened = await old.open("s-a", "inv-1")
        surface = await Surface.attach(surface_channel, ("s-a",))
        assert len((await surface.next("snapshot")).snapshot.pending) == 1
        new = await Link.connect(new_ch)
        assert new.epoch == old.epoch + 1
        assert new.closed_count == 1
        event = (await surface.next("event")).event.event
        assert event.kind == interaction_pb2.EVENT_KIND_CLOSED
        assert event.interaction.interaction_id == opened.interaction_id
        assert event.interaction.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
        stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
            interaction_service_pb2_grpc.InteractionServiceStub(surface_channel)
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Answer(
                interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=accept())
            )
        assert error_from_rpc(caught.value).metadata["close_reason"] == "host_restarted"
        # The old broker is fenced out: its open is rejected as a stale epoch.
        rejected = await old.open_raw("s-a", "inv-2")
        assert rejected.open_rejected.reason == interaction_pb2.ERROR_REASON_STALE_EPOCH
        await surface.close()
        await old.close()
        await new.close()


async def test_a_view_only_reconnect_in_the_same_epoch_resumes_the_link_and_reports_settled_watches(
    service: Service, surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub
) -> None:
    async with channel(service, BROKER_TOKEN) as ch1, channel(service, BROKER_TOKEN) as ch2:
        first = await Link.connect(ch1)
        opened = await first.open("s-a", "inv-1")
        await first.close()
        await surface_stub.Answer(
            interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=accept())
        )
        again = await Link.connect(ch2, resume_epoch=first.epoch, watched=(opened.interaction_id,))
        assert again.epoch == first.epoch
        settled = await again.next_settled()
        assert settled.interaction_id == opened.interaction_id
        assert settled.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        await again.close()
    async with channel(service, BROKER_TOKEN) as ch3:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await Link.connect(ch3, resume_epoch=first.epoch + 7)
        assert error_from_rpc(caught.value).reason == InteractionErrorReason.STALE_EPOCH


async def test_an_unrenewed_lease_is_reaped_as_lease_expired_and_the_broker_is_told(
    redis_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=redis_url,
        reaper_interval_seconds=0.05,
        lease_seconds=0.3,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "t.json"),
    )
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as ch:
            link = await Link.connect(ch)
            opened = await link.open("s-a", "inv-1")
            settled = await link.next_settled()
            assert settled.interaction_id == opened.interaction_id
            assert settled.close_reason == interaction_pb2.CLOSE_REASON_LEASE_EXPIRED
            await link.close()
    finally:
        await service.running.stop()


async def test_heartbeats_keep_a_lease_alive_and_the_bounded_wait_still_times_it_out(
    redis_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=redis_url,
        reaper_interval_seconds=0.05,
        lease_seconds=5,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "t.json"),
    )
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as ch:
            link = await Link.connect(ch)
            opened = await link.open("s-a", "inv-1", wait=0.4)
            ack = await link.request(
                interaction_service_pb2.HostLinkRequest(heartbeat=interaction_service_pb2.Heartbeat())
            )
            assert ack.heartbeat_ack.renewed == 1
            settled = await link.next_settled()
            assert settled.interaction_id == opened.interaction_id
            assert settled.close_reason == interaction_pb2.CLOSE_REASON_TIMED_OUT
            await link.close()
    finally:
        await service.running.stop()


async def test_reconnecting_attach_with_the_last_token_loses_no_event(
    service: Service, broker_channel: grpc.aio.Channel
) -> None:
    link = await Link.connect(broker_channel)
    first = await link.open("s-a", "inv-1")
    async with channel(service, ADMIN_SURFACE_TOKEN) as ch:
        surface = await Surface.attach(ch, ("s-a",))
        await surface.next("snapshot")
        token = surface.token
        await surface.close()
    # While the surface is away: one answered, one more opened.
    async with channel(service, ADMIN_SURFACE_TOKEN) as ch:
        stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
            interaction_service_pb2_grpc.InteractionServiceStub(ch)
        )
        await stub.Answer(interaction_service_pb2.AnswerRequest(interaction_id=first.interaction_id, answer=accept()))
    second = await link.open("s-a", "inv-2")
    async with channel(service, ADMIN_SURFACE_TOKEN) as ch:
        resumed = await Surface.attach(ch, ("s-a",), token=token)
        events = await resumed.events(2)
        assert [(e.kind, e.interaction.interaction_id) for e in events] == [
            (interaction_pb2.EVENT_KIND_ANSWERED, first.interaction_id),
            (interaction_pb2.EVENT_KIND_OPENED, second.interaction_id),
        ]
        assert resumed.frames.empty() or (await resumed.next()).WhichOneof("frame") != "snapshot"
        await resumed.close()
        garbage = await Surface.attach(ch, ("s-a",), token="not-a-token")
        snapshot = (await garbage.next("snapshot")).snapshot
        assert [i.interaction_id for i in snapshot.pending] == [second.interaction_id]
        await garbage.close()
    await link.close()


@pytest.mark.faults
@pytest.mark.slow
async def test_redis_killed_and_restarted_with_aof_keeps_the_committed_answer_and_health_recovers(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True)
    server.start()
    settings = Settings(
        redis_url=server.url,
        reaper_interval_seconds=0.05,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "t.json"),
    )
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as bch, channel(service, ADMIN_SURFACE_TOKEN) as sch:
            link = await Link.connect(bch)
            opened = await link.open("s-a", "inv-1")
            stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
                interaction_service_pb2_grpc.InteractionServiceStub(sch)
            )
            await stub.Answer(
                interaction_service_pb2.AnswerRequest(interaction_id=opened.interaction_id, answer=accept("prod"))
            )
            health = health_pb2_grpc.HealthStub(sch)
            name = "maka.interaction.v1.InteractionService"

            async def status(service_name: str = name) -> int:
                reply = await health.Check(  # type: ignore[attr-defined]
                    health_pb2.HealthCheckRequest(service=service_name)
                )
                return int(reply.status)

            server.stop(kill=True)
            await eventually(lambda: not service.app.store_ok, what="store probe fails", timeout=10)
            assert await status() == health_pb2.HealthCheckResponse.NOT_SERVING  # readiness
            assert await status("") == health_pb2.HealthCheckResponse.SERVING  # liveness: the process is fine
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetInteraction(
                    interaction_service_pb2.GetInteractionRequest(interaction_id=opened.interaction_id)
                )
            detail = error_from_rpc(caught.value)
            assert (detail.code, detail.reason) == (
                grpc.StatusCode.UNAVAILABLE,
                InteractionErrorReason.STORE_UNAVAILABLE,
            )
            server.start()
            await eventually(lambda: service.app.store_ok, what="store probe recovers", timeout=10)
            assert await status() == health_pb2.HealthCheckResponse.SERVING
            got = await stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=opened.interaction_id)
            )
            assert got.interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED
            assert got.interaction.answer.values["target"].string_value == "prod"
            client = redis.asyncio.Redis.from_url(server.url)
            assert await client.exists(f"maka:{{local}}:ix:{opened.interaction_id}") == 1
            await client.aclose()
            await link.close()
    finally:
        await service.running.stop()
        server.stop()


async def test_a_new_epoch_is_answered_at_the_fence_and_surfaces_then_see_all_1200_older_forms_close(
    service: Service,
    surface_channel: grpc.aio.Channel,
    surface_stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    authority = service.app.authority
    closes_may_run = asyncio.Event()
    original = authority.close_older_epochs

    async def held() -> int:
        await closes_may_run.wait()
        return await original()

    monkeypatch.setattr(authority, "close_older_epochs", held)
    async with channel(service, BROKER_TOKEN) as old_ch, channel(service, BROKER_TOKEN) as new_ch:
        old = await Link.connect(old_ch)
        opened = await old.open_many(1200, sessions=5)
        surface = await Surface.attach(surface_channel, ())
        assert len((await surface.next("snapshot")).snapshot.pending) == 1200

        new = await Link.connect(new_ch)  # answered while every close is still held back
        assert (new.epoch, new.closed_count) == (old.epoch + 1, 1200)
        assert len((await surface_stub.ListPending(interaction_service_pb2.ListPendingRequest())).pending) == 1200
        fresh = await new.open("s-0", "inv-new")  # the new epoch works at once
        rejected = await old.open_raw("s-0", "inv-late")
        assert rejected.open_rejected.reason == interaction_pb2.ERROR_REASON_STALE_EPOCH

        closes_may_run.set()
        events = await surface.events(1 + 1200)  # the new epoch's opened event, then every closure
        closed = {e.interaction.interaction_id: e for e in events if e.kind == interaction_pb2.EVENT_KIND_CLOSED}
        assert set(closed) == set(opened)
        assert {e.interaction.close_reason for e in closed.values()} == {interaction_pb2.CLOSE_REASON_HOST_RESTARTED}
        assert {e.interaction.binding.session_id for e in closed.values()} == {f"s-{n}" for n in range(5)}
        listed = await surface_stub.ListPending(interaction_service_pb2.ListPendingRequest())
        assert [i.interaction_id for i in listed.pending] == [fresh.interaction_id]
        await surface.close()
        await old.close()
        await new.close()


async def test_forms_a_new_epoch_watches_are_closed_and_reported_before_the_reply(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = asyncio.Event()
    monkeypatch.setattr(service.app.authority, "close_older_epochs", never.wait)  # the background pass stalls
    async with channel(service, BROKER_TOKEN) as old_ch, channel(service, BROKER_TOKEN) as new_ch:
        old = await Link.connect(old_ch)
        watched = await old.open("s-a", "inv-1")
        other = await old.open("s-a", "inv-2")
        new = await Link.connect(new_ch, watched=(watched.interaction_id,))
        reported = await new.next_settled()
        assert reported.interaction_id == watched.interaction_id
        assert reported.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
        stored = await service.app.authority.store.get(other.interaction_id)
        assert stored is not None
        assert stored.state == "pending"  # not watched: left to the (stalled) background pass
        await old.close()
        await new.close()
