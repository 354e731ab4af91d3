"""The conformance stack: its private redis-server, and a start that fails cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio

from services.core.healthcheck import serving
from stack.errors import StackError
from tests.conformance.client.stack import InProcessStack, PrivateRedis


async def test_private_redis_serves_on_its_socket_until_stopped(tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path)
    await server.start()
    try:
        client = redis.asyncio.Redis.from_url(server.url)
        assert await client.set("maka:{conformance}:probe", "1")
        assert await client.get("maka:{conformance}:probe") == b"1"
        await client.aclose()
    finally:
        await server.stop()

    client = redis.asyncio.Redis.from_url(server.url)
    try:
        ping_failed = False
        try:
            await client.ping()
        except (redis.exceptions.ConnectionError, FileNotFoundError):
            ping_failed = True
        assert ping_failed
    finally:
        await client.aclose()
    await server.stop()  # idempotent


async def test_a_bad_mcp_servers_file_fails_the_stack_start_with_the_json_path(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"conformance": {"url": "ftp://nowhere"}}}))
    stack = InProcessStack(config, host_id="bad-config")

    with pytest.raises(StackError, match=r"ConfigError: mcpServers\.conformance\.url: must be an http"):
        await stack.start()
    assert stack.interaction is not None
    assert not await serving(stack.interaction_target)  # started, then stopped again
