"""The repository's generated code and core import, and the redis fixture gives a real server."""

from __future__ import annotations

import redis.asyncio

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_service_pb2_grpc


def test_generated_packages_import_and_name_their_services() -> None:
    assert broker_pb2.DESCRIPTOR.services_by_name["CapabilityBrokerService"].full_name == (
        "maka.broker.v1.CapabilityBrokerService"
    )
    assert hasattr(interaction_service_pb2_grpc, "InteractionServiceStub")


async def test_redis_fixture_is_a_real_server_with_lua(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        assert await client.eval("return redis.call('INCR', KEYS[1])", 1, "k") == 1
    finally:
        await client.aclose()
