"""Redis commands packed by hiredis (C) instead of redis-py's pure-Python ``pack_command``.

redis-py's asyncio connections encode every argument in Python (one ``encode`` and a few joins per
argument); the Interaction service's scripts take ten to twenty arguments each, and this was about an
eighth of the service's Python time per one-form call (bench/results/profile-notes.md). hiredis —
already the reply parser — packs the same RESP bytes. Arguments of any type other than ``str``,
``bytes``, ``int`` and ``float`` (a ``bool``, ``None``, a ``memoryview``) take redis-py's own path, so
its ``DataError`` for bad input is unchanged.

redis-py 8's asyncio connections have no packer choice of their own (only its sync ``Connection`` picks
hiredis when installed), so every mode's client gets the packing here: a standalone or Sentinel client
through its pool's ``connection_class`` (a Sentinel master's pool opens ``SentinelManagedConnection`` objects,
which keep following failovers), a Cluster client through the ``connection_class`` its nodes manager
builds every node from (the seed nodes now, the nodes a slot refresh or a ``MOVED`` discovers later).
"""

from __future__ import annotations

from typing import Any, TypeVar

import hiredis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection

C = TypeVar("C", redis.asyncio.Redis, RedisCluster)

_PACKED_TYPES = frozenset({str, bytes, int, float})


class _HiredisPacking(AbstractConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        """The RESP bytes of one command, as one chunk (redis-py joins the chunks it gets)."""
        if not args or any(type(arg) not in _PACKED_TYPES for arg in args):
            return super().pack_command(*args)
        head = args[0]
        if isinstance(head, str) and " " in head:
            # as redis-py: a multi-word command name ("CLIENT SETNAME") is sent as separate words
            args = (*head.encode().split(), *args[1:])
        return [hiredis.pack_command(args)]


_PACKED: dict[str, type[AbstractConnection]] = {}


def packed(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """``connection_class`` (redis-py's TCP, TLS or unix-socket connection) with hiredis packing."""
    if issubclass(connection_class, _HiredisPacking):
        return connection_class
    key = f"{connection_class.__module__}.{connection_class.__qualname__}"
    found = _PACKED.get(key)
    if found is None:
        found = _PACKED[key] = type(f"Packed{connection_class.__name__}", (_HiredisPacking, connection_class), {})
    return found


def use_hiredis_packing(client: C) -> C:
    """Make ``client`` open hiredis-packing connections (before it opened any); returns ``client``.

    A standalone or Sentinel client: its pool's connection class. A Cluster client: the connection class in
    the keyword arguments every ``ClusterNode`` is built from, and that of the seed nodes already built.
    """
    if isinstance(client, RedisCluster):
        kwargs = client.connection_kwargs  # the nodes manager's own dict: nodes found later are built from it
        kwargs["connection_class"] = packed(kwargs["connection_class"])
        for node in (*client.startup_nodes, *client.nodes_manager.startup_nodes.values()):
            node.connection_class = packed(node.connection_class)
        return client
    pool = client.connection_pool
    pool.connection_class = packed(pool.connection_class)
    return client
