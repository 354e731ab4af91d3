"""The MCP front door with an OpenID Connect issuer (``MAKA_OIDC_ISSUER`` + ``MAKA_OIDC_AUDIENCES``), served on a
loopback socket, with a real OpenID provider: the protected-resource metadata names the issuer, a JWT that
does not verify is ``401 invalid_token`` saying why, a verified person without the caller role is ``403``, and
one with it is served. Behind an ingress (``MAKA_MCP_RESOURCE_URL``) the public URL's host is answered and a
foreign ``Host`` gets ``421`` for the metadata and every challenge, naming neither the resource nor the issuer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from surfaces.mcp.settings import McpSettings
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.surfaces.mcp.stack import serving_door

AUDIENCE = "maka-mcp"
BOB = Person("bob", "bob@example.com", ("visitors",))
ROBOT = Person("robot", "deploy-bot@example.com", ("ci",))
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([BOB, ROBOT]) as running:
        yield running


@pytest.fixture
async def door(provider: Provider) -> AsyncIterator[str]:
    settings = McpSettings(
        mcp_listen="127.0.0.1:0",
        oidc_issuer=provider.issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"ci": ["caller"]},
    )
    async with serving_door(settings) as base:
        yield base


async def test_the_metadata_names_the_issuer_as_the_authorization_server(door: str, provider: Provider) -> None:
    async with httpx.AsyncClient() as http:
        document = (await http.get(f"{door}/.well-known/oauth-protected-resource/mcp")).json()
    assert document["authorization_servers"] == [provider.issuer]


async def test_a_jwt_for_another_audience_is_401_invalid_token_saying_why(door: str, provider: Provider) -> None:
    token = await asyncio.to_thread(id_token, provider, BOB, "another-app")
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{door}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json()["error_description"].startswith("bearer token refused: wrong audience: ")
    assert token not in response.text


async def test_a_verified_person_without_the_caller_role_is_403_insufficient_scope(
    door: str, provider: Provider
) -> None:
    token = await asyncio.to_thread(id_token, provider, BOB, AUDIENCE)
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{door}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_a_verified_person_with_the_caller_role_is_served(door: str, provider: Provider) -> None:
    token = await asyncio.to_thread(id_token, provider, ROBOT, AUDIENCE)
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{door}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert "serverInfo" in response.text


PUBLIC_URL = "https://mcp.maka.example.com/mcp"
PUBLIC_HOST = "mcp.maka.example.com"


@pytest.fixture
async def public_door(provider: Provider) -> AsyncIterator[str]:
    settings = McpSettings(
        mcp_listen="127.0.0.1:0",
        mcp_resource_url=PUBLIC_URL,  # behind an ingress; no MAKA_MCP_ALLOWED_HOSTS
        oidc_issuer=provider.issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"ci": ["caller"]},
    )
    async with serving_door(settings) as base:
        yield base


async def test_the_host_of_the_configured_public_url_gets_the_metadata_the_challenge_and_the_endpoint(
    public_door: str, provider: Provider
) -> None:
    token = await asyncio.to_thread(id_token, provider, ROBOT, AUDIENCE)
    public = {"host": PUBLIC_HOST}
    async with httpx.AsyncClient() as http:
        document = await http.get(f"{public_door}/.well-known/oauth-protected-resource/mcp", headers=public)
        challenge = await http.post(f"{public_door}/mcp", json=INIT, headers={**ACCEPT, **public})
        served = await http.post(
            f"{public_door}/mcp", json=INIT, headers={**ACCEPT, **public, "Authorization": f"Bearer {token}"}
        )
    assert document.status_code == 200
    assert document.json() == {
        "resource": PUBLIC_URL,
        "bearer_methods_supported": ["header"],
        "resource_name": "Maka",
        "authorization_servers": [provider.issuer],
    }
    metadata = "https://mcp.maka.example.com/.well-known/oauth-protected-resource/mcp"
    assert challenge.status_code == 401
    assert challenge.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{metadata}"')
    assert served.status_code == 200, served.text


async def test_a_foreign_host_gets_421_for_the_metadata_and_both_challenges_naming_nothing(
    public_door: str, provider: Provider
) -> None:
    lacks_caller = await asyncio.to_thread(id_token, provider, BOB, AUDIENCE)  # would be 403
    foreign = {"host": "evil.example"}
    async with httpx.AsyncClient() as http:
        responses = [
            await http.get(f"{public_door}/.well-known/oauth-protected-resource/mcp", headers=foreign),
            await http.get(f"{public_door}/.well-known/oauth-protected-resource", headers=foreign),
            await http.post(f"{public_door}/mcp", json=INIT, headers={**ACCEPT, **foreign}),
            await http.post(
                f"{public_door}/mcp",
                json=INIT,
                headers={**ACCEPT, **foreign, "Authorization": f"Bearer {lacks_caller}"},
            ),
        ]
    assert [response.status_code for response in responses] == [421, 421, 421, 421]
    for response in responses:
        assert response.text == "Invalid Host header"
        assert "www-authenticate" not in response.headers
        assert provider.issuer not in response.text
        assert PUBLIC_HOST not in response.text
