"""Readiness probes: is a child up? Each returns a bool (or a listing) and never waits longer than its timeout.

Used by :class:`stack.topology.Stack` (its children's ``ready`` checks, waiting for MCP servers' Tools),
``maka status`` and the benchmarks' topologies.
"""

from __future__ import annotations

import os

import httpx
import redis.asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core import healthcheck
from services.core.channels import open_channel


async def grpc_serving(target: str, *, timeout: float = 2.0, service: str = "") -> bool:
    """True when ``grpc.health.v1.Health/Check`` for ``service`` (default the overall ``""``, liveness) says
    SERVING. A broker's ``maka.broker.v1.CapabilityBrokerService`` says whether it takes new calls: it is
    NOT_SERVING at once when the broker drains, while ``""`` stays SERVING until the drain is over."""
    return await healthcheck.serving(target, service, timeout=timeout)


async def list_tools(broker: str, *, timeout: float = 2.0, token: str | None = None) -> list[str]:
    """Qualified names (``SERVER:TOOL``) of every Tool the broker at ``broker`` lists (``ListTools``).

    Sends ``token`` (else ``MAKA_CALLER_TOKEN`` when set) as the bearer token. Raises ``grpc.aio.AioRpcError``.
    """
    async with open_channel(broker, token=token or os.environ.get("MAKA_CALLER_TOKEN") or None) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        response = await stub.ListTools(broker_pb2.ListToolsRequest(), timeout=timeout)
    return [tool.qualified_name for tool in response.tools]


async def servers_waiting_for_sign_in(broker: str, *, timeout: float = 2.0, token: str | None = None) -> set[str]:
    """MCP servers whose provider published a pending OAuth sign-in (broker ``ListSignIns``); sends ``token``
    (else ``MAKA_CALLER_TOKEN``)."""
    async with open_channel(broker, token=token or os.environ.get("MAKA_CALLER_TOKEN") or None) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        response = await stub.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=timeout)
    return {status.server for status in response.sign_ins if status.state == broker_pb2.SIGN_IN_STATE_REQUIRED}


async def http_ok(url: str, *, timeout: float = 2.0) -> bool:
    """True when ``GET url`` answers below 500."""
    async with httpx.AsyncClient(timeout=timeout) as client:
        try:
            response = await client.get(url)
        except httpx.HTTPError:
            return False
    return response.status_code < 500


async def redis_ping(url: str) -> bool:
    """True when Redis at ``url`` answers PING."""
    client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        return bool(await client.ping())
    except (redis.exceptions.RedisError, OSError):
        return False
    finally:
        await client.aclose()


async def servers_not_connecting(broker: str, *, timeout: float = 5.0, token: str | None = None) -> set[str]:
    """MCP servers the broker's ``GetStatus`` reports as failed or waiting for a sign-in (waiting longer for
    their Tools would not help). Sends ``token``, else ``MAKA_CALLER_TOKEN`` (else ``MAKA_SURFACE_TOKEN``) as
    the bearer token when set. Raises ``grpc.aio.AioRpcError``."""
    token = token or os.environ.get("MAKA_CALLER_TOKEN") or os.environ.get("MAKA_SURFACE_TOKEN") or None
    async with open_channel(broker, token=token) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        response = await stub.GetStatus(broker_pb2.GetStatusRequest(), timeout=timeout)
    stuck = (broker_pb2.SERVER_STATE_FAILED, broker_pb2.SERVER_STATE_WAITING_FOR_SIGN_IN)
    return {server.name for server in response.servers if server.state in stuck}
