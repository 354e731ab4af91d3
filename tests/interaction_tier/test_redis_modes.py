"""The Interaction service over a real Redis Cluster and a real Sentinel setup, with a failover mid-form
(docs/design.md#redis-deployment-modes and "Durable fences").

Each topology is started once per module by :mod:`tests.helpers.redis_server` (real ``redis-server``
processes on ephemeral loopback ports); the service runs in-process over redis-py's own cluster /
sentinel clients. A form round: a broker's HostLink begins the epoch (fenced with ``WAIT 1``), opens
two forms, a surface sees them and answers the first (committed and fenced), then the master of the
Host's slot fails over; the committed answer is still there, a second answer to it loses, the other
form is answered on the new master, and the broker gets both settlements.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio
import hiredis
import pytest
import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelManagedConnection

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction import command_packing
from services.interaction.keys import Keys
from services.interaction.redis_client import close_client, redis_client
from services.interaction.settings import RedisMode, Settings
from tests.helpers.redis_server import RedisClusterServers, RedisSentinelServers
from tests.helpers.stack import answer, call_tool, result_text, running_stack, wait_for_pending
from tests.helpers.waiting import eventually, none_while_unavailable
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

T = TypeVar("T")
pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServers]:
    with tempfile.TemporaryDirectory(prefix="maka-cluster-", dir="/tmp") as tmp:
        servers = RedisClusterServers(Path(tmp))
        try:
            servers.start()
            yield servers
        finally:
            servers.stop()


@pytest.fixture(scope="module")
def sentinel() -> Iterator[RedisSentinelServers]:
    with tempfile.TemporaryDirectory(prefix="maka-sentinel-", dir="/tmp") as tmp:
        servers = RedisSentinelServers(Path(tmp))
        try:
            servers.start()
            yield servers
        finally:
            servers.stop()


def _sentinel_settings(sentinel: RedisSentinelServers, tmp_path: Path, **overrides: Any) -> Settings:
    """The Interaction service over the Sentinel setup (``WAIT 1`` fences), with short reaper and grace times."""
    return Settings(
        redis_url=sentinel.url,
        redis_mode=RedisMode.SENTINEL,
        redis_sentinel_service=sentinel.SERVICE,
        reaper_interval_seconds=0.2,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
        **overrides,
    )


async def _answer(
    stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub, request: interaction_service_pb2.AnswerRequest
) -> interaction_pb2.Interaction:
    async def once() -> interaction_pb2.Interaction:
        return (await stub.Answer(request, timeout=10)).interaction

    return await eventually(none_while_unavailable(once), timeout=60, interval=0.2, what="the answer commits")


async def _form_round_with_failover(service: Service, failover: object) -> None:
    async with channel(service, BROKER_TOKEN) as bch, channel(service, ADMIN_SURFACE_TOKEN) as sch:
        link = await Link.connect(bch)
        assert link.epoch >= 1
        surface = await Surface.attach(sch, ("s-a",))
        await surface.next("snapshot")
        first = await link.open("s-a", "inv-1")
        second = await link.open("s-a", "inv-2")
        seen = {e.interaction.interaction_id for e in await surface.events(2)}
        assert seen == {first.interaction_id, second.interaction_id}
        stub = interaction_service_pb2_grpc.InteractionServiceStub(sch)
        committed = await _answer(
            stub,
            interaction_service_pb2.AnswerRequest(
                interaction_id=first.interaction_id, submission_id="sub-1", answer=accept("prod")
            ),
        )
        assert committed.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert (await link.next_settled()).interaction_id == first.interaction_id

        failover()  # type: ignore[operator]

        async def read_first() -> interaction_pb2.Interaction:
            got = await stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=first.interaction_id), timeout=10
            )
            return got.interaction

        after = await eventually(
            none_while_unavailable(read_first), timeout=60, interval=0.2, what="the record readable on the new master"
        )
        assert after.state == interaction_pb2.INTERACTION_STATE_ANSWERED, "a committed answer survives the failover"
        assert after.answer.values["target"].string_value == "prod"
        with pytest.raises(grpc.aio.AioRpcError) as lost:
            await _answer(
                stub,
                interaction_service_pb2.AnswerRequest(
                    interaction_id=first.interaction_id, submission_id="sub-2", answer=accept("dev")
                ),
            )
        assert error_from_rpc(lost.value).reason == InteractionErrorReason.ALREADY_SETTLED, "a second answer never wins"
        other = await _answer(
            stub,
            interaction_service_pb2.AnswerRequest(
                interaction_id=second.interaction_id, submission_id="sub-3", answer=accept("qa")
            ),
        )
        assert other.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert (await link.next_settled()).interaction_id == second.interaction_id, "the broker hears it"
        answered = [e for e in await surface.events(2) if e.kind == interaction_pb2.EVENT_KIND_ANSWERED]
        assert {e.interaction.interaction_id for e in answered} == {first.interaction_id, second.interaction_id}
        history = await stub.ListHistory(interaction_service_pb2.ListHistoryRequest(session_ids=["s-a"]), timeout=10)
        listed = [e.interaction_id for e in history.entries]  # the Host's history keys share its slot
        assert listed[:2] == [second.interaction_id, first.interaction_id]
        await surface.close()
        await link.close()


async def test_a_form_round_over_redis_cluster_survives_a_cluster_failover_mid_form(
    cluster: RedisClusterServers, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=cluster.url,
        redis_mode=RedisMode.CLUSTER,
        reaper_interval_seconds=0.2,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
    )
    assert settings.wait_replicas == 1
    service = await start_service(settings)
    try:
        replica = cluster.replica_of_slot(Keys(settings.host_id).epoch())
        await _form_round_with_failover(service, lambda: cluster.failover(replica))
    finally:
        await service.running.stop()


async def test_a_form_round_over_redis_sentinel_survives_a_sentinel_failover_mid_form(
    sentinel: RedisSentinelServers, tmp_path: Path
) -> None:
    settings = _sentinel_settings(sentinel, tmp_path)
    service = await start_service(settings)
    try:
        await _form_round_with_failover(service, sentinel.failover)
    finally:
        await service.running.stop()


async def test_over_sentinel_a_broker_hears_of_an_answer_only_once_a_replica_has_it(
    sentinel: RedisSentinelServers, tmp_path: Path
) -> None:
    settings = _sentinel_settings(sentinel, tmp_path, redis_wait_timeout_ms=300)
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as bch, channel(service, ADMIN_SURFACE_TOKEN) as sch:
            link = await Link.connect(bch)
            opened = await link.open("s-a", "inv-lagging-replica")
            stub = interaction_service_pb2_grpc.InteractionServiceStub(sch)
            request = interaction_service_pb2.AnswerRequest(
                interaction_id=opened.interaction_id, submission_id="sub-lag", answer=accept("prod")
            )
            replica = sentinel.current_replica()
            replica.pause()
            try:
                with pytest.raises(grpc.aio.AioRpcError) as unreplicated:
                    await stub.Answer(request, timeout=10)
                # written on the master, acknowledged by no replica: the surface is not told it committed...
                assert unreplicated.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                # ...and the broker is not handed an answer a failover could still take back
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(1.5):
                        await link.settled.get()
            finally:
                replica.resume()
            assert (await link.next_settled()).interaction_id == opened.interaction_id
            again = await _answer(stub, request)  # the same submission id: now acknowledged
            assert again.state == interaction_pb2.INTERACTION_STATE_ANSWERED
            assert again.answer.values["target"].string_value == "prod"
            await link.close()
    finally:
        await service.running.stop()


async def test_over_sentinel_an_answer_a_failover_took_back_never_reaches_the_broker(
    sentinel: RedisSentinelServers, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _sentinel_settings(sentinel, tmp_path, redis_wait_timeout_ms=300)
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as bch, channel(service, ADMIN_SURFACE_TOKEN) as sch:
            link = await Link.connect(bch)
            opened = await link.open("s-a", "inv-rolled-back")
            stub = interaction_service_pb2_grpc.InteractionServiceStub(sch)
            replica = sentinel.current_replica()
            replica.pause()
            try:
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Answer(
                        interaction_service_pb2.AnswerRequest(
                            interaction_id=opened.interaction_id, submission_id="sub-gone", answer=accept("prod")
                        ),
                        timeout=10,
                    )
                # What a promoted replica that never got the answer holds: the form still pending.
                with redis.Redis(port=sentinel.master_address(), socket_timeout=5) as master:
                    master.hset(
                        Keys(settings.host_id).record(opened.interaction_id),
                        mapping={"state": "pending", "submission": "", "pb": opened.SerializeToString()},
                    )
            finally:
                replica.resume()
            await eventually(
                lambda: any(r.getMessage() == "settlement_rolled_back" for r in caplog.records),
                timeout=30,
                what="the HostLink drops the settlement it read",
            )
            assert link.settled.empty(), "the broker never hears of an answer that is gone"
            got = await stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=opened.interaction_id), timeout=10
            )
            assert got.interaction.state == interaction_pb2.INTERACTION_STATE_PENDING
            await link.close()
    finally:
        await service.running.stop()


# A script call as the store makes them: a script, keys and arguments of each type the store passes.
SCRIPT = "return {KEYS[1], ARGV[1], ARGV[2], ARGV[3]}"


def _packed_by_hiredis(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every command hiredis packs from now on (the real packer still packs it)."""
    seen: list[tuple[Any, ...]] = []
    real = hiredis.pack_command

    def spy(args: tuple[Any, ...]) -> bytes:
        seen.append(args)
        wire: bytes = real(args)
        return wire

    monkeypatch.setattr(hiredis, "pack_command", spy)
    return seen


async def test_over_sentinel_the_services_client_packs_its_commands_with_hiredis(
    sentinel: RedisSentinelServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packed = _packed_by_hiredis(monkeypatch)
    client = redis_client(_sentinel_settings(sentinel, tmp_path))
    assert isinstance(client, redis.asyncio.Redis)
    try:
        reply = await client.eval(SCRIPT, 1, "packing:{sentinel}", "värde ✓", b"\x00\xff", 42)
        assert reply == [b"packing:{sentinel}", "värde ✓".encode(), b"\x00\xff", b"42"]
        assert ("EVAL", SCRIPT, 1, "packing:{sentinel}", "värde ✓", b"\x00\xff", 42) in packed
        # the pool's connections are still Sentinel-managed: they ask the sentinels for the master after a failover
        opened = client.connection_pool.connection_class
        assert issubclass(opened, SentinelManagedConnection)
        assert issubclass(opened, command_packing._HiredisPacking)
    finally:
        await close_client(client)


async def test_over_cluster_every_node_the_client_discovers_packs_its_commands_with_hiredis(
    cluster: RedisClusterServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packed = _packed_by_hiredis(monkeypatch)
    settings = Settings(
        redis_url=cluster.url, redis_mode=RedisMode.CLUSTER, auth_tokens_file=write_tokens(tmp_path / "tokens.json")
    )
    client = redis_client(settings)
    assert isinstance(client, RedisCluster)
    seeds = set(cluster.ports[:3])

    async def round_trip(key: str) -> None:
        before = len(packed)
        reply = await client.eval(SCRIPT, 1, key, "värde ✓", b"\x00\xff", 42)
        assert reply == [key.encode(), "värde ✓".encode(), b"\x00\xff", b"42"]
        # packed before the connection's own handshake (CLIENT SETNAME ...) when it is a new one
        assert ("EVAL", SCRIPT, 1, key, "värde ✓", b"\x00\xff", 42) in packed[before:]

    try:
        keys = [f"packing:{{{tag}}}" for tag in ("a", "b", "c", "d", "e", "f")]
        for key in keys:
            await round_trip(key)
        serving = [client.get_node_from_key(key) for key in keys]
        assert len({node.name for node in serving if node is not None}) == 3, "the keys spread over every master"
        if all(int(node.port) in seeds for node in client.get_nodes()):
            # every master is a seed: fail one over to its replica, a node the client was never given; it
            # learns of it from the MOVED its next command gets and builds that node then
            cluster.failover(cluster.replica_of_slot(keys[0]))
            await round_trip(keys[0])
        nodes = client.get_nodes()
        assert {int(node.port) for node in nodes} - seeds, "the client serves keys from a node it discovered"
        assert all(issubclass(node.connection_class, command_packing._HiredisPacking) for node in nodes)
    finally:
        await close_client(client)


DEPLOY_VALUES = {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)}


@pytest.mark.parametrize("mode", ["cluster", "sentinel"])
async def test_the_acceptance_form_round_passes_on_the_whole_stack_over_each_redis_mode(
    mode: str, cluster: RedisClusterServers, sentinel: RedisSentinelServers, tmp_path: Path
) -> None:
    url = cluster.url if mode == "cluster" else sentinel.url
    async with running_stack(tmp_path, redis_url=url, redis_mode=mode, echo=False) as running:
        call = asyncio.create_task(
            call_tool(running.endpoints.broker, "examples:deploy", {"artifact": f"build-{mode}"}, session=mode)
        )
        form = await wait_for_pending(running.endpoints.interaction, mode)
        settled = await answer(running.endpoints.interaction, form, form_pb2.ACTION_ACCEPT, DEPLOY_VALUES)
        assert settled.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        assert result_text(await call) == f"Deployed build-{mode} to staging."
