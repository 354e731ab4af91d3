"""TLS and mutual TLS on the real services (in-process, real Redis): the Interaction service serves with
a server certificate and a client CA (``MAKA_TLS_CERT_FILE``/``MAKA_TLS_KEY_FILE``/``MAKA_TLS_CLIENT_CA_FILE``),
refuses plaintext and certificate-less clients, and the real broker's HostLink reaches it with its client
certificate (``MAKA_TLS_CA_FILE``/``MAKA_TLS_CLIENT_CERT_FILE``/``MAKA_TLS_CLIENT_KEY_FILE``), and again with
renewed ones, without a restart, once those files change. Test
certificates are generated with ``cryptography``. Source: docs/design.md#tokens.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.interaction.v1 import interaction_service_pb2
from services.broker.main import BrokerApp
from services.broker.settings import Settings as BrokerSettings
from services.core.channels import open_channel
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings
from services.interaction.main import InteractionApp, build
from services.interaction.settings import Settings as InteractionSettings
from tests.helpers.certs import CertFiles, make_certs
from tests.helpers.waiting import eventually
from tests.reliability.harness import interaction_stub

ROOT = Path(__file__).resolve().parents[2]


async def test_the_real_services_speak_mutual_tls_and_refuse_clients_without_a_certificate(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    certs = make_certs(tmp_path)
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    app = await build(settings)
    assert isinstance(app, InteractionApp)
    running = await start_server(app, settings)
    target = f"localhost:{running.port}"
    try:
        with_cert = ClientTlsSettings(
            tls_ca_file=certs.ca, tls_client_cert_file=certs.client_cert, tls_client_key_file=certs.client_key
        )
        for tls in (None, ClientTlsSettings(tls_ca_file=certs.ca)):  # plaintext; TLS without a client certificate
            async with open_channel(target, tls=tls or ClientTlsSettings(tls_ca_file=None)) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await interaction_stub(channel).ListPending(interaction_service_pb2.ListPendingRequest(), timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        async with open_channel(target, tls=with_cert) as channel:
            listed = await interaction_stub(channel).ListPending(
                interaction_service_pb2.ListPendingRequest(), timeout=5
            )
        assert list(listed.pending) == []
        # The real broker's HostLink dials it with its client certificate (MAKA_TLS_* configuration).
        monkeypatch.setenv("MAKA_TLS_CA_FILE", str(certs.ca))
        monkeypatch.setenv("MAKA_TLS_CLIENT_CERT_FILE", str(certs.client_cert))
        monkeypatch.setenv("MAKA_TLS_CLIENT_KEY_FILE", str(certs.client_key))
        broker = BrokerApp(BrokerSettings(interaction_target=target, host_id="tls", grace_seconds=0.5))
        await broker.start()
        try:
            await broker.host_link.wait_connected(timeout=15)
            assert broker.host_link.epoch is not None
            assert broker.host_link.epoch >= 1
        finally:
            await broker.stop()
    finally:
        await running.stop()


def _install(source: Path, live: Path) -> None:
    """Replace ``live`` atomically, as a renewal written into a mounted Secret does."""
    staged = live.with_suffix(".new")
    shutil.copyfile(source, staged)
    os.replace(staged, live)


async def _mutual_tier(redis_url: str, port: int, certs: CertFiles) -> RunningServer:
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-renewed",
        listen=f"127.0.0.1:{port}",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    return await start_server(await build(settings), settings)


async def test_the_real_brokers_host_link_reconnects_with_its_renewed_certificate_without_a_restart(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = make_certs(_directory(tmp_path / "a")), make_certs(_directory(tmp_path / "b"))
    live = _directory(tmp_path / "live")
    ca, cert, key = live / "ca.crt", live / "tls.crt", live / "tls.key"
    for source, target in ((old.ca, ca), (old.client_cert, cert), (old.client_key, key)):
        _install(source, target)
    running = await _mutual_tier(redis_url, 0, old)
    port = running.port
    monkeypatch.setenv("MAKA_TLS_CA_FILE", str(ca))
    monkeypatch.setenv("MAKA_TLS_CLIENT_CERT_FILE", str(cert))
    monkeypatch.setenv("MAKA_TLS_CLIENT_KEY_FILE", str(key))
    broker = BrokerApp(BrokerSettings(interaction_target=f"localhost:{port}", host_id="tls-renewed", grace_seconds=0.5))
    await broker.start()
    try:
        await broker.host_link.wait_connected(timeout=15)
        # Renewed from a new CA: the tier comes back trusting only the new CA, the broker's files are swapped.
        await running.stop()
        await eventually(lambda: not broker.host_link.connected, timeout=15, what="the link to drop")
        for source, target in ((new.client_key, key), (new.client_cert, cert), (new.ca, ca)):
            _install(source, target)
        running = await _mutual_tier(redis_url, port, new)

        await broker.host_link.wait_connected(timeout=15)

        assert broker.host_link.connects == 2, "the same broker process, reconnected on the renewed files"
        assert not broker.host_link.stale
    finally:
        await broker.stop()
        await running.stop()


def _directory(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


async def test_the_health_probe_checks_a_mutual_tls_service_with_its_client_certificate(
    tmp_path: Path, redis_url: str
) -> None:
    certs = make_certs(tmp_path)
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-probe",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    app = await build(settings)
    running = await start_server(app, settings)
    target = f"localhost:{running.port}"
    probe = [sys.executable, "-m", "services.core.healthcheck", target]
    mtls = ["--ca", str(certs.ca), "--cert", str(certs.client_cert), "--key", str(certs.client_key)]
    try:
        plaintext = await asyncio.to_thread(subprocess.run, probe, check=False, timeout=30, cwd=ROOT)
        no_client_cert = await asyncio.to_thread(
            subprocess.run, [*probe, "--ca", str(certs.ca)], check=False, timeout=30, cwd=ROOT
        )
        with_cert = await asyncio.to_thread(subprocess.run, [*probe, *mtls], check=False, timeout=30, cwd=ROOT)
        missing = await asyncio.to_thread(
            subprocess.run,
            [*probe, "--ca", str(tmp_path / "absent.pem")],
            check=False,
            timeout=30,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        await running.stop()
    assert (plaintext.returncode, no_client_cert.returncode, with_cert.returncode) == (1, 1, 0)
    assert missing.returncode == 1
    assert "absent.pem" in missing.stderr
    assert "Traceback" not in missing.stderr
