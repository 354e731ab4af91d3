"""Fixtures: the Interaction service running in-process on loopback over the session's real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc.aio
import pytest

from maka.interaction.v1 import interaction_service_pb2_grpc
from services.interaction.settings import Settings
from tests.services.interaction.harness import ADMIN_SURFACE_TOKEN, BROKER_TOKEN, Service, start_service, write_tokens


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    """Fast reaper, bearer tokens on, defaults otherwise."""
    return Settings(
        redis_url=redis_url,
        reaper_interval_seconds=0.05,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
    )


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[Service]:
    """A running service (stopped after the test)."""
    svc = await start_service(settings)
    try:
        yield svc
    finally:
        await svc.running.stop()


@pytest.fixture
async def broker_channel(service: Service) -> AsyncIterator[grpc.aio.Channel]:
    """A channel authenticated as the broker."""
    channel = service.channel(BROKER_TOKEN)
    yield channel
    await channel.close()


@pytest.fixture
async def surface_channel(service: Service) -> AsyncIterator[grpc.aio.Channel]:
    """A channel authenticated as a surface that may see every session."""
    channel = service.channel(ADMIN_SURFACE_TOKEN)
    yield channel
    await channel.close()


@pytest.fixture
def surface_stub(surface_channel: grpc.aio.Channel) -> interaction_service_pb2_grpc.InteractionServiceAsyncStub:
    """Unary stub for the all-sessions surface."""
    return interaction_service_pb2_grpc.InteractionServiceStub(surface_channel)
