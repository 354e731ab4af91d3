"""The Interaction service's Redis client in each deployment mode, through redis-py's own clients.

- ``standalone``: :meth:`redis.asyncio.Redis.from_url` (``redis://``, ``rediss://``, ``unix://``).
- ``sentinel``: :class:`redis.asyncio.sentinel.Sentinel` → ``master_for(service)`` (the client follows
  failovers by asking the sentinels again after a connection error or a ``READONLY`` reply).
- ``cluster``: :class:`redis.asyncio.cluster.RedisCluster` from seed nodes (it follows ``MOVED``/``ASK``
  and refreshes the slot map after a failover).

Every client: binary values, short retries, a read timeout (outages surface as STORE_UNAVAILABLE instead
of hanging), at most ``redis_pool_size`` connections (per node in cluster mode), and the connection name
``maka-interaction`` so ``CLIENT LIST`` shows them (docs/design.md#interaction-tier), and commands packed by
hiredis in every mode (:mod:`services.interaction.command_packing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff

from services.interaction.command_packing import use_hiredis_packing
from services.interaction.settings import RedisMode, Settings

CLIENT_NAME = "maka-interaction"
"""``CLIENT SETNAME`` of every connection this service opens."""

Client = redis.asyncio.Redis | RedisCluster
"""What the store and the fan-out talk to."""


@dataclass(frozen=True, slots=True)
class Address:
    """One ``host:port`` of a sentinel/cluster address list, and whether it asked for TLS."""

    host: str
    port: int
    tls: bool = False


def parse_addresses(value: str, default_port: int) -> list[Address]:
    """``"a:1,b:2"`` (items may carry ``redis://`` or ``rediss://``) → addresses. Raises ValueError."""
    out: list[Address] = []
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        tls = item.startswith("rediss://")
        parts = urlsplit(item if "://" in item else f"redis://{item}")
        if not parts.hostname:
            raise ValueError(f"not a host:port address: {item!r}")
        out.append(Address(parts.hostname, parts.port or default_port, tls))
    if not out:
        raise ValueError("no Redis address given")
    return out


def _password(settings: Settings) -> str | None:
    if settings.redis_password_file is None:
        return None
    return settings.redis_password_file.read_text(encoding="utf-8").strip()


def _common(settings: Settings) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "decode_responses": False,
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        "socket_connect_timeout": 2.0,
        "socket_timeout": settings.redis_timeout_seconds,
        "client_name": CLIENT_NAME,
    }
    password = _password(settings)
    if password is not None:
        kwargs["password"] = password
    if settings.redis_username:
        kwargs["username"] = settings.redis_username
    return kwargs


async def close_client(client: Client) -> None:
    """Close ``client``'s connections; in sentinel mode also the clients of the sentinels it asked (closing the
    master's client leaves those open)."""
    await client.aclose()
    pool = client.connection_pool if isinstance(client, redis.asyncio.Redis) else None
    if isinstance(pool, SentinelConnectionPool):
        await pool.sentinel_manager.aclose()


def redis_client(settings: Settings) -> Client:
    """The process's Redis client for ``settings.redis_mode`` (see the module docstring)."""
    kwargs = _common(settings)
    if settings.redis_mode is RedisMode.STANDALONE:
        return use_hiredis_packing(
            redis.asyncio.Redis.from_url(
                settings.redis_url, max_connections=settings.redis_pool_size, health_check_interval=30, **kwargs
            )
        )
    if settings.redis_mode is RedisMode.SENTINEL:
        addresses = parse_addresses(settings.redis_url, 26379)
        sentinel_kwargs: dict[str, Any] = {"socket_connect_timeout": 2.0, "socket_timeout": 2.0}
        if "password" in kwargs:
            sentinel_kwargs["password"] = kwargs["password"]
        if addresses[0].tls:
            kwargs["ssl"] = True
            sentinel_kwargs["ssl"] = True
        sentinels = [(a.host, a.port) for a in addresses]
        sentinel = Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs, **kwargs)  # type: ignore[no-untyped-call]
        master: redis.asyncio.Redis = sentinel.master_for(
            settings.redis_sentinel_service, max_connections=settings.redis_pool_size, health_check_interval=30
        )
        return use_hiredis_packing(master)
    addresses = parse_addresses(settings.redis_url, 6379)
    if addresses[0].tls:
        kwargs["ssl"] = True
    return use_hiredis_packing(
        RedisCluster(
            startup_nodes=[ClusterNode(a.host, a.port) for a in addresses],
            max_connections=settings.redis_pool_size,
            **kwargs,
        )
    )
