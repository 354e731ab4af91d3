"""The conformance stack's private redis-server: started on a unix socket, answering, then gone."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio

from surfaces.conformance.stack import PrivateRedis


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
