"""Both clients speak mutual TLS to a real service (the Interaction service in-process over real Redis,
serving with a server certificate and a client CA): the Python client with ``TlsOptions``, the
TypeScript client from ``MAKA_TLS_*``; without a client certificate they are refused."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from maka_client import MakaError, SurfaceClient, TlsOptions
from services.interaction.settings import Settings as InteractionSettings
from tests.helpers.certs import CertFiles, make_certs
from tests.helpers.clients import serving_interaction, ts_pending


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
    async with serving_interaction(settings) as running:
        yield f"localhost:{running.port}", certs


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
    return await ts_pending(target, {**os.environ, **env})


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
