"""Whether the Redis topology can honour the ``WAIT`` fence in force (docs/design.md#durable-fences).

A ``WAIT N`` fence on a master without N replicas never completes: every fenced write would wait
``redis_wait_timeout_ms`` and fail UNAVAILABLE, so every call ends without an answer. At start, in cluster
mode, the service reads the slot map (``CLUSTER SLOTS``, through redis-py's cluster client) and each
master's ``ROLE``, and refuses to start when some slot's master has fewer replicas than the fence needs
(``main`` exits 2 with one line naming ``MAKA_REDIS_WAIT_REPLICAS``). Redis unreachable at start is not a
refusal: the service starts NOT_SERVING and the fence fails calls UNAVAILABLE as before, logged
``wait_fence_short``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from services.core.backoff import Backoff
from services.interaction.redis_client import Client

log = logging.getLogger("maka.interaction.fence_check")


class FenceUnsatisfiable(Exception):
    """The ``WAIT`` fence needs more replicas than the topology has; the message is the one line shown."""

    def __init__(self, required: int, available: int) -> None:
        super().__init__(
            f"the WAIT fence needs {required} replicas but the cluster's masters have {available}; "
            "set MAKA_REDIS_WAIT_REPLICAS=0 to run without it"
        )
        self.required = required
        self.available = available


async def cluster_replicas(client: RedisCluster) -> int:
    """The fewest replicas any master serving slots has: per master, the larger of what the slot map lists
    (``CLUSTER SLOTS`` as the seed node sees it, which may lag behind the cluster's gossip just after the
    cluster formed) and what the master itself reports (``ROLE``: its connected replicas)."""
    await client.initialize()
    in_slot_map: dict[str, int] = {}
    for nodes in client.nodes_manager.slots_cache.values():
        in_slot_map[nodes[0].name] = max(in_slot_map.get(nodes[0].name, 0), len(nodes) - 1)
    if not in_slot_map:
        return 0
    counts: list[int] = []
    for primary in client.get_primaries():
        if primary.name not in in_slot_map:
            continue  # a master without slots takes no writes
        try:
            role: Any = await client.execute_command("ROLE", target_nodes=primary)
        except redis.exceptions.ResponseError:  # e.g. an ACL user without ROLE: the slot map alone decides
            role = ()
        connected = len(role[2]) if len(role) > 2 and isinstance(role[2], list) else 0
        counts.append(max(in_slot_map[primary.name], connected))
    return min(counts, default=0)


REPLICA_SETTLE_SECONDS = 10.0
"""How long a cluster that shows too few replicas is looked at again before the service refuses to start: a
replica that is still syncing (a cluster just formed, a replica pod restarting) attaches within it."""


async def check_wait_fence(client: Client, replicas: int, settle_seconds: float = REPLICA_SETTLE_SECONDS) -> None:
    """Raise :class:`FenceUnsatisfiable` when ``client`` is a cluster whose masters have fewer than
    ``replicas`` replicas for ``settle_seconds``; no fence (0) or another mode: nothing to check. Redis
    unreachable: logged ``redis_topology_unknown`` and not refused."""
    if replicas <= 0 or not isinstance(client, RedisCluster):
        return
    deadline = asyncio.get_running_loop().time() + settle_seconds
    retry = Backoff(initial=0.2, maximum=1.0).attempts()
    while True:
        try:
            available = await cluster_replicas(client)
        except (redis.exceptions.RedisError, OSError) as error:
            log.warning("redis_topology_unknown", extra={"error": type(error).__name__})
            return
        if available >= replicas:
            break
        if asyncio.get_running_loop().time() >= deadline:
            raise FenceUnsatisfiable(replicas, available)
        log.info("wait_fence_replicas_awaited", extra={"required": replicas, "replicas": available})
        await retry.sleep()  # the topology is read again, not synchronisation
    log.info("wait_fence_checked", extra={"required": replicas, "replicas": available})
