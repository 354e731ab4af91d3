"""The web page's OpenID Connect pieces without a browser: the login page with and without the surface token,
and the encrypted cookies (a forged, expired, re-purposed or other-key cookie opens to nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from surfaces.web.main import build, start_web
from surfaces.web.oidc import SESSION_COOKIE, SealedCookies
from surfaces.web.settings import WebSettings
from tests.helpers.oidc import Provider, oidc_provider
from tests.surfaces.web.stack import WebStack, running_stack


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@pytest.fixture
async def stack(redis_url: str) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


async def _web(stack: WebStack, exits: AsyncExitStack, **fields: Any) -> str:
    settings = WebSettings(interaction_target=stack.target, web_listen="127.0.0.1:0", **fields)
    app = await build(settings)
    running = await start_web(app, settings)
    exits.push_async_callback(app.close)
    exits.push_async_callback(running.stop)
    return running.url


async def test_with_only_oidc_the_login_page_sends_people_to_the_issuer_and_an_empty_token_logs_nobody_in(
    stack: WebStack, provider: Provider
) -> None:
    async with AsyncExitStack() as exits, httpx.AsyncClient(timeout=10) as web:
        url = await _web(stack, exits, oidc_issuer=provider.issuer, oidc_client_id="maka-web")
        assert (await web.get(f"{url}/api/pending")).status_code == 401
        login = await web.get(f"{url}/login")  # a page that goes on to /oidc/login with its fragment (login.js)
        assert login.status_code == 200
        assert '<body class="login-page" data-oidc-only>' in login.text
        assert '<script type="module" src="/static/js/login.js"></script>' in login.text
        assert 'class="login-token" hidden' in login.text
        started = await web.get(f"{url}/oidc/login")
        assert started.headers["location"].startswith(f"{provider.issuer}/oauth2/authorize?")
        empty = await web.post(f"{url}/login", data={"token": ""}, headers={"Origin": url})
        assert SESSION_COOKIE not in empty.cookies
        assert "maka_surface" not in empty.cookies
        assert (await web.get(f"{url}/api/pending", headers={"Authorization": "Bearer x"})).status_code == 401


async def test_with_the_surface_token_too_the_login_page_offers_both(stack: WebStack, provider: Provider) -> None:
    async with AsyncExitStack() as exits, httpx.AsyncClient(timeout=10) as web:
        url = await _web(
            stack,
            exits,
            oidc_issuer=provider.issuer,
            oidc_client_id="maka-web",
            surface_token=SecretStr("surface-token-both"),
        )
        page = await web.get(f"{url}/login")
        assert page.status_code == 200
        assert '<p class="login-oidc">' in page.text
        assert 'name="token"' in page.text
        signed = await web.post(f"{url}/login", data={"token": "surface-token-both"}, headers={"Origin": url})
        assert signed.status_code == 303
        cookie = signed.cookies["maka_surface"]
        session = await web.get(f"{url}/api/session", headers={"Cookie": f"maka_surface={cookie}"})
        assert session.status_code == 200
        assert session.json()["person"] is None


def test_a_sealed_cookie_opens_only_for_its_purpose_its_key_and_before_it_expires(tmp_path: Path) -> None:
    cookies = SealedCookies(b"k" * 32)
    value = cookies.seal("session", {"name": "alice@example.com", "sid": "x"}, 60)
    opened = cookies.open("session", value)
    assert opened is not None
    assert opened["name"] == "alice@example.com"
    assert "alice" not in value
    assert cookies.open("pending", value) is None
    assert SealedCookies(b"o" * 32).open("session", value) is None
    assert cookies.open("session", cookies.seal("session", {"name": "a", "sid": "x"}, -1)) is None
    tampered = value[:-4] + ("AAAA" if not value.endswith("AAAA") else "BBBB")
    assert cookies.open("session", tampered) is None
    assert cookies.open("session", "not-a-jwe") is None
