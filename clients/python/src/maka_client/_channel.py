"""Channels of the Maka client: TLS, bearer token and keepalive, the same for every client class."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
"""HTTP/2 pings so a dead connection is noticed; the broker's ``status`` events keep proxies open."""


@dataclass(frozen=True)
class TlsOptions:
    """TLS (and mutual TLS) for the channel.

    Attributes:
        ca_file: PEM CA bundle that verifies the server.
        client_cert_file: PEM client certificate, for servers that require mutual TLS.
        client_key_file: its PEM private key.
        server_name: override of the name checked against the server certificate.
    """

    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    server_name: str = ""

    @classmethod
    def from_env(cls) -> TlsOptions | None:
        """From ``MAKA_TLS_CA_FILE``, ``MAKA_TLS_CLIENT_CERT_FILE``, ``MAKA_TLS_CLIENT_KEY_FILE``,
        ``MAKA_TLS_SERVER_NAME`` (the variables the services use); None when no CA is set."""
        ca = os.environ.get("MAKA_TLS_CA_FILE")
        if not ca:
            return None
        cert = os.environ.get("MAKA_TLS_CLIENT_CERT_FILE")
        key = os.environ.get("MAKA_TLS_CLIENT_KEY_FILE")
        return cls(
            ca_file=Path(ca),
            client_cert_file=Path(cert) if cert else None,
            client_key_file=Path(key) if key else None,
            server_name=os.environ.get("MAKA_TLS_SERVER_NAME", ""),
        )


BROKER_NEW_CALLS_SERVICE = "maka.broker.v1.CapabilityBrokerService"
"""The broker's named health service: SERVING while the Host takes new calls, NOT_SERVING at once when it
drains, shuts down or was superseded (``""``, liveness, stays SERVING while it drains)."""


def is_pool_target(target: str) -> bool:
    """Whether ``target`` names a pool of Hosts rather than one: a ``dns:`` name (a headless Service,
    ``dns:///team-a-hosts:50052``, may resolve to every ready Host) or a list of addresses
    (``ipv4:127.0.0.1:1,127.0.0.1:2``). A plain ``host:port`` names one Host."""
    scheme, colon, rest = target.partition(":")
    if not colon or scheme not in ("dns", "ipv4", "ipv6"):
        return False
    return scheme == "dns" or "," in rest


@dataclass(frozen=True)
class PoolMember:
    """One Host of a pool target, dialled on its own: ``address`` (``host:port``) and the ``authority`` to send
    (the pool's DNS name for an address it resolved to, so TLS checks the name the target used; empty: the
    address itself)."""

    address: str
    authority: str = ""


DNS_DEFAULT_PORT = 443
"""gRPC's port for a ``dns:`` target that names none."""


def _split_host_port(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):  # [v6]:port
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    host, colon, port = text.rpartition(":")
    if not colon or ":" in host:  # no port, or a bare IPv6 address
        return text, default_port
    return host, int(port)


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def pool_members(target: str) -> list[PoolMember]:
    """Every Host a pool target names, now: the addresses of an ``ipv4:``/``ipv6:`` list, or what a ``dns:`` name
    resolves to (each address with the name as its authority). A name resolves to the Hosts its DNS lists: in
    Kubernetes the per-Host headless Service (``dns:///team-a-host:50052``, ``publishNotReadyAddresses``) lists
    draining Hosts too, the pool Service for new calls (``team-a-hosts``) only ready ones. Raises ``OSError`` when
    the name does not resolve. A target that is not a pool is its own one member."""
    scheme, _, rest = target.partition(":")
    if not is_pool_target(target):
        return [PoolMember(target)]
    if scheme in ("ipv4", "ipv6"):
        return [PoolMember(address.strip()) for address in rest.split(",") if address.strip()]
    name = rest[2:].partition("/")[2] if rest.startswith("//") else rest  # dns:[//authority/]host[:port]
    host, port = _split_host_port(name, DNS_DEFAULT_PORT)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = dict.fromkeys(_joined(str(info[4][0]), port) for info in infos)
    return [PoolMember(address, authority=_joined(host, port)) for address in addresses]


def pool_service_config(health_service: str) -> str:
    """The service config of a pool channel: ``round_robin`` over every address, with standard client-side
    health checking (``healthCheckConfig``) on ``health_service``, so a Host whose service is NOT_SERVING
    (draining) gets no new call while it still serves the calls it owns on other channels."""
    return json.dumps(
        {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": health_service}}
    )


def open_channel(
    target: str,
    tls: TlsOptions | None,
    max_message_bytes: int = 4 * 1024 * 1024,
    *,
    service_config: str | None = None,
    authority: str = "",
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target`` (``host:port`` or any gRPC target URI) with ``service_config`` as its
    default service config (None: gRPC's default, ``pick_first``) and ``authority`` as its ``:authority`` (and
    TLS name) when given. Create it in the loop that uses it."""
    options: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        *KEEPALIVE_OPTIONS,
    ]
    if service_config is not None:
        options.append(("grpc.service_config", service_config))
    if authority:
        options.append(("grpc.default_authority", authority))
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    credentials = grpc.ssl_channel_credentials(
        tls.ca_file.read_bytes() if tls.ca_file else None,
        tls.client_key_file.read_bytes() if tls.client_key_file else None,
        tls.client_cert_file.read_bytes() if tls.client_cert_file else None,
    )
    return grpc.aio.secure_channel(target, credentials, options=options)


STATE_DIR_ENV = "MAKA_STATE_DIR"
DEFAULT_STATE_DIR = ".state"
ENDPOINTS_FILE = "endpoints.json"


def state_dir_address(name: str) -> str | None:
    """The address ``endpoints.json`` of the local stack names for ``name`` (``"broker"``, ``"interaction"``):
    the file ``maka up`` writes in ``$MAKA_STATE_DIR`` (default ``./.state``). None when there is no such
    file, it cannot be read, or it names no address (read here, not through the runtime: the library ships
    alone)."""
    path = Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR) / ENDPOINTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def state_dir_token() -> str | None:
    """The owner's token of the local stack: the ``owner`` entry of the tokens file ``endpoints.json`` names
    (``"tokens"``, mode 0600: ``maka up`` writes it, and requires it on TCP ports). None when there is none.
    Only for a target read from the same ``endpoints.json``: never sent to an address named elsewhere."""
    path = Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR) / ENDPOINTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tokens = json.loads(Path(data["tokens"]).read_text(encoding="utf-8"))["tokens"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for entry in tokens if isinstance(tokens, list) else []:
        if isinstance(entry, dict) and entry.get("name") == "owner" and isinstance(entry.get("token"), str):
            token: str = entry["token"]
            return token
    return None


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    """``authorization: Bearer <token>`` metadata, or none."""
    return (("authorization", f"Bearer {token}"),) if token else ()
