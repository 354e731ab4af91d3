"""Both clients speak mutual TLS to a real service (the Interaction service in-process over real Redis,
serving with a server certificate and a client CA): the Python client with ``TlsOptions``, the
TypeScript client from ``MAKA_TLS_*``; without a client certificate they are refused. The Python client
re-reads a renewed CA and client certificate on its next call."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from maka_client import MakaError, SurfaceClient, TlsOptions
from services.core.serving import RunningServer, start_server
from services.interaction.main import build
from services.interaction.settings import Settings as InteractionSettings
from tests.helpers.certs import CertFiles, make_certs

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TS_ENTRY = ROOT / "clients" / "typescript" / "dist" / "src" / "index.js"
TS_PENDING = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    "const client = SurfaceClient.fromEnv(process.argv[1]);"
    "try { console.log(JSON.stringify(await client.pending())); }"
    "catch (error) { console.log(JSON.stringify({ code: error.code })); } finally { client.close(); }"
)


@pytest.fixture
async def tls_service(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[str, CertFiles]]:
    certs = make_certs(tmp_path)
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-clients",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    running: RunningServer = await start_server(await build(settings), settings)
    try:
        yield f"localhost:{running.port}", certs
    finally:
        await running.stop()


async def test_the_python_client_speaks_mutual_tls(tls_service: tuple[str, CertFiles]) -> None:
    target, certs = tls_service
    mutual = TlsOptions(ca_file=certs.ca, client_cert_file=certs.client_cert, client_key_file=certs.client_key)
    async with SurfaceClient(target, tls=mutual) as surface:
        assert await surface.pending() == []
    async with SurfaceClient(target, tls=TlsOptions(ca_file=certs.ca)) as surface:
        with pytest.raises(MakaError) as refused:
            await surface.pending(timeout=5)
    assert refused.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE


async def _ts_pending(target: str, env: dict[str, str]) -> object:
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        "--input-type=module",
        "-e",
        TS_PENDING,
        target,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_typescript_client_speaks_mutual_tls_from_the_environment(tls_service: tuple[str, CertFiles]) -> None:
    target, certs = tls_service
    ca = {"MAKA_TLS_CA_FILE": str(certs.ca)}
    mutual = {
        **ca,
        "MAKA_TLS_CLIENT_CERT_FILE": str(certs.client_cert),
        "MAKA_TLS_CLIENT_KEY_FILE": str(certs.client_key),
    }
    assert await _ts_pending(target, mutual) == []
    assert await _ts_pending(target, ca) == {"code": "UNAVAILABLE"}


def _install(source: Path, live: Path) -> None:
    """Replace ``live`` atomically, as a renewal written into a mounted Secret does."""
    staged = live.with_suffix(".new")
    shutil.copyfile(source, staged)
    os.replace(staged, live)


async def _tier(redis_url: str, port: int, certs: CertFiles) -> RunningServer:
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-clients",
        listen=f"127.0.0.1:{port}",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    return await start_server(await build(settings), settings)


async def test_the_python_client_uses_a_renewed_ca_and_client_certificate_without_a_restart(
    tmp_path: Path, redis_url: str
) -> None:
    old, new = make_certs(_made(tmp_path / "a")), make_certs(_made(tmp_path / "b"))
    live = _made(tmp_path / "live")
    files = {"ca": live / "ca.crt", "cert": live / "tls.crt", "key": live / "tls.key"}
    for name, source in {"ca": old.ca, "cert": old.client_cert, "key": old.client_key}.items():
        _install(source, files[name])
    running = await _tier(redis_url, 0, old)
    port = running.port
    tls = TlsOptions(ca_file=files["ca"], client_cert_file=files["cert"], client_key_file=files["key"])
    try:
        async with SurfaceClient(f"localhost:{port}", tls=tls) as surface:
            assert await surface.pending(timeout=5) == []
            # Renewed from a new CA on both sides: the tier (restarted, trusting only the new CA), the files.
            await running.stop()
            running = await _tier(redis_url, port, new)
            for name, source in {"key": new.client_key, "cert": new.client_cert, "ca": new.ca}.items():
                _install(source, files[name])

            assert await surface.pending(timeout=5) == [], "the same client's next call, on the renewed files"
        async with SurfaceClient(f"localhost:{port}", tls=TlsOptions(ca_file=old.ca)) as stale:
            with pytest.raises(MakaError) as refused:
                await stale.pending(timeout=5)
        assert refused.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE, "the old CA is no longer trusted"
    finally:
        await running.stop()


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True)
    return directory
