"""Fixtures shared by every test: a real redis-server per test session (per xdist worker), a guard that
fails the test that leaves a connection to it open, and the machine's Chromium for pytest-playwright."""

from __future__ import annotations

import gc
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from tests.helpers.chromium import launch_args
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


_GUARD_NAME = "maka-test-leak-guard"


@pytest.fixture(scope="session")
def _redis_probe(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """One connection (named, so it never counts as a test's) that lists the session server's clients."""
    with redis.Redis.from_url(redis_server.url, client_name=_GUARD_NAME) as probe:
        yield probe


@pytest.fixture(autouse=True)
def _no_redis_connection_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test (using ``redis_url``) that leaves a connection to the session's redis-server open once its
    event loop is closed: a stopped service must have closed its Redis connections, and a test every client it
    opened. Left open, the connection's garbage collection fails whichever later test of the worker runs then
    ("unclosed Connection", "Event loop is closed"); here the leak fails the test that made it, and is collected.

    Two PING + ``CLIENT LIST`` per such test on one session connection (about a millisecond); autouse, so torn
    down after the test's event loop closed. Connections already open before the test are not its own."""
    if "redis_url" not in request.fixturenames:
        yield
        return
    probe: redis.Redis = request.getfixturevalue("_redis_probe")

    def open_clients() -> dict[int, dict[str, str]]:
        # The PING first: a connection this process closed before is gone from the list by the time its reply
        # came (the server saw that close first).
        probe.ping()
        return {int(c["id"]): c for c in probe.client_list() if c["name"] != _GUARD_NAME}

    before = open_clients()
    yield
    left = [c for client_id, c in open_clients().items() if client_id not in before]
    if left:
        with warnings.catch_warnings():  # collected now, reported below: not as a later test's warning
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        shown = ", ".join(f"name={c['name'] or '-'} cmd={c['cmd']} age={c['age']}s" for c in left)
        pytest.fail(f"{len(left)} Redis connection(s) still open after the test: {shown}", pytrace=False)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright launches the machine's Chromium by path (never ``playwright install``)."""
    return launch_args(browser_type_launch_args)
