"""Fixtures shared by every test: a real redis-server per test session (per xdist worker)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio

from tests.helpers.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private redis-server on a unix socket for this test session (short path: <107 chars)."""
    with tempfile.TemporaryDirectory(prefix="maka-redis-", dir="/tmp") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
async def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, flushed before each test."""
    client = redis.asyncio.Redis.from_url(redis_server.url)
    await client.flushall()
    await client.aclose()
    return redis_server.url
