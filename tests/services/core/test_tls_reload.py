"""A gRPC server's certificate, key and client CA are re-read when their files change: a renewal needs no restart."""

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

from services.core.channels import open_channel
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
