"""The web surface as N replicas without sticky sessions, behind a real TLS-terminating nginx.

Every replica derives its CSRF token from the shared secret file, so a token handed out by one
replica is accepted by the others; behind a TLS-terminating proxy the page trusts the proxy's
``X-Forwarded-Proto`` (``MAKA_WEB_FORWARDED_ALLOW_IPS``) or a configured public origin, so the
browser's ``Origin: https://...`` matches and cookies get ``Secure``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from surfaces.web.main import RunningWeb, build, start_web
from surfaces.web.security import COOKIE_NAME, CSRF_HEADER
from surfaces.web.settings import WebSettings
from tests.helpers.certs import CertFiles, make_certs
from tests.helpers.nginx import Nginx, free_port
from tests.helpers.tokens import write_secret_file
from tests.surfaces.web.stack import WebStack, running_stack, text_form

TOKEN = "surface-token-for-replicas"


@pytest.fixture
async def stack(redis_url: str) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


@dataclass
class Replicas:
    urls: list[str]


async def start_replicas(
    stack: WebStack, exit_stack: AsyncExitStack, secret_files: list[Path | None], **extra: str
) -> Replicas:
    urls = []
    for secret_file in secret_files:
        settings = WebSettings(
            interaction_target=stack.target,
            web_listen="127.0.0.1:0",
            sessions=["s1"],
            surface_token=SecretStr(TOKEN),
            web_secret_file=secret_file,
            **extra,  # type: ignore[arg-type]
        )
        app = await build(settings)
        running: RunningWeb = await start_web(app, settings)
        exit_stack.push_async_callback(app.close)
        exit_stack.push_async_callback(running.stop)
        urls.append(running.url)
    return Replicas(urls=urls)


async def get_interaction(stack: WebStack, interaction_id: str) -> interaction_pb2.Interaction:
    stub = interaction_service_pb2_grpc.InteractionServiceStub(stack.channel)
    response = await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id))
    return response.interaction


def answer_body(submission_id: str) -> dict[str, object]:
    return {"session_id": "s1", "submission_id": submission_id, "action": "accept", "values": {"target": "eu-1"}}


async def login(client: httpx.AsyncClient) -> str:
    """Log in with the surface token; returns the CSRF token this replica hands out."""
    response = await client.post("/login", data={"token": TOKEN}, headers={"Origin": str(client.base_url).rstrip("/")})
    assert response.status_code == 303, response.text
    session = await client.get("/api/session")
    assert session.status_code == 200, session.text
    csrf: str = session.json()["csrf"]
    return csrf


async def test_a_csrf_token_from_one_replica_is_accepted_by_another_with_the_same_secret(
    stack: WebStack, tmp_path: Path
) -> None:
    shared = write_secret_file(tmp_path / "web-secret")
    async with AsyncExitStack() as exit_stack:
        replicas = await start_replicas(stack, exit_stack, [shared, shared])
        ix = await stack.link.open(text_form("which region?"), session_id="s1")
        async with (
            httpx.AsyncClient(base_url=replicas.urls[0], timeout=10) as first,
            httpx.AsyncClient(base_url=replicas.urls[1], timeout=10) as second,
        ):
            csrf = await login(first)
            assert csrf == await login(second), "replicas with one secret hand out the same token"
            response = await second.post(
                f"/api/interactions/{ix.interaction_id}/answer",
                json=answer_body("sub-1"),
                headers={CSRF_HEADER: csrf, "Origin": replicas.urls[1]},
            )
        assert response.status_code == 200, response.text
        assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_ANSWERED


async def test_replicas_with_different_secrets_refuse_each_others_token_and_keep_the_form(
    stack: WebStack, tmp_path: Path
) -> None:
    async with AsyncExitStack() as exit_stack:
        replicas = await start_replicas(
            stack, exit_stack, [write_secret_file(tmp_path / "a"), write_secret_file(tmp_path / "b")]
        )
        ix = await stack.link.open(text_form("which region?"), session_id="s1")
        async with (
            httpx.AsyncClient(base_url=replicas.urls[0], timeout=10) as first,
            httpx.AsyncClient(base_url=replicas.urls[1], timeout=10) as second,
        ):
            csrf = await login(first)
            await login(second)
            response = await second.post(
                f"/api/interactions/{ix.interaction_id}/answer",
                json=answer_body("sub-1"),
                headers={CSRF_HEADER: csrf, "Origin": replicas.urls[1]},
            )
        assert response.status_code == 403
        assert response.json()["error"]["reason"] == "CSRF_REJECTED"
        assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


async def tls_proxy(tmp_path: Path, certs: CertFiles, upstreams: list[str], port: int) -> tuple[Nginx, str]:
    servers = "\n".join(f"        server {url.removeprefix('http://')};" for url in upstreams)
    body = f"""
    upstream maka_web {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {certs.server_cert};
        ssl_certificate_key {certs.server_key};
        location / {{
            proxy_pass http://maka_web;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
"""
    nginx = Nginx(tmp_path / "nginx", body, port)
    await nginx.start()
    return nginx, f"https://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "trust",
    [{"web_forwarded_allow_ips": "127.0.0.1"}, {"web_public_origin": "https://127.0.0.1:{port}"}],
    ids=["forwarded-proto", "public-origin"],
)
async def test_an_answer_through_a_tls_terminating_proxy_to_two_replicas_is_accepted(
    stack: WebStack, tmp_path: Path, trust: dict[str, str]
) -> None:
    certs = make_certs(mkdir(tmp_path / "certs"))
    shared = write_secret_file(tmp_path / "web-secret")
    port = free_port()
    settings_extra = {key: value.format(port=port) for key, value in trust.items()}
    async with AsyncExitStack() as exit_stack:
        replicas = await start_replicas(stack, exit_stack, [shared, shared], **settings_extra)
        nginx, public = await tls_proxy(tmp_path, certs, replicas.urls, port)
        exit_stack.push_async_callback(nginx.stop)
        ix = await stack.link.open(text_form("which region?"), session_id="s1")
        async with httpx.AsyncClient(base_url=public, timeout=10, verify=trusting(certs)) as browser:
            login_response = await browser.post("/login", data={"token": TOKEN}, headers={"Origin": public})
            assert login_response.status_code == 303, login_response.text
            if "web_forwarded_allow_ips" in trust:
                assert "secure" in login_response.headers["set-cookie"].lower(), "the cookie knows it rides on TLS"
            assert browser.cookies.get(COOKIE_NAME)
            # Two requests in a row reach both upstreams (round robin): the token works on either.
            csrfs = {(await browser.get("/api/session")).json()["csrf"] for _ in range(2)}
            assert len(csrfs) == 1
            response = await browser.post(
                f"/api/interactions/{ix.interaction_id}/answer",
                json=answer_body("sub-1"),
                headers={CSRF_HEADER: csrfs.pop(), "Origin": public},
            )
        assert response.status_code == 200, response.text
        assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_ANSWERED


async def test_without_proxy_trust_an_https_origin_is_refused_as_cross_origin(stack: WebStack, tmp_path: Path) -> None:
    certs = make_certs(mkdir(tmp_path / "certs"))
    shared = write_secret_file(tmp_path / "web-secret")
    async with AsyncExitStack() as exit_stack:
        replicas = await start_replicas(stack, exit_stack, [shared])
        nginx, public = await tls_proxy(tmp_path, certs, replicas.urls, free_port())
        exit_stack.push_async_callback(nginx.stop)
        ix = await stack.link.open(text_form("which region?"), session_id="s1")
        async with httpx.AsyncClient(base_url=public, timeout=10, verify=trusting(certs)) as browser:
            response = await browser.post("/login", data={"token": TOKEN}, headers={"Origin": public})
        assert response.status_code == 403
        assert response.json()["error"]["reason"] == "CSRF_REJECTED"
        assert (await get_interaction(stack, ix.interaction_id)).state == interaction_pb2.INTERACTION_STATE_PENDING


def test_a_short_or_missing_secret_file_is_one_clear_error(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("too-short")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        WebSettings(web_secret_file=short).shared_secret()
    with pytest.raises(ValueError, match="MAKA_WEB_SECRET_FILE"):
        WebSettings(web_secret_file=tmp_path / "missing").shared_secret()
    with pytest.raises(ValueError, match="scheme://host"):
        WebSettings(web_public_origin="maka.example.com")


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def trusting(certs: CertFiles) -> ssl.SSLContext:
    """A client TLS context that trusts the test CA (the proxy's certificate)."""
    return ssl.create_default_context(cafile=str(certs.ca))
