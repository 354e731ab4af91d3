"""The Interaction tier at team scale, through real processes (docs/design.md#interaction-tier).

One ``python -m services.interaction.main`` replica serving 50 Hosts over a private ``redis-server``;
this test process plays 2,000 surfaces (Attach) and 200 brokers (HostLink).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
import redis.asyncio

from bench.fanout import host_ids, replica_env, run_fanout, write_tokens
from bench.processes import InteractionProcess
from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import bearer_metadata
from tests.helpers.redis_server import RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HOSTS = host_ids(50)
POOL_SIZE = 16
FOLLOWERS = 2


@pytest.fixture(scope="module")
def redis_tcp() -> Iterator[RedisServer]:
    """A private redis-server for this module (unix socket; CLIENT LIST sees every connection)."""
    with tempfile.TemporaryDirectory(prefix="maka-scale-", dir="/tmp") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
async def replica(
    redis_tcp: RedisServer, tmp_path: Path
) -> AsyncIterator[tuple[InteractionProcess, str, dict[str, str]]]:
    """One Interaction replica serving :data:`HOSTS` with a 16-connection Redis pool (over a flushed Redis)."""
    flush = redis.asyncio.Redis.from_url(redis_tcp.url)
    await flush.flushall()
    await flush.aclose()
    tokens = write_tokens(tmp_path / "tokens.json", HOSTS)
    process = InteractionProcess(
        tmp_path / "replica",
        replica_env(redis_tcp.url, HOSTS, tmp_path / "tokens.json", pool_size=POOL_SIZE, followers=FOLLOWERS),
    )
    port = await process.start()
    try:
        yield process, f"127.0.0.1:{port}", tokens
    finally:
        process.stop()


async def test_two_thousand_attach_streams_over_fifty_hosts_and_two_hundred_host_links_share_one_bounded_pool(
    replica: tuple[InteractionProcess, str, dict[str, str]], redis_tcp: RedisServer
) -> None:
    process, target, tokens = replica
    assert process.process is not None
    result = await run_fanout(
        target,
        redis_tcp.url,
        tokens,
        HOSTS,
        sessions_per_host=40,
        links_per_host=4,
        pool_size=POOL_SIZE,
        followers=FOLLOWERS,
        pid=process.process.pid,
    )
    assert result.subscribers == 2000
    assert result.links == 200
    assert result.snapshots == 2000, "every subscriber gets its snapshot"
    assert result.subscriber_ends == {}, "no stream of the burst is cancelled by gRPC before its handler runs"
    assert result.deliveries == 2000, "every subscriber gets its form's live opened event"
    assert result.settlements_received == result.settlements_expected == 200, "every HostLink of a Host sees it"
    assert result.answered_events == 50
    assert result.health_samples > 0
    assert result.health_not_serving == 0
    assert result.connection_samples > 0
    assert 0 < result.max_redis_connections <= POOL_SIZE, result.max_redis_connections


async def test_a_token_touches_only_the_hosts_it_names_and_a_refusal_reveals_nothing(
    replica: tuple[InteractionProcess, str, dict[str, str]],
) -> None:
    _process, target, tokens = replica
    async with grpc.aio.insecure_channel(target) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)

        async def hello(token: str, host: str) -> grpc.aio.AioRpcError:
            call = stub.HostLink(
                iter(
                    [
                        interaction_service_pb2.HostLinkRequest(
                            hello=interaction_service_pb2.Hello(begin_new_epoch=True, host_id=host)
                        )
                    ]
                ),
                metadata=bearer_metadata(token),
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in call:
                    pass
            return refused.value

        other_group = tokens[HOSTS[-1]]  # names only the second half of the Hosts
        foreign = await hello(other_group, HOSTS[0])
        unknown = await hello(other_group, "no-such-host")
        assert foreign.code() == unknown.code() == grpc.StatusCode.PERMISSION_DENIED
        assert foreign.details() == unknown.details(), "a foreign Host and an unknown one look the same"
        assert HOSTS[0] not in (foreign.details() or "")

        scoped = bearer_metadata(tokens["surface-h00"])
        listed = await stub.ListPending(
            interaction_service_pb2.ListPendingRequest(), metadata=scoped
        )  # its only Host by default
        assert list(listed.pending) == []
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await stub.ListPending(interaction_service_pb2.ListPendingRequest(host_id=HOSTS[1]), metadata=scoped)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as ambiguous:
            await stub.ListPending(
                interaction_service_pb2.ListPendingRequest(), metadata=bearer_metadata(tokens["surface"])
            )
        assert ambiguous.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as not_yours:
            await stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(host_id=HOSTS[1], interaction_id="ix_x"), metadata=scoped
            )
        assert not_yours.value.code() == grpc.StatusCode.PERMISSION_DENIED
