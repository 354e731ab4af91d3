"""The issuer's JWKS (services/core/jwt_auth.py ``IssuerKeys``) with a real OpenID provider behind a real HTTP proxy
whose JWKS fails or hangs on command (tests/helpers/issuer_proxy.py), counted at the proxy: at most one fetch per
interval whatever its outcome, one fetch at a time, and a token whose key is cached never waits for one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from services.core import jwt_auth
from services.core.backoff import Backoff
from services.core.jwt_auth import MIN_REFRESH_SECONDS, IssuerKeys, JwtRefused, JwtVerifier, OidcConfig, Refusal
from services.core.serving import start_server
from surfaces.mcp.settings import McpSettings
from tests.helpers.issuer_proxy import IssuerProxy, issuer_proxy
from tests.helpers.oidc import ALICE, Provider, id_token, oidc_provider
from tests.helpers.waiting import eventually
from tests.services.core.test_jwt_auth import AUDIENCE, App, _forged, _refusal, _settings, _whoami
from tests.surfaces.mcp.stack import serving_door

UNREACHABLE = (grpc.StatusCode.UNAUTHENTICATED, "bearer token refused: issuer unreachable")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE]) as running:
        yield running


@pytest.fixture
async def proxied(provider: Provider) -> AsyncIterator[tuple[IssuerProxy, Provider]]:
    async with issuer_proxy(provider) as pair:
        yield pair


@pytest.fixture
def refetch_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No refetch interval (so only single flight keeps a second fetch from starting) and a fetch timeout longer
    than any test (so a held fetch is outstanding until the proxy lets it go)."""
    monkeypatch.setattr(jwt_auth, "MIN_REFRESH_SECONDS", 0.0)
    monkeypatch.setattr(jwt_auth, "FETCH_TIMEOUT_SECONDS", 120.0)


async def _token(via: Provider) -> str:
    return await asyncio.to_thread(id_token, via, ALICE, AUDIENCE)


async def _door_status(http: httpx.AsyncClient, door: str, token: str) -> int:
    response = await http.post(f"{door}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    return response.status_code


async def test_made_up_kids_while_the_jwks_fails_make_one_jwks_request_per_interval(
    tmp_path: Path, proxied: tuple[IssuerProxy, Provider]
) -> None:
    proxy, via = proxied
    good = await _token(via)
    proxy.fail()
    running = await start_server(App(), _settings(tmp_path, proxy.issuer))
    try:
        for index in range(20):
            assert await _refusal(running.port, _forged(via, f"made-up-{index}")) == UNREACHABLE
        assert await _refusal(running.port, good) == UNREACHABLE  # no key set yet: nothing to verify with
    finally:
        await running.stop()
    assert proxy.jwks_requests == 1


async def test_a_failing_jwks_is_fetched_again_only_after_the_interval_then_after_a_growing_backoff(
    proxied: tuple[IssuerProxy, Provider],
) -> None:
    proxy, via = proxied
    good = await _token(via)
    now = [1000.0]
    keys = IssuerKeys(
        proxy.issuer, clock=lambda: now[0], backoff=Backoff(initial=MIN_REFRESH_SECONDS, maximum=300, jitter=False)
    )
    verifier = JwtVerifier(OidcConfig(issuer=proxy.issuer, audiences=frozenset({AUDIENCE})), keys=keys)

    async def refusal(token: str) -> Refusal:
        with pytest.raises(JwtRefused) as caught:
            await verifier.claims(token)
        return caught.value.refusal

    proxy.fail()
    expected = [(0, 1), (MIN_REFRESH_SECONDS - 1, 1), (1, 2), (MIN_REFRESH_SECONDS, 2), (MIN_REFRESH_SECONDS, 3)]
    for step, (advance, requests) in enumerate(expected):  # failures wait 30 s, then 60 s (the backoff doubles)
        now[0] += advance
        assert await refusal(_forged(via, f"made-up-{step}")) is Refusal.ISSUER_UNREACHABLE
        assert proxy.jwks_requests == requests, f"step {step}"
    proxy.forward()
    now[0] += 2 * MIN_REFRESH_SECONDS
    assert await refusal(good) is Refusal.ISSUER_UNREACHABLE  # the third failure waits 120 s
    assert proxy.jwks_requests == 3
    now[0] += 2 * MIN_REFRESH_SECONDS
    assert (await verifier.claims(good))["email"] == ALICE.email
    assert await refusal(_forged(via, "made-up-after")) is Refusal.UNKNOWN_KEY  # a success waits 30 s again
    assert proxy.jwks_requests == keys.fetches == 4


@pytest.mark.usefixtures("refetch_at_once")
async def test_an_unknown_kid_while_a_fetch_runs_waits_for_that_fetch_and_starts_none(
    proxied: tuple[IssuerProxy, Provider],
) -> None:
    proxy, via = proxied
    good = await _token(via)
    keys = IssuerKeys(proxy.issuer)
    verifier = JwtVerifier(OidcConfig(issuer=proxy.issuer, audiences=frozenset({AUDIENCE})), keys=keys)
    proxy.hang()
    first = asyncio.create_task(verifier.claims(_forged(via, "made-up-1")))
    await eventually(lambda: proxy.hanging == 1, what="the first fetch held at the proxy")
    second = asyncio.create_task(verifier.claims(_forged(via, "made-up-2")))
    third = asyncio.create_task(verifier.claims(good))
    await eventually(lambda: keys.joined == 2, what="both waiting for the running fetch")
    assert not first.done()
    assert not second.done()
    assert not third.done()
    proxy.forward()
    for made_up in (first, second):
        with pytest.raises(JwtRefused) as caught:
            await made_up
        assert caught.value.refusal is Refusal.UNKNOWN_KEY
    assert (await third)["email"] == ALICE.email
    assert proxy.jwks_requests == keys.fetches == 1


@pytest.mark.usefixtures("refetch_at_once")
async def test_while_the_jwks_hangs_a_token_with_a_cached_key_is_verified_on_grpc_and_at_the_front_door(
    tmp_path: Path, proxied: tuple[IssuerProxy, Provider]
) -> None:
    proxy, via = proxied
    good = await _token(via)
    running = await start_server(App(), _settings(tmp_path, proxy.issuer))
    door_settings = McpSettings(
        mcp_listen="127.0.0.1:0",
        oidc_issuer=proxy.issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"approvers": ["caller"]},
    )
    try:
        async with serving_door(door_settings) as door, httpx.AsyncClient(timeout=120) as http:
            assert await _whoami(running.port, good) == "alice@example.com||surface"
            assert await _door_status(http, door, good) == 200
            assert proxy.jwks_requests == 2  # each verifier holds the key now
            proxy.hang()
            grpc_made_up = asyncio.create_task(_refusal(running.port, _forged(via, "made-up-grpc")))
            door_made_up = asyncio.create_task(_door_status(http, door, _forged(via, "made-up-door")))
            await eventually(lambda: proxy.hanging == 2, what="both verifiers' fetches held at the proxy")

            assert await _whoami(running.port, good) == "alice@example.com||surface"
            assert await _door_status(http, door, good) == 200
            assert proxy.hanging == 2, "verified while both fetches were still outstanding"
            assert not grpc_made_up.done()
            assert not door_made_up.done()

            proxy.forward()
            assert await grpc_made_up == (grpc.StatusCode.UNAUTHENTICATED, "bearer token refused: unknown signing key")
            assert await door_made_up == 401
            assert proxy.jwks_requests == 4
    finally:
        await running.stop()
