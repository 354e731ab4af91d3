"""TLS files are re-read when they change: a gRPC server's certificate, key and client CA, and a client channel's CA
and client certificate (``services.core.channels.ReloadingChannel``). A renewal needs no restart."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.core.channels import ReloadingChannel, open_channel
from services.core.serving import CertificateReloader, start_server
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from tests.helpers.certs import CertFiles, make_certs


class App:
    service_names: Sequence[str] = ("maka.test.Empty",)

    def register(self, server: grpc.aio.Server) -> None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def _issue(tmp_path: Path, name: str) -> CertFiles:
    directory = tmp_path / name
    directory.mkdir()
    return make_certs(directory)


def _install(source: Path, live: Path) -> None:
    """Replace ``live`` atomically, as a Secret volume update or ``mv`` of a renewed file does."""
    staged = live.with_suffix(".new")
    shutil.copyfile(source, staged)
    os.replace(staged, live)


async def _health(port: int, ca: Path) -> int:
    async with open_channel(f"localhost:{port}", tls=ClientTlsSettings(tls_ca_file=ca)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)  # type: ignore[attr-defined]
    return int(response.status)


async def test_a_renewed_certificate_from_a_new_ca_is_served_to_new_connections_without_a_restart(
    tmp_path: Path,
) -> None:
    old, new = _issue(tmp_path, "a"), _issue(tmp_path, "b")
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    _install(old.server_cert, cert)
    _install(old.server_key, key)
    running = await start_server(App(), GrpcServerSettings(listen="127.0.0.1:0", tls_cert_file=cert, tls_key_file=key))
    try:
        assert await _health(running.port, old.ca) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # before the renewal the new CA's clients fail
            await _health(running.port, new.ca)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        _install(new.server_key, key)
        _install(new.server_cert, cert)
        # a certificate only the new CA signed: the handshake of this new connection proves the reload
        assert await _health(running.port, new.ca) == health_pb2.HealthCheckResponse.SERVING
    finally:
        await running.stop()


def test_a_half_written_pair_keeps_the_last_good_one_and_is_logged_once_until_it_changes_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old, new = _issue(tmp_path, "a"), _issue(tmp_path, "b")
    live = tmp_path / "live"
    live.mkdir()
    cert, key, ca = live / "tls.crt", live / "tls.key", live / "ca.crt"
    for source, target in ((old.server_cert, cert), (old.server_key, key), (old.ca, ca)):
        _install(source, target)
    reloader = CertificateReloader(cert, key, ca)
    assert reloader.require_client_auth
    assert reloader.fetch() is None, "unchanged files: the current configuration stays"
    _install(new.server_cert, cert)  # the key is not renewed yet: a pair that does not match
    with caplog.at_level(logging.INFO, logger="maka.serving"):
        assert reloader.fetch() is None
        assert reloader.fetch() is None
        failed = [r for r in caplog.records if r.getMessage() == "tls_reload_failed"]
        assert len(failed) == 1, "one warning per change, not one per handshake"
        _install(new.server_key, key)
        ca.write_bytes(b"-----BEGIN CERT")  # and the CA bundle half written
        assert reloader.fetch() is None
        _install(new.ca, ca)
        assert reloader.fetch() is not None, "the complete new pair and CA load"
        assert reloader.fetch() is None
    assert reloader.reloads == 1
    assert [r.getMessage() for r in caplog.records].count("tls_reload_failed") == 2
    assert [r.getMessage() for r in caplog.records].count("tls_reloaded") == 1


def _client_files(tmp_path: Path, certs: CertFiles) -> ClientTlsSettings:
    """A client's CA and certificate as mounted files (``MAKA_TLS_CA_FILE`` ...), holding ``certs``'."""
    live = tmp_path / "client"
    live.mkdir()
    tls = ClientTlsSettings(
        tls_ca_file=live / "ca.crt", tls_client_cert_file=live / "tls.crt", tls_client_key_file=live / "tls.key"
    )
    _renew_client(tls, certs)
    return tls


def _renew_client(tls: ClientTlsSettings, certs: CertFiles) -> None:
    assert tls.tls_ca_file is not None
    assert tls.tls_client_cert_file is not None
    assert tls.tls_client_key_file is not None
    _install(certs.client_key, tls.tls_client_key_file)
    _install(certs.client_cert, tls.tls_client_cert_file)
    _install(certs.ca, tls.tls_ca_file)


def _mutual(port: int, certs: CertFiles) -> GrpcServerSettings:
    return GrpcServerSettings(
        listen=f"127.0.0.1:{port}",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.1,
    )


async def test_a_client_channel_trusts_a_renewed_ca_and_presents_a_renewed_client_certificate_without_a_restart(
    tmp_path: Path,
) -> None:
    old, new = _issue(tmp_path, "a"), _issue(tmp_path, "b")
    tls = _client_files(tmp_path, old)
    running = await start_server(App(), _mutual(0, old))
    port = running.port
    channel = open_channel(f"localhost:{port}", tls=tls)
    read_once = grpc.aio.secure_channel(  # what a client that reads its files once holds
        f"localhost:{port}",
        grpc.ssl_channel_credentials(old.ca.read_bytes(), old.client_key.read_bytes(), old.client_cert.read_bytes()),
    )
    stub = health_pb2_grpc.HealthStub(channel)  # made once, as the broker's and the provider's are
    request = health_pb2.HealthCheckRequest(service="")
    try:
        assert (await stub.Check(request, timeout=5)).status == health_pb2.HealthCheckResponse.SERVING  # type: ignore[attr-defined]
        # Everything renewed from a new CA: the server (mutual TLS, trusting only the new CA) and the client's files.
        await running.stop()
        running = await start_server(App(), _mutual(port, new))
        _renew_client(tls, new)

        response = await stub.Check(request, timeout=5)  # type: ignore[attr-defined]  # the same stub's next call

        assert response.status == health_pb2.HealthCheckResponse.SERVING
        assert isinstance(channel, ReloadingChannel)
        assert channel.reloads == 1
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await health_pb2_grpc.HealthStub(read_once).Check(request, timeout=5)  # type: ignore[attr-defined]
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, "the files read once are no longer trusted"
    finally:
        await read_once.close()
        await channel.close()
        await running.stop()


async def test_a_half_renewed_client_pair_keeps_the_current_channel_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old, new = _issue(tmp_path, "a"), _issue(tmp_path, "b")
    tls = _client_files(tmp_path, old)
    channel = open_channel("localhost:1", tls=tls)
    assert isinstance(channel, ReloadingChannel)
    assert tls.tls_ca_file is not None
    assert tls.tls_client_cert_file is not None
    assert tls.tls_client_key_file is not None
    try:
        first = channel.current()
        assert channel.current() is first, "unchanged files: the same channel"
        _install(new.client_cert, tls.tls_client_cert_file)  # the key not renewed yet
        with caplog.at_level(logging.INFO, logger="maka.channels"):
            assert channel.current() is first
            assert channel.current() is first
            assert [r.getMessage() for r in caplog.records].count("tls_client_reload_failed") == 1
            _install(new.client_key, tls.tls_client_key_file)
            tls.tls_ca_file.write_bytes(b"-----BEGIN CERT")  # and the CA bundle half written
            assert channel.current() is first
            _install(new.ca, tls.tls_ca_file)
            renewed = channel.current()
        assert renewed is not first
        assert channel.reloads == 1
        assert "tls_client_reloaded" in [r.getMessage() for r in caplog.records]
    finally:
        await channel.close()
