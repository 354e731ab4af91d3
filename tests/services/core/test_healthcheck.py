"""``python -m services.core.healthcheck``: the gRPC health probe used by Compose and ``maka up``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from services.core import healthcheck


@pytest.fixture
async def health() -> AsyncIterator[tuple[HealthServicer, str]]:
    server = grpc.aio.server()
    servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, f"127.0.0.1:{port}"
    await server.stop(None)


async def test_serving_is_true_only_while_the_server_says_serving(health: tuple[HealthServicer, str]) -> None:
    servicer, target = health
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert await healthcheck.serving(target) is True

    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert await healthcheck.serving(target) is False


async def test_a_named_service_is_checked_separately(health: tuple[HealthServicer, str]) -> None:
    servicer, target = health
    await servicer.set("maka.broker.v1.CapabilityBrokerService", health_pb2.HealthCheckResponse.SERVING)

    assert await healthcheck.serving(target, "maka.broker.v1.CapabilityBrokerService") is True
    assert await healthcheck.serving(target, "unknown.Service") is False


async def test_an_unreachable_target_is_not_serving() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    assert await healthcheck.serving(f"127.0.0.1:{port}", timeout=1) is False


async def test_the_module_exits_0_when_serving_and_1_otherwise(health: tuple[HealthServicer, str]) -> None:
    servicer, target = health
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    probe = [sys.executable, "-m", "services.core.healthcheck", target]

    serving = await asyncio.to_thread(subprocess.run, probe, check=False, timeout=30)
    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    not_serving = await asyncio.to_thread(subprocess.run, probe, check=False, timeout=30)

    assert (serving.returncode, not_serving.returncode) == (0, 1)
