"""A tiny gRPC health probe: ``python -m services.core.healthcheck HOST:PORT [SERVICE]``.

Calls ``grpc.health.v1.Health/Check`` (the standard gRPC health checking protocol) and exits 0 when
the answer is SERVING, 1 otherwise (NOT_SERVING, UNKNOWN, unreachable, timeout). Used by Docker
Compose health checks (the ``grpc_health_probe`` binary would need a download) and by ``maka up``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2

CHECK_METHOD = "/grpc.health.v1.Health/Check"


async def serving(target: str, service: str = "", *, timeout: float = 2.0) -> bool:
    """True when ``Health/Check(service)`` at ``target`` (``host:port``) returns SERVING within ``timeout`` s.

    Never raises for RPC failures (UNAVAILABLE, DEADLINE_EXCEEDED, NOT_FOUND for an unknown service):
    they count as not serving.
    """
    async with grpc.aio.insecure_channel(target) as channel:
        check = channel.unary_unary(
            CHECK_METHOD,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            response = await check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
    return isinstance(response, health_pb2.HealthCheckResponse) and (
        response.status == health_pb2.HealthCheckResponse.SERVING
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Probe entry point; returns the exit code (0 SERVING, 1 otherwise)."""
    parser = argparse.ArgumentParser(prog="python -m services.core.healthcheck", description=__doc__)
    parser.add_argument("target", help="host:port of the gRPC server")
    parser.add_argument("service", nargs="?", default="", help='health service name (default "" = overall)')
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    args = parser.parse_args(argv)
    ok = asyncio.run(serving(args.target, args.service, timeout=args.timeout))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
