"""Readiness probes against real servers: they say yes to a serving one and no (never raise) to anything else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc.aio
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from stack.ports import free_port
from stack.probes import grpc_serving, http_ok, redis_ping


@pytest.fixture
async def health_server() -> AsyncIterator[tuple[str, health.aio.HealthServicer]]:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_grpc_serving_follows_the_overall_health_status(
    health_server: tuple[str, health.aio.HealthServicer],
) -> None:
    target, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert await grpc_serving(target)

    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert not await grpc_serving(target)


async def test_probes_of_a_closed_port_say_no_instead_of_raising() -> None:
    port = free_port()

    assert not await grpc_serving(f"127.0.0.1:{port}", timeout=1)
    assert not await http_ok(f"http://127.0.0.1:{port}/", timeout=1)


async def test_redis_ping_says_yes_to_a_real_server_and_no_to_a_missing_socket(redis_url: str, tmp_path: Path) -> None:
    assert await redis_ping(redis_url)
    assert not await redis_ping(f"unix://{tmp_path / 'absent.sock'}")
