"""The client's channels: which targets name a pool of Hosts, and a pool channel's client-side health
checking (gRPC C-core honours ``healthCheckConfig``): a server whose new-calls health service is NOT_SERVING
gets no call, one that turns SERVING again does (docs/clients.md "Pools of Hosts")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from maka_client._channel import (
    BROKER_NEW_CALLS_SERVICE,
    PoolMember,
    is_pool_target,
    open_channel,
    pool_members,
    pool_service_config,
)
from tests.helpers.waiting import eventually

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
WHO = "test.Who"
"""A health service name each test server answers with its own status, so a response says which server
took the call: SERVING from ``a``, NOT_SERVING from ``b``."""


@pytest.mark.parametrize(
    ("target", "pool"),
    [
        ("dns:///team-a-hosts:50052", True),
        ("dns:team-a-hosts:50052", True),
        ("ipv4:127.0.0.1:1,127.0.0.1:2", True),
        ("ipv6:[::1]:1,[::1]:2", True),
        ("ipv4:127.0.0.1:1", False),
        ("127.0.0.1:50052", False),
        ("team-a-host-0.team-a-host:50052", False),
        ("unix:/tmp/broker.sock", False),
    ],
)
def test_a_dns_name_or_several_addresses_name_a_pool_and_one_address_names_one_host(target: str, pool: bool) -> None:
    assert is_pool_target(target) is pool


@pytest.mark.parametrize(
    ("target", "members"),
    [
        ("ipv4:127.0.0.1:1,127.0.0.1:2", [PoolMember("127.0.0.1:1"), PoolMember("127.0.0.1:2")]),
        ("ipv6:[::1]:1,[::1]:2", [PoolMember("[::1]:1"), PoolMember("[::1]:2")]),
        ("127.0.0.1:50052", [PoolMember("127.0.0.1:50052")]),
    ],
)
async def test_the_members_of_an_address_list_are_its_addresses_and_one_host_is_its_own_member(
    target: str, members: list[PoolMember]
) -> None:
    assert await pool_members(target) == members


async def test_the_members_of_a_dns_pool_are_what_its_name_resolves_to_with_the_name_as_authority() -> None:
    members = await pool_members("dns:///localhost:50052")
    assert PoolMember("127.0.0.1:50052", authority="localhost:50052") in members
    assert {member.authority for member in members} == {"localhost:50052"}
    assert len(members) == len({member.address for member in members}), "each address once"


def test_the_pool_service_config_balances_round_robin_and_health_checks_the_new_calls_service() -> None:
    config = json.loads(pool_service_config(BROKER_NEW_CALLS_SERVICE))
    assert config == {
        "loadBalancingConfig": [{"round_robin": {}}],
        "healthCheckConfig": {"serviceName": "maka.broker.v1.CapabilityBrokerService"},
    }


@asynccontextmanager
async def _server(serving: bool) -> AsyncIterator[tuple[int, HealthServicer]]:
    """A server answering ``WHO`` with SERVING (``serving``) or NOT_SERVING, and its health servicer."""
    server = grpc.aio.server()
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await health.set(WHO, SERVING if serving else NOT_SERVING)
    try:
        yield port, health
    finally:
        await server.stop(None)


async def _answered_by(channel: grpc.aio.Channel, calls: int) -> set[int]:
    stub = health_pb2_grpc.HealthStub(channel)
    statuses = set()
    for _ in range(calls):
        request = health_pb2.HealthCheckRequest(service=WHO)
        response = await stub.Check(request, timeout=10, wait_for_ready=True)  # type: ignore[attr-defined]
        statuses.add(int(response.status))
    return statuses


async def test_a_pool_channel_sends_no_call_to_a_server_whose_new_calls_health_is_not_serving() -> None:
    serving, not_serving = int(SERVING), int(NOT_SERVING)
    async with _server(True) as (port_a, health_a), _server(False) as (port_b, health_b):
        await health_a.set(BROKER_NEW_CALLS_SERVICE, NOT_SERVING)  # a drains
        await health_b.set(BROKER_NEW_CALLS_SERVICE, SERVING)
        target = f"ipv4:127.0.0.1:{port_a},127.0.0.1:{port_b}"
        channel = open_channel(target, None, service_config=pool_service_config(BROKER_NEW_CALLS_SERVICE))
        blind = open_channel(target, None, service_config=json.dumps({"loadBalancingConfig": [{"round_robin": {}}]}))
        try:
            assert await _answered_by(channel, 20) == {not_serving}, "every call went to b"
            assert await _answered_by(blind, 20) == {serving, not_serving}, "without health checks both get calls"

            await health_b.set(BROKER_NEW_CALLS_SERVICE, NOT_SERVING)  # b drains, a is back
            await health_a.set(BROKER_NEW_CALLS_SERVICE, SERVING)

            async def only_a() -> bool:
                return await _answered_by(channel, 5) == {serving}

            await eventually(only_a, timeout=10, what="the pool channel following the health change")
            assert await _answered_by(channel, 20) == {serving}
        finally:
            await channel.close()
            await blind.close()
