"""The one way every service serves: build → health/reflection → serve → graceful shutdown.

Every service ``main`` has the same shape::

    settings = Settings()               # from MAKA_* environment variables
    app = await build(settings)         # plain async domain objects + thin servicers
    await serve(app, settings)          # this module

``serve`` binds the gRPC server, registers standard health checking (``grpc.health.v1``) and
server reflection, marks every service SERVING once ``app.start()`` returned, and on SIGINT/SIGTERM
marks the named services NOT_SERVING (readiness; ``""``, liveness, stays SERVING), lets ``app.stop()``
drain, marks ``""`` NOT_SERVING too, then stops the server with a grace period
(the grpc/grpc ``async_greeter_server_with_graceful_shutdown`` example).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import grpc
import grpc.aio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from services.core import tracing
from services.core.auth import Role, TokenTable
from services.core.interceptors import ServerInterceptor
from services.core.jwt_auth import verifier_from_settings
from services.core.keepalive import KEEPALIVE_OPTIONS
from services.core.metrics import start_metrics_server
from services.core.settings import GrpcServerSettings

log = logging.getLogger("maka.serving")


class GrpcApp(Protocol):
    """A service: its full gRPC service names, how to add servicers, and its lifecycle hooks.

    An app may also define ``bind_health(set_serving)``: called with :meth:`RunningServer.set_serving`
    before ``start()`` so the app can flip readiness (e.g. NOT_SERVING while its store is down).
    An app may also define ``fatal: asyncio.Event`` and ``exit_code: int``: when ``fatal`` is set, the
    app can no longer serve (e.g. a superseded broker): :func:`serve` shuts it down like a signal and
    exits the process with ``exit_code`` so a supervisor or orchestrator sees why.
    Instead of ``bind_health`` an app may define ``bind_readiness(set_ready)``: called with
    :meth:`RunningServer.set_ready`, which flips only the app's named services (readiness, e.g.
    NOT_SERVING while its store is down) and leaves the overall ``""`` status (liveness) alone.
    An app may also define ``ready() -> bool``: its readiness once started (the named services are set
    NOT_SERVING when it is false, e.g. a broker with no provider registered yet); it flips them later
    through ``bind_readiness``.
    An app may also define ``async close()``: called once the server has stopped and no handler runs any
    more, to release what handlers use (e.g. a Redis client: closed in ``stop()`` a handler still inside
    the grace period could open a new connection that nothing would close).
    An app may also define ``method_roles: Mapping[str, frozenset[Role]]`` (full method name such as
    ``/maka.broker.v1.CapabilityBrokerService/CallTool`` → roles admitted); methods not listed admit
    any authenticated caller. See :mod:`services.core.auth`.
    An app may also define ``server_options: Sequence[tuple[str, int]]``: gRPC server options added to the
    shared ones (e.g. the Interaction service's pending-call limits for bursts of Attach streams).
    """

    service_names: Sequence[str]

    def register(self, server: grpc.aio.Server) -> None:
        """Add the servicers to ``server``."""
        ...

    async def start(self) -> None:
        """Start background work (reapers, links). Called after the port is bound."""
        ...

    async def stop(self) -> None:
        """Drain: called after NOT_SERVING and before the server stops."""
        ...


def channel_options(settings: GrpcServerSettings) -> list[tuple[str, int]]:
    """gRPC options shared by servers and clients: message caps and keepalive."""
    return [
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        *KEEPALIVE_OPTIONS,
    ]


class CertificateReloader:
    """The server's certificate, key and client CA, re-read when their files change (renewals need no restart).

    gRPC asks :meth:`fetch` at every TLS handshake; it compares the files' ``stat`` (mtime, size, inode: one
    cheap syscall each) with those of the last configuration it loaded and only re-reads and re-parses when
    they moved, so connections opened after a renewal (cert-manager rewriting a mounted Secret, an operator
    replacing the files) present the new certificate and trust the new CA; open connections keep theirs. A
    pair that does not load (half written, key and certificate not matching yet) is logged once as
    ``tls_reload_failed`` and the last good configuration keeps serving until the files change again.
    """

    def __init__(self, cert: Path, key: Path, client_ca: Path | None) -> None:
        self._paths = (cert, key, *((client_ca,) if client_ca is not None else ()))
        self.require_client_auth = client_ca is not None
        self._loaded = self._stamp()
        self._failed: tuple[tuple[int, int, int], ...] | None = None
        self.initial = self._configuration()
        self.reloads = 0
        """Configurations loaded after the first (for tests and logs)."""

    def _stamp(self) -> tuple[tuple[int, int, int], ...]:
        stamps: list[tuple[int, int, int]] = []
        for path in self._paths:
            st = path.stat()
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        cert, key = self._paths[0].read_bytes(), self._paths[1].read_bytes()
        ca = self._paths[2].read_bytes() if self.require_client_auth else None
        _check_pair(cert, key)
        if ca is not None:
            _check_ca(ca)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetcher: a new configuration when the files changed and load, else ``None`` (keep the
        current one). Never raises: a failure would fail the handshake."""
        try:
            stamp = self._stamp()
        except OSError as error:
            self._failure(None, error)
            return None
        if stamp == self._loaded or stamp == self._failed:
            return None
        try:
            configuration = self._configuration()
        except (OSError, ValueError) as error:
            self._failure(stamp, error)
            return None
        self._loaded, self._failed = stamp, None
        self.reloads += 1
        log.info("tls_reloaded", extra={"cert_file": str(self._paths[0])})
        return configuration

    def _failure(self, stamp: tuple[tuple[int, int, int], ...] | None, error: Exception) -> None:
        if stamp is None or stamp != self._failed:
            log.warning("tls_reload_failed", extra={"cert_file": str(self._paths[0]), "error": type(error).__name__})
        self._failed = stamp

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self.initial,
            self.fetch,  # type: ignore[arg-type]  # grpc documents None as "keep the current one"; its stub does not
            require_client_authentication=self.require_client_auth,
        )


def _check_ca(ca: bytes) -> None:
    """Raise ValueError unless ``ca`` holds at least one PEM certificate (a half-written bundle does not)."""
    x509.load_pem_x509_certificates(ca)


def _check_pair(cert: bytes, key: bytes) -> None:
    """Raise ValueError unless ``cert`` parses and ``key`` is its private key (gRPC would only fail the
    handshake, so a half-written pair is caught here and the last good one kept)."""
    certificate = x509.load_pem_x509_certificate(cert)
    private = serialization.load_pem_private_key(key, password=None)
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if certificate.public_key().public_bytes(encoding, public) != private.public_key().public_bytes(encoding, public):
        raise ValueError("the TLS key does not match the certificate")


def _credentials(settings: GrpcServerSettings) -> grpc.ServerCredentials | None:
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        return None
    return CertificateReloader(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file).credentials()


class RunningServer:
    """A started server: its bound port, health servicer, and a way to stop it gracefully."""

    def __init__(self, server: grpc.aio.Server, health: HealthServicer, app: GrpcApp, port: int, grace: float):
        self.server = server
        self.health = health
        self.app = app
        self.port = port
        self.metrics_port: int | None = None
        self._grace = grace

    async def set_serving(self, serving: bool) -> None:
        """Mark the overall health and every service SERVING or NOT_SERVING."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.app.service_names):
            await self.health.set(name, status)

    async def set_ready(self, serving: bool) -> None:
        """Mark only the app's named services SERVING or NOT_SERVING (readiness); ``""`` stays as it is."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in self.app.service_names:
            await self.health.set(name, status)

    async def stop(self) -> None:
        """Named services NOT_SERVING → ``app.stop()`` → ``""`` NOT_SERVING → ``server.stop(grace)`` →
        ``app.close()`` (when it has one).

        The named services are readiness ("takes new work"): they turn NOT_SERVING at once, so balancers
        and clients with client-side health checking send nothing new. The overall ``""`` is liveness: it
        stays SERVING while ``app.stop()`` drains (a draining broker still serves its running calls'
        ``WatchCall``, docs/design.md#drain-vs-crash), and turns NOT_SERVING once the drain is over.
        """
        await self.set_ready(False)
        await self.app.stop()
        await self.set_serving(False)
        await self.server.stop(self._grace)
        close: Callable[[], Awaitable[None]] | None = getattr(self.app, "close", None)
        if close is not None:
            await close()
        tracing.shutdown()


async def start_server(
    app: GrpcApp,
    settings: GrpcServerSettings,
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> RunningServer:
    """Bind and start ``app`` on ``settings.listen``; returns once every service is SERVING.

    Raises ``RuntimeError`` when the address cannot be bound.
    """
    if settings.otel_exporter:
        tracing.configure(
            app.service_names[0] if app.service_names else "maka",
            settings.otel_exporter,
            endpoint=settings.otel_endpoint,
        )
    tokens = TokenTable.from_files(settings.auth_tokens_file, settings.auth_tokens_dir)
    method_roles: Mapping[str, frozenset[Role]] = getattr(app, "method_roles", {})
    chain = [ServerInterceptor(tokens, method_roles, verifier_from_settings(settings)), *interceptors]
    # so_reuseport is on by default in gRPC: a second stack would silently share our port and
    # steal half the connections (and begin a new Host epoch). Refuse to bind instead.
    options = [*channel_options(settings), ("grpc.so_reuseport", 0)]
    if settings.max_connection_age_seconds > 0:  # rebalance streams (docs/design.md#grpc-for-a-replicated-tier)
        options += [
            ("grpc.max_connection_age_ms", int(settings.max_connection_age_seconds * 1000)),
            ("grpc.max_connection_age_grace_ms", int(settings.max_connection_age_grace_seconds * 1000)),
        ]
    options += list(getattr(app, "server_options", ()))
    server = grpc.aio.server(options=options, interceptors=chain)
    app.register(server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        (*app.service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    credentials = _credentials(settings)
    try:
        if credentials is None:
            port = server.add_insecure_port(settings.listen)
        else:
            port = server.add_secure_port(settings.listen, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        raise RuntimeError(f"cannot bind {settings.listen}: address in use or not available")
    await server.start()
    running = RunningServer(server, health, app, port, settings.grace_seconds)
    bind_health = getattr(app, "bind_health", None)
    if bind_health is not None:
        bind_health(running.set_serving)
    bind_readiness = getattr(app, "bind_readiness", None)
    if bind_readiness is not None:
        bind_readiness(running.set_ready)
    await app.start()
    ready = getattr(app, "ready", None)
    if ready is None or ready():
        await running.set_serving(True)
    else:
        await running.set_ready(False)
        await running.health.set("", health_pb2.HealthCheckResponse.SERVING)
    if settings.metrics_listen:
        running.metrics_port = start_metrics_server(settings.metrics_listen)
    if settings.port_file is not None:
        _write_atomically(settings.port_file, str(port))
    log.info("serving", extra={"port": port, "services": list(app.service_names)})
    return running


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


async def serve(
    app: GrpcApp,
    settings: GrpcServerSettings,
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM (or its ``fatal`` event), then shut down gracefully.

    Raises ``SystemExit(app.exit_code)`` after the shutdown when ``fatal`` ended it.
    """
    running = await start_server(app, settings, interceptors=interceptors)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    fatal: asyncio.Event | None = getattr(app, "fatal", None)
    waiters = {asyncio.ensure_future(stop.wait())}
    if fatal is not None:
        waiters.add(asyncio.ensure_future(fatal.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    failed = fatal is not None and fatal.is_set() and not stop.is_set()
    log.info("shutting down", extra={"grace_seconds": settings.grace_seconds, "fatal": failed})
    await running.stop()
    if failed:
        raise SystemExit(int(getattr(app, "exit_code", 1)))
