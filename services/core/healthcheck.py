"""A tiny gRPC health probe: ``python -m services.core.healthcheck HOST:PORT [SERVICE] [--ca FILE ...]``.

Calls ``grpc.health.v1.Health/Check`` (the standard gRPC health checking protocol) and exits 0 when
the answer is SERVING, 1 otherwise (NOT_SERVING, UNKNOWN, unreachable, timeout). Used by Docker
Compose health checks (the ``grpc_health_probe`` binary would need a download), by ``maka up``, and as
the Kubernetes ``exec`` probe of a service that speaks TLS or mutual TLS (native gRPC probes speak
plaintext only): ``--ca`` verifies the server, ``--cert``/``--key`` present a client certificate.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2

from services.core.channels import open_channel
from services.core.settings import ClientTlsSettings

CHECK_METHOD = "/grpc.health.v1.Health/Check"


async def serving(
    target: str, service: str = "", *, timeout: float = 2.0, tls: ClientTlsSettings | None = None
) -> bool:
    """True when ``Health/Check(service)`` at ``target`` (``host:port``) returns SERVING within ``timeout`` s.

    ``tls`` with a CA file dials TLS (and mutual TLS with a client certificate); without, plaintext.
    Never raises for RPC failures (UNAVAILABLE, DEADLINE_EXCEEDED, NOT_FOUND for an unknown service,
    a TLS handshake refused): they count as not serving.
    """
    if tls is not None and tls.tls_ca_file is not None:
        channel = open_channel(target, tls=tls)
    else:
        channel = grpc.aio.insecure_channel(target)
    async with channel:
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
    parser.add_argument("--ca", type=Path, help="PEM CA bundle: dial TLS and verify the server with it")
    parser.add_argument("--cert", type=Path, help="PEM client certificate (mutual TLS)")
    parser.add_argument("--key", type=Path, help="PEM private key of --cert")
    parser.add_argument("--server-name", default="", help="TLS name to check instead of HOST")
    args = parser.parse_args(argv)
    tls = None
    if args.ca is not None:
        tls = ClientTlsSettings(
            tls_ca_file=args.ca,
            tls_client_cert_file=args.cert,
            tls_client_key_file=args.key,
            tls_server_name=args.server_name,
        )
    try:
        ok = asyncio.run(serving(args.target, args.service, timeout=args.timeout, tls=tls))
    except OSError as error:  # an unreadable certificate file: a probe failure, not a traceback
        sys.stderr.write(f"healthcheck: {error.filename}: {error.strerror}\n")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
