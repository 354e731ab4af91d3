"""Outgoing gRPC channels: one helper so every client gets the same options, TLS and bearer token.

Every channel resolves its target through gRPC's name resolution and balances calls with ``round_robin``
over every address it finds (docs/design.md#grpc-for-a-replicated-tier): a bare ``host:port`` is
dialled as ``dns:///host:port`` (a Kubernetes headless Service name gives every replica), and any target
with a scheme (``dns:``, ``ipv4:127.0.0.1:1,127.0.0.1:2``, ``unix:``) is used as is. The service config
retries the idempotent unaries of the Interaction service (``Answer`` with its submission id,
``ListPending``, ``GetInteraction``) on UNAVAILABLE, so a replica going away costs a retry, not an error.
"""

from __future__ import annotations

import json

import grpc
import grpc.aio

from services.core.client_interceptors import client_metadata_interceptors
from services.core.keepalive import KEEPALIVE_OPTIONS
from services.core.settings import ClientTlsSettings

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_INTERACTION_SERVICE = "maka.interaction.v1.InteractionService"
SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            {
                "name": [
                    {"service": _INTERACTION_SERVICE, "method": method}
                    for method in ("Answer", "ListPending", "GetInteraction")
                ],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.2s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }
)
"""round_robin plus a retry policy for the idempotent unaries (gRPC service config, JSON)."""


def dial_target(target: str) -> str:
    """``host:port`` → ``dns:///host:port``; a target that names its resolver scheme is returned unchanged."""
    head = target.split(":", 1)[0]
    if head in ("dns", "ipv4", "ipv6", "unix", "unix-abstract", "vsock") or "://" in target:
        return target
    return f"dns:///{target}"


def open_channel(
    target: str,
    *,
    token: str | None = None,
    tls: ClientTlsSettings | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target`` (``host:port`` or a gRPC target, see the module docstring) with
    round_robin, retries of idempotent unaries, keepalive, message caps, optional TLS/mTLS
    (from ``tls``, default read from ``MAKA_TLS_*``) and ``authorization: Bearer token`` on every call.

    Create it inside the event loop that will use it.
    """
    tls = tls if tls is not None else ClientTlsSettings()
    options: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.service_config", SERVICE_CONFIG),
        ("grpc.enable_retries", 1),
        *KEEPALIVE_OPTIONS,
    ]
    target = dial_target(target)
    interceptors = client_metadata_interceptors(token)
    if tls.tls_ca_file is None:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    if tls.tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls.tls_server_name))
    key = tls.tls_client_key_file.read_bytes() if tls.tls_client_key_file else None
    cert = tls.tls_client_cert_file.read_bytes() if tls.tls_client_cert_file else None
    credentials = grpc.ssl_channel_credentials(tls.tls_ca_file.read_bytes(), key, cert)
    return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
