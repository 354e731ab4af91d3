"""The login limit of the web surface counts failures per local user on loopback (``surfaces/web/peer.py``): the
uid owning the client's socket, read from the kernel's socket table. Another local user (made with ``useradd``,
probing with ``curl`` through ``runuser``) who spends their bucket with wrong tokens from ``127.0.0.1`` never
locks the owner out: the owner's token still signs in, the other user's attempts stay ``429``."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from surfaces.web.peer import login_client, peer_uid
from surfaces.web.security import COOKIE_NAME
from tests.helpers.other_user import http_curl, other_user, run
from tests.surfaces.web.stack import WebStack, running_stack

TOKEN = "t0ken-secret"


@pytest.fixture
async def stack(redis_url: str) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


@pytest.fixture(params=[(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")], ids=["ipv4", "ipv6"])
def connection(request: pytest.FixtureRequest) -> Iterator[tuple[tuple[str, int], tuple[str, int]]]:
    """A real loopback TCP connection: ``(client end, server end)``."""
    family, host = request.param
    with socket.socket(family) as server:
        server.bind((host, 0))
        server.listen()
        with socket.create_connection(server.getsockname()[:2]) as client:
            accepted, _ = server.accept()
            with accepted:
                yield client.getsockname()[:2], server.getsockname()[:2]


def test_a_loopback_connection_is_owned_by_the_uid_of_the_clients_socket(
    connection: tuple[tuple[str, int], tuple[str, int]],
) -> None:
    client, server = connection
    assert peer_uid(client, server) == os.getuid()
    assert login_client({"client": client, "server": server}) == f"uid:{os.getuid()}"


def test_a_client_with_no_socket_on_this_machine_is_counted_by_its_address(
    connection: tuple[tuple[str, int], tuple[str, int]],
) -> None:
    _client, server = connection
    assert peer_uid(("203.0.113.9", 40000), server) is None  # a proxy's forwarded address, another machine
    assert login_client({"client": ("203.0.113.9", 40000), "server": server}) == "203.0.113.9"
    assert login_client({"client": ("not-an-address", 1), "server": server}) == "not-an-address"
    assert login_client({"client": None, "server": server}) == ""


async def test_another_local_user_spending_the_login_limit_never_locks_the_owner_out(stack: WebStack) -> None:
    user = other_user()
    app, running = await stack.web(sessions=["s1"], token=TOKEN, web_login_attempts_per_minute=2)
    origin = {"Origin": running.url}
    wrong = http_curl(f"{running.url}/login", method="POST", headers=origin, body="token=nope")
    try:
        spent = [(await run(wrong, user=user)).out for _ in range(3)]
        guessed = await run(
            http_curl(f"{running.url}/login", method="POST", headers=origin, body=f"token={TOKEN}"), user=user
        )
        queried = await run(http_curl(f"{running.url}/?token={TOKEN}"), user=user)
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as owner:
            signed_in = await owner.post("/login", data={"token": TOKEN}, headers=origin)
            assert (await owner.get("/api/session")).status_code == 200  # the cookie works
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as owner:
            mistyped = await owner.post("/login", data={"token": "typo"}, headers=origin)
            by_link = await owner.get(f"/?token={TOKEN}")
        still = (await run(wrong, user=user)).out
    finally:
        await running.stop()
        await app.close()
    assert spent == ["401", "401", "429"]
    assert guessed.out == "429"  # an empty bucket answers before the token is compared
    assert queried.out == "429"
    assert signed_in.status_code == 303
    assert COOKIE_NAME in signed_in.cookies
    assert mistyped.status_code == 401  # the owner's own bucket, untouched by the other user
    assert by_link.status_code == 303
    assert COOKIE_NAME in by_link.cookies
    assert still == "429"


async def test_wrong_query_tokens_spend_the_same_limit_as_wrong_logins(stack: WebStack) -> None:
    app, running = await stack.web(sessions=["s1"], token=TOKEN, web_login_attempts_per_minute=2)
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            guesses = [await client.get("/?token=nope") for _ in range(2)]
            limited = await client.get(f"/?token={TOKEN}")
            login = await client.post("/login", data={"token": TOKEN}, headers={"Origin": running.url})
    finally:
        await running.stop()
        await app.close()
    assert [(guess.status_code, guess.headers["location"]) for guess in guesses] == [(303, "/login")] * 2
    assert limited.status_code == 429
    assert limited.json()["error"]["reason"] == "RATE_LIMITED"
    assert int(limited.headers["Retry-After"]) >= 1
    assert COOKIE_NAME not in limited.cookies
    assert login.status_code == 429
