"""A sign-in with the surface token lasts (surfaces/web/security.py, surfaces/web/sign_in.py): a persistent login
cookie with a bounded, server-enforced lifetime, signed with the kept session key when one is set (``maka up``), so
it outlives a new token; and a sign-in page that names the token the person actually has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
from pydantic import SecretStr
from starlette.requests import Request

from surfaces.common.interactions import Interactions
from surfaces.web.app import create_app
from surfaces.web.security import COOKIE_NAME, Guard, LoginLimiter
from surfaces.web.settings import WebSettings

ORIGIN = "http://127.0.0.1:8765"
KEY = b"k" * 44


@asynccontextmanager
async def _page(token: str, **fields: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The web app (no Interaction service behind it: these routes never call it) and a client of it."""
    settings = WebSettings(surface_token=SecretStr(token), web_listen="127.0.0.1:8765", **fields)
    app = create_app(settings, cast(Interactions, object()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
        yield client


async def _signed_in_cookie(client: httpx.AsyncClient, token: str) -> str:
    login = await client.get(f"/?token={token}")
    assert login.status_code == 303
    return login.cookies[COOKIE_NAME]


def _request(cookie: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", cookie.encode())]})


async def test_the_login_cookie_is_persistent_for_the_configured_time_httponly_and_strict() -> None:
    async with _page("t0ken", web_session_seconds=3600) as client:
        login = await client.get("/?token=t0ken")
        header = login.headers["set-cookie"]
        assert "Max-Age=3600" in header, header
        assert "HttpOnly" in header
        assert "samesite=strict" in header.lower()
        assert "t0ken" not in header


async def test_with_a_kept_session_key_a_sign_in_outlives_a_new_token(tmp_path: Path) -> None:
    key = tmp_path / "web-session.key"
    key.write_bytes(KEY)
    async with _page("first-t0ken", web_session_key_file=key, web_secret_file=key) as client:
        cookie = await _signed_in_cookie(client, "first-t0ken")
        csrf = (await client.get("/api/session")).json()["csrf"]
    async with _page("second-t0ken", web_session_key_file=key, web_secret_file=key) as client:
        client.cookies.set(COOKIE_NAME, cookie)
        session = await client.get("/api/session")
        assert session.status_code == 200, "the restarted page accepts the sign-in the kept key signed"
        assert session.json()["csrf"] == csrf, "and hands out the same CSRF token, so an open tab can answer"
    key.write_bytes(b"n" * 44)
    async with _page("second-t0ken", web_session_key_file=key) as client:
        client.cookies.set(COOKIE_NAME, cookie)
        assert (await client.get("/api/session")).status_code == 401, "a new key signs every browser out"


async def test_without_a_session_key_a_new_token_signs_the_browser_out() -> None:
    async with _page("first-t0ken") as client:
        cookie = await _signed_in_cookie(client, "first-t0ken")
        assert (await client.get("/api/session")).status_code == 200
    async with _page("second-t0ken") as client:
        client.cookies.set(COOKIE_NAME, cookie)
        assert (await client.get("/api/session")).status_code == 401


def test_the_server_refuses_an_expired_or_forged_login_cookie_whatever_the_browser_keeps() -> None:
    now = [1_000_000.0]
    guard = Guard("t0ken", session_seconds=600, limiter=LoginLimiter(10), clock=lambda: now[0])
    cookie = guard.cookie_value()
    assert guard.has_token_cookie(_request(f"{COOKIE_NAME}={cookie}"))
    expires, _, mac = cookie.partition(".")
    later = str(int(expires) + 600)
    assert not guard.has_token_cookie(_request(f"{COOKIE_NAME}={later}.{mac}")), "a moved expiry breaks the MAC"
    now[0] += 601
    assert not guard.has_token_cookie(_request(f"{COOKIE_NAME}={cookie}")), "expired"
    shorter = Guard("t0ken", session_seconds=60, limiter=LoginLimiter(10), clock=lambda: 1_000_000.0)
    assert not shorter.has_token_cookie(_request(f"{COOKIE_NAME}={cookie}")), "longer than a sign-in now lasts"


async def test_under_maka_up_the_sign_in_page_names_the_owner_token_and_its_file(tmp_path: Path) -> None:
    tokens = tmp_path / "state" / "tokens.json"
    async with _page("t0ken", web_owner_tokens_file=tokens) as client:
        login = (await client.get("/login")).text
        assert str(tokens) in login
        assert "owner token" in login
        assert "ready line" in login
        assert "MAKA_SURFACE_TOKEN" not in login
        assert (await client.get("/?token=t0ken")).status_code == 303
        hint = (await client.get("/api/session")).json()["sign_in"]
        assert hint == {"token": "owner", "tokens_file": str(tokens)}
    async with _page("t0ken") as client:
        assert "MAKA_SURFACE_TOKEN" in (await client.get("/login")).text, "run by hand: the surface token"
        assert (await client.get("/?token=t0ken")).status_code == 303
        assert (await client.get("/api/session")).json()["sign_in"] == {"token": "surface", "tokens_file": None}
