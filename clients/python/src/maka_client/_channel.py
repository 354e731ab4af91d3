"""Channels of the Maka client: TLS, bearer token and keepalive, the same for every client class.

A TLS channel follows renewals of its files (:class:`ReloadingChannel`): the CA bundle and the client
certificate and key are re-read when they change, on the next call, without a restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

log = logging.getLogger("maka_client.channel")

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

    def dial() -> grpc.aio.Channel:
        credentials = grpc.ssl_channel_credentials(
            tls.ca_file.read_bytes() if tls.ca_file else None,
            tls.client_key_file.read_bytes() if tls.client_key_file else None,
            tls.client_cert_file.read_bytes() if tls.client_cert_file else None,
        )
        return grpc.aio.secure_channel(target, credentials, options=options)

    files = [path for path in (tls.ca_file, tls.client_cert_file, tls.client_key_file) if path is not None]
    if not files:
        return dial()  # the system's roots, nothing of ours to follow
    return ReloadingChannel(dial, files, lambda: check_tls_files(tls))


Stamp = tuple[tuple[int, int, int], ...]


def _stamp(paths: Sequence[Path]) -> Stamp:
    stamps = []
    for path in paths:
        st = path.stat()
        stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


_MISSING: Stamp = ()
"""The stamp of files not all there (a ``stat`` failed): logged once until they are back, not on every call."""


def _log_reloaded(paths: Sequence[Path]) -> None:
    log.info("tls_reloaded")


def _log_reload_failed(paths: Sequence[Path], error: Exception) -> None:
    log.warning("tls_reload_failed: %s", type(error).__name__)


def check_tls_files(tls: TlsOptions) -> None:
    """Raise ``OSError`` (``ssl.SSLError``) unless the CA bundle loads and the client key is the client
    certificate's (stdlib ``ssl``; gRPC would only fail the next handshake on a half-written pair)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if tls.ca_file is not None:
        context.load_verify_locations(cafile=tls.ca_file)
    if tls.client_cert_file is not None:
        context.load_cert_chain(tls.client_cert_file, tls.client_key_file)


class _Call:
    """A multi-callable that asks its :class:`ReloadingChannel` for the channel of each call."""

    def __init__(self, owner: ReloadingChannel, kind: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self._owner, self._kind, self._method, self._args, self._kwargs = owner, kind, method, args, kwargs
        self._made: tuple[grpc.aio.Channel, Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel = self._owner.current()
        if self._made is None or self._made[0] is not channel:
            self._made = (channel, getattr(channel, self._kind)(self._method, *self._args, **self._kwargs))
        return self._made[1](*args, **kwargs)


class ReloadingChannel(grpc.aio.Channel):
    """A TLS channel whose files (``TlsOptions``) are re-read when they change: a renewed CA or client
    certificate is used without restarting the program.

    Every new call compares the files' ``stat`` (mtime, size, inode) with those last loaded; when they moved and
    load (:func:`check_tls_files`), that call and the next go through a new channel opened from the files as
    they are now; calls already running (an attached stream, a waiting call) keep theirs until they end and
    resume. Files that do not load yet (half written) are logged once (``tls_reload_failed``) and the current
    channel goes on; files not there are logged once until they are back. Replaced channels are closed with
    this one. The runtime's ``services.core.channels`` carries the same code (the library may not import it;
    ``tests/clients/test_reloading_channel.py`` holds the two equal).
    """

    def __init__(self, dial: Callable[[], grpc.aio.Channel], paths: Sequence[Path], check: Callable[[], None]):
        self._dial, self._paths, self._check = dial, tuple(paths), check
        self._loaded = _stamp(self._paths)
        self._failed: Stamp | None = None
        self._channel = dial()
        self._replaced: list[grpc.aio.Channel] = []
        self.reloads = 0
        """Channels opened after the first."""

    def current(self) -> grpc.aio.Channel:
        """The channel for a new call: a new one when the files changed and load."""
        try:
            stamp = _stamp(self._paths)
        except OSError as error:
            self._failure(_MISSING, error)
            return self._channel
        if stamp == self._loaded:
            self._failed = None
            return self._channel
        if stamp == self._failed:
            return self._channel
        try:
            self._check()
            channel = self._dial()
        except (OSError, ValueError) as error:
            self._failure(stamp, error)
            return self._channel
        self._replaced.append(self._channel)
        self._channel, self._loaded, self._failed = channel, stamp, None
        self.reloads += 1
        _log_reloaded(self._paths)
        return channel

    def _failure(self, stamp: Stamp, error: Exception) -> None:
        if stamp != self._failed:
            _log_reload_failed(self._paths, error)
        self._failed = stamp

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Call(self, "unary_unary", method, args, kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Call(self, "unary_stream", method, args, kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Call(self, "stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Call(self, "stream_stream", method, args, kwargs)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self.current().get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self.current().channel_ready()

    async def close(self, grace: float | None = None) -> None:
        replaced, self._replaced = self._replaced, []
        for channel in (*replaced, self._channel):
            await channel.close(grace)

    async def __aenter__(self) -> ReloadingChannel:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()


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
