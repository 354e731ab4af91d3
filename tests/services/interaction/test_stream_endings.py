"""Attach streams the server ends on purpose carry a status with a reason a surface can act on (real grpc.aio
server, real redis-server): a subscriber overflow ends UNAVAILABLE / SUBSCRIBER_OVERFLOW (resume with the last
token), a drain at shutdown ends UNAVAILABLE / SHUTTING_DOWN (reconnect elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc
import pytest
import redis.asyncio

from maka.interaction.v1 import interaction_pb2
from maka_client import InteractionErrorReason as ClientInteractionErrorReason
from maka_client import ReattachPolicy
from maka_client.events import Reattaching
from maka_client.surface import FormOpened, FormSnapshot, SurfaceClient
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction.settings import Settings
from tests.services.interaction.harness import (
    ADMIN_SURFACE_TOKEN,
    BROKER_TOKEN,
    FRAME_TIMEOUT,
    Link,
    Surface,
    channel,
    start_service,
)

BURST = 20
"""Entries added to the session's Stream in one transaction: one follower read offers them all at once."""
LATE_STREAMS = 4
"""Surfaces attached while the service shuts down (each one's cleanup races the close)."""


async def test_an_attach_stream_that_fell_behind_ends_unavailable_subscriber_overflow_and_resumes_losing_nothing(
    settings: Settings, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = await start_service(settings.model_copy(update={"subscriber_queue_size": 8}))
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with channel(service, BROKER_TOKEN) as broker, channel(service, ADMIN_SURFACE_TOKEN) as surfaces:
            surface = await Surface.attach(surfaces, ("s-a",))
            await surface.next("snapshot")
            link = await Link.connect(broker)
            opened = await link.open("s-a", "inv-1")
            assert (await surface.events(1))[0].interaction.interaction_id == opened.interaction_id
            token = surface.token
            [key] = await client.keys("maka:*:session:s-a:events")
            entries: Any = await client.xrevrange(key, count=1)
            fields: dict[Any, Any] = entries[0][1]
            async with client.pipeline(transaction=True) as pipe:  # one atomic burst past the queue of 8
                for _ in range(BURST):
                    pipe.xadd(key, fields)
                await pipe.execute()
            with caplog.at_level(logging.INFO, logger="maka.interaction.servicer"):
                await surface.ended()
            assert surface.error is not None
            detail = error_from_rpc(surface.error)
            assert (detail.code, detail.reason) == (
                grpc.StatusCode.UNAVAILABLE,
                InteractionErrorReason.SUBSCRIBER_OVERFLOW,
            )
            assert "grpc-retry-pushback-ms" not in dict(surface.error.trailing_metadata() or ())
            ended = [r for r in caplog.records if r.getMessage() == "stream_ended"]
            assert [(r.__dict__["method"], r.__dict__["reason"]) for r in ended] == [("Attach", "SUBSCRIBER_OVERFLOW")]
            got = surface.frames.qsize()
            assert got <= 8, "the stream ended after what the dropped subscriber had queued"

            received = [(await surface.next("event")).event for _ in range(got)]
            token = received[-1].resume_token if received else token
            ids = [e.resume_token for e in received]
            for _ in range(BURST):  # resume with the last token until the burst is in (a resume may overflow too)
                if len(ids) == BURST:
                    break
                resumed = await Surface.attach(surfaces, ("s-a",), token=ids[-1] if ids else token)
                while len(ids) < BURST and (frame := await resumed.next_or_end()) is not None:
                    assert frame.event.event.kind == interaction_pb2.EVENT_KIND_OPENED
                    ids.append(frame.event.resume_token)
                if resumed.error is not None:
                    assert error_from_rpc(resumed.error).reason == InteractionErrorReason.SUBSCRIBER_OVERFLOW
                await resumed.close()
            assert len(ids) == len(set(ids)) == BURST, "every entry of the burst arrived once across the resumes"
            await surface.close()
            await link.close()
    finally:
        await client.aclose()
        await service.running.stop()


async def test_a_drain_at_shutdown_ends_attach_streams_unavailable_shutting_down_without_pushback(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as broker, channel(service, ADMIN_SURFACE_TOKEN) as surfaces:
            surface = await Surface.attach(surfaces, ("s-a",))
            await surface.next("snapshot")
            link = await Link.connect(broker)
            await link.open("s-a", "inv-1")
            await surface.events(1)  # the stream is live (its follower runs), so the drain ends it
            await link.close()
            with caplog.at_level(logging.INFO, logger="maka.interaction.servicer"):
                await service.app.servicer.drain(5.0)
                await surface.ended()
            assert surface.error is not None
            detail = error_from_rpc(surface.error)
            assert (detail.code, detail.reason) == (grpc.StatusCode.UNAVAILABLE, InteractionErrorReason.SHUTTING_DOWN)
            trailers = dict(surface.error.trailing_metadata() or ())
            assert "grpc-retry-pushback-ms" not in trailers, "a draining replica's end may be retried elsewhere"
            ended = [r for r in caplog.records if r.getMessage() == "stream_ended"]
            assert [(r.__dict__["method"], r.__dict__["reason"]) for r in ended] == [("Attach", "SHUTTING_DOWN")]
            await surface.close()
    finally:
        await service.running.stop()


async def test_the_surface_client_reattaches_on_shutting_down_with_the_reason_and_resumes_with_its_token(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    service = await start_service(settings)
    surface = SurfaceClient(
        service.target, token=ADMIN_SURFACE_TOKEN, reattach=ReattachPolicy(initial_delay=0.01, max_delay=0.05)
    )
    try:
        async with channel(service, BROKER_TOKEN) as broker:
            link = await Link.connect(broker)
            feed = surface.attach(["s-a"])
            async with contextlib.aclosing(feed), asyncio.timeout(FRAME_TIMEOUT):
                assert isinstance(await anext(feed), FormSnapshot)
                first = await link.open("s-a", "inv-1")
                opened = await anext(feed)
                assert isinstance(opened, FormOpened)
                assert opened.form.interaction_id == first.interaction_id
                with caplog.at_level(logging.INFO, logger="maka_client.surface"):
                    drain = asyncio.create_task(service.app.servicer.drain(5.0))
                    reattaching = await anext(feed)
                    await drain
                assert isinstance(reattaching, Reattaching)
                assert reattaching.code == "UNAVAILABLE"
                assert reattaching.error is not None
                assert reattaching.error.reason == ClientInteractionErrorReason.SHUTTING_DOWN
                [logged] = [r for r in caplog.records if r.getMessage() == "attach_reconnecting"]
                assert logged.__dict__["reason"] == "SHUTTING_DOWN"
                await link.close()  # the drain ended the broker's link too: it re-links to its epoch
                link = await Link.connect(broker, resume_epoch=link.epoch)
                second = await link.open("s-a", "inv-2")  # resumed with its token: the next change, no snapshot
                resumed = await anext(feed)
                assert isinstance(resumed, FormOpened)
                assert resumed.form.interaction_id == second.interaction_id
            await link.close()
    finally:
        await surface.close()
        await service.running.stop()


async def test_a_stopped_service_has_closed_every_redis_connection_even_those_of_a_stream_cancelled_at_shutdown(
    settings: Settings,
) -> None:
    """A surface that reconnects while the service shuts down (after the drain, within the grace period) reads
    its snapshot through a pool already closed (redis-py opens new connections for it) and is cancelled by
    ``server.stop``, which returns before its handler unwound. A closing replica writes no presence entry for
    such a stream (it would only expire), and once the app closed no connection of the service is left open
    (before: one leaked, and its garbage collection failed a later test)."""
    service = await start_service(settings)
    surfaces_key = service.app.authority.store.keys.surfaces()
    inspector = redis.asyncio.Redis.from_url(settings.redis_url)
    try:
        async with channel(service, ADMIN_SURFACE_TOKEN) as surfaces:
            await service.app.stop()  # drained (nothing attached), Redis closed; the server still accepts streams
            late = [await Surface.attach(surfaces, ("s-a",)) for _ in range(LATE_STREAMS)]
            for surface in late:
                await surface.next("snapshot")
            assert await inspector.hlen(surfaces_key) == 0, "a closing replica writes no presence entry"
            await service.running.server.stop(0)  # cancels the late streams
            await service.app.close()
            assert await inspector.hlen(surfaces_key) == 0
            clients = await inspector.client_list()
            assert [c for c in clients if c["name"] == "maka-interaction"] == []
            for surface in late:
                await surface.close()
    finally:
        await inspector.aclose()


def test_every_rpc_method_of_the_servicer_counts_itself_as_a_handler_on_its_first_line() -> None:
    """``InteractionApp.close`` waits for the handlers ``_handling`` counted: a method that forgets it could
    use Redis after it is closed (the leak the test above catches)."""
    import ast
    import inspect
    import textwrap

    from maka.interaction.v1 import interaction_service_pb2
    from services.interaction.servicer import InteractionServicer

    methods = interaction_service_pb2.DESCRIPTOR.services_by_name["InteractionService"].methods_by_name
    missing = []
    for name in methods:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(InteractionServicer, name))))
        function = tree.body[0]
        assert isinstance(function, ast.AsyncFunctionDef)
        body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        first = ast.unparse(body[0]) if body else ""
        if first != "self._handling()":
            missing.append(name)
    assert missing == []
