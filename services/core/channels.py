"""Outgoing gRPC channels: one helper so every client gets the same options, TLS and bearer token."""

from __future__ import annotations

import grpc
import grpc.aio

from services.core.auth import client_metadata_interceptors
from services.core.serving import KEEPALIVE_OPTIONS
from services.core.settings import ClientTlsSettings

MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def open_channel(
    target: str,
    *,
    token: str | None = None,
    tls: ClientTlsSettings | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target`` (``host:port``) with keepalive, message caps, optional TLS/mTLS
    (from ``tls``, default read from ``MAKA_TLS_*``) and ``authorization: Bearer token`` on every call.

    Create it inside the event loop that will use it.
    """
    tls = tls if tls is not None else ClientTlsSettings()
    options: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        *KEEPALIVE_OPTIONS,
    ]
    interceptors = client_metadata_interceptors(token)
    if tls.tls_ca_file is None:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    if tls.tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls.tls_server_name))
    key = tls.tls_client_key_file.read_bytes() if tls.tls_client_key_file else None
    cert = tls.tls_client_cert_file.read_bytes() if tls.tls_client_cert_file else None
    credentials = grpc.ssl_channel_credentials(tls.tls_ca_file.read_bytes(), key, cert)
    return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
