"""Outgoing gRPC channels: one helper so every client gets the same options, TLS and bearer token.

Every channel resolves its target through gRPC's name resolution and balances calls with ``round_robin``
over every address it finds (docs/design.md#grpc-for-a-replicated-tier): a bare ``host:port`` is
dialled as ``dns:///host:port`` (a Kubernetes headless Service name gives every replica), and any target
with a scheme (``dns:``, ``ipv4:127.0.0.1:1,127.0.0.1:2``, ``unix:``) is used as is. The service config
retries the idempotent unaries of the Interaction service (``Answer`` with its submission id,
``ListPending``, ``GetInteraction``) on UNAVAILABLE, so a replica going away costs a retry, not an error.

A TLS channel follows renewals of its files (:class:`ReloadingChannel`): the CA bundle and the client
certificate and key are re-read when they change, on the next call, without a restart.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

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

log = logging.getLogger("maka.channels")

Stamp = tuple[tuple[int, int, int], ...]


def _stamp(paths: Sequence[Path]) -> Stamp:
    """(mtime, size, inode) of each file: one ``stat`` each, which a renewal (a Secret volume's swap, a
    ``mv`` of a new file) always changes."""
    stamps = []
    for path in paths:
        st = path.stat()
        stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


_MISSING: Stamp = ()
"""The stamp of files not all there (a ``stat`` failed): logged once until they are back, not on every call."""


def _log_reloaded(paths: Sequence[Path]) -> None:
    log.info("tls_client_reloaded", extra={"ca_file": str(paths[0])})


def _log_reload_failed(paths: Sequence[Path], error: Exception) -> None:
    log.warning("tls_client_reload_failed", extra={"ca_file": str(paths[0]), "error": type(error).__name__})


def check_client_tls_files(ca: Path | None, cert: Path | None, key: Path | None) -> None:
    """Raise ``OSError`` (``ssl.SSLError``) unless the CA bundle loads and the client key is the client
    certificate's (stdlib ``ssl``: gRPC itself would only fail the next handshake on a half-written pair)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is not None:
        context.load_verify_locations(cafile=ca)
    if cert is not None:
        context.load_cert_chain(cert, key)


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
    """A TLS channel whose files are re-read when they change: renewed certificates need no restart.

    Every new call first compares the files' ``stat`` with those it last loaded (one syscall each). When they
    moved and load (:func:`check_client_tls_files`), the call and those after it go through a new channel
    ``dial`` opens from the files as they are now (``tls_client_reloaded``); calls already running keep theirs
    (a stream ends and resumes on the new one, e.g. at the server's connection age). Files that do not load
    (half written, key and certificate not matching yet) are logged once as ``tls_client_reload_failed`` and
    the current channel goes on until they change again; files not there (a ``stat`` fails) are logged once
    until they are back (missing, present, missing again: two lines). Stubs made once keep working: each of
    their calls asks for the current channel. Replaced channels are closed with this one (an idle one holds no
    connection after gRPC's client idle timeout). ``maka_client._channel`` carries the same code
    (``tests/clients/test_reloading_channel.py`` holds the two equal).
    """

    def __init__(self, dial: Callable[[], grpc.aio.Channel], paths: Sequence[Path], check: Callable[[], None]):
        self._dial, self._paths, self._check = dial, tuple(paths), check
        self._loaded = _stamp(self._paths)
        self._failed: Stamp | None = None
        self._channel = dial()
        self._replaced: list[grpc.aio.Channel] = []
        self.reloads = 0
        """Channels opened after the first (for tests and logs)."""

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


Token = str | Callable[[], str | None]
"""A bearer token, or what gives the token of each new call (None or empty: the call carries none)."""


class _BearerCall:
    """A multi-callable that adds ``authorization: Bearer`` to the metadata of each call it makes."""

    def __init__(self, callable_: Any, owner: BearerChannel) -> None:
        self._callable, self._owner = callable_, owner

    def __call__(self, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._callable(*args, metadata=(*(metadata or ()), *self._owner.header()), **kwargs)


class BearerChannel(grpc.aio.Channel):
    """``channel`` with ``authorization: Bearer <token>`` added to every call's metadata.

    Not grpc.aio client interceptors: an intercepted stream-stream call (``Attach``) fails under an eager
    task factory, which Textual sets on its loop (``maka tui``). The interceptor's task runs inside
    ``create_task``, before the call has stored it, so the request iterator raises ``AttributeError`` and
    gRPC cancels the call ("Locally cancelled by application"): the TUI never attached with a token on.

    ``token`` may be a callable, asked at each new call: a token that changes while the channel lives (``maka
    tui`` after ``maka login`` or a renewal of the person's ID token) is sent from the next call on, on the same
    connection; calls already running keep the one they started with.
    """

    def __init__(self, channel: grpc.aio.Channel, token: Token) -> None:
        self._channel = channel
        self._token = token

    def header(self) -> tuple[tuple[str, str], ...]:
        """The ``authorization`` metadata of a new call (none when the token source gives none)."""
        token = self._token() if callable(self._token) else self._token
        return (("authorization", f"Bearer {token}"),) if token else ()

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _BearerCall(self._channel.unary_unary(method, *args, **kwargs), self)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _BearerCall(self._channel.unary_stream(method, *args, **kwargs), self)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _BearerCall(self._channel.stream_unary(method, *args, **kwargs), self)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _BearerCall(self._channel.stream_stream(method, *args, **kwargs), self)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    async def __aenter__(self) -> BearerChannel:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()


def dial_target(target: str) -> str:
    """``host:port`` → ``dns:///host:port``; a target that names its resolver scheme is returned unchanged."""
    head = target.split(":", 1)[0]
    if head in ("dns", "ipv4", "ipv6", "unix", "unix-abstract", "vsock") or "://" in target:
        return target
    return f"dns:///{target}"


def open_channel(
    target: str,
    *,
    token: Token | None = None,
    tls: ClientTlsSettings | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target`` (``host:port`` or a gRPC target, see the module docstring) with
    round_robin, retries of idempotent unaries, keepalive, message caps, optional TLS/mTLS
    (from ``tls``, default read from ``MAKA_TLS_*``; a :class:`ReloadingChannel` that re-reads renewed files)
    and ``authorization: Bearer token`` on every call (:class:`BearerChannel`; ``token`` may be a callable asked
    at each new call).

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
    if tls.tls_ca_file is None:
        channel: grpc.aio.Channel = grpc.aio.insecure_channel(target, options=options)
        return BearerChannel(channel, token) if token else channel
    if tls.tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls.tls_server_name))
    ca, cert_file, key_file = tls.tls_ca_file, tls.tls_client_cert_file, tls.tls_client_key_file

    def dial() -> grpc.aio.Channel:
        key = key_file.read_bytes() if key_file else None
        cert = cert_file.read_bytes() if cert_file else None
        credentials = grpc.ssl_channel_credentials(ca.read_bytes(), key, cert)
        return grpc.aio.secure_channel(target, credentials, options=options)

    files = [ca, *(path for path in (cert_file, key_file) if path is not None)]
    reloading = ReloadingChannel(dial, files, lambda: check_client_tls_files(ca, cert_file, key_file))
    return BearerChannel(reloading, token) if token else reloading
