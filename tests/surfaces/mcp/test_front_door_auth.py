"""The MCP front door of a stack with a tokens file (``MAKA_AUTH_TOKENS_FILE``): ``/mcp`` needs a bearer token of
the ``caller`` role (401 with the RFC 9728 metadata URL in ``WWW-Authenticate`` otherwise, 403 without the role),
the protected-resource metadata names the resource, both only to a ``Host`` the endpoint answers (421 to any
other), and a call made with a caller's token runs through the broker with that token (the official Python SDK
client, the TypeScript SDK client and the Inspector CLI); a ``requestState`` issued to one principal answers
nothing for another. An answer given in the client names the client's principal (a machine caller's token name,
or a person whose OpenID Connect token the client presented) ``via`` the door's surface token in history; a
person's call (made for them at the broker) is answered in their client."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
import pytest_asyncio
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, InputRequiredResult

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.channels import open_channel
from tests.helpers.cli import maka_on_tier
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.helpers.waiting import eventually
from tests.surfaces.mcp.stack import TS_CLIENT, Up, inspector, maka_up, node_env, run_node

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

STACK = "stack-admin-secret-1"  # every role: the stack's own processes and maka's CLI
CALLER = "caller-secret-1"
SURFACE = "surface-secret-1"
ELSEWHERE = "caller-elsewhere-secret-1"  # a caller of another session than the door's ("default")
UNKNOWN = "not-a-configured-token"
PUBLIC_HOST = "team-a-host-0.mcp.maka.example.com"
AUDIENCE = "maka-mcp"
DANA = Person("dana", "dana@example.com", ("staff",))
"""A person who signs in to the MCP client at the OpenID provider (``staff``: the caller and surface roles)."""
CAROL = Person("carol", "carol@example.com", ("staff",))
"""Another person of the same group, who tries to stop dana's call."""
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([DANA, CAROL]) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory, provider: Provider) -> AsyncIterator[Up]:
    tmp = tmp_path_factory.mktemp("front-door-auth")
    tokens = tmp / "tokens.json"
    entries = [
        {"name": "stack", "token": STACK, "roles": ["admin"], "acts_for": True},
        {"name": "alice", "token": CALLER, "roles": ["caller"]},
        {"name": "web", "token": SURFACE, "roles": ["surface"]},
        {"name": "bob", "token": ELSEWHERE, "roles": ["caller"], "sessions": ["elsewhere"]},
    ]
    tokens.write_text(json.dumps({"tokens": entries}))
    env = {"MAKA_AUTH_TOKENS_FILE": str(tokens)}
    env |= {name: STACK for name in ("MAKA_CALLER_TOKEN", "MAKA_SURFACE_TOKEN", "MAKA_INTERACTION_TOKEN")}
    env["MAKA_BROKER_TOKEN"] = STACK
    env["MAKA_MCP_ALLOWED_HOSTS"] = PUBLIC_HOST  # as deploy/k8s sets the Host's public name
    # the door and the broker admit the issuer's JWTs (the broker then makes a JWT person's calls for them)
    env["MAKA_OIDC_ISSUER"] = provider.issuer
    env["MAKA_OIDC_AUDIENCES"] = json.dumps([AUDIENCE])
    env["MAKA_OIDC_ROLES"] = json.dumps({"staff": ["caller", "surface"]})
    async with maka_up(tmp, env=env) as running:
        yield running


def _metadata_url(up: Up) -> str:
    base = up.endpoints.mcp.removesuffix("/mcp")
    return f"{base}/.well-known/oauth-protected-resource/mcp"


async def test_a_request_without_a_token_is_401_naming_the_protected_resource_metadata(up: Up) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(up.endpoints.mcp, json=INIT, headers=ACCEPT)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{_metadata_url(up)}"')
    assert response.json()["error_description"].startswith("needs a bearer token: send Authorization: Bearer")


async def test_an_unknown_token_is_401_invalid_token_saying_it_is_unknown(up: Up) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            up.endpoints.mcp, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {UNKNOWN}"}
        )
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert UNKNOWN not in response.text
    assert response.json()["error_description"].startswith("unknown bearer token: ")


async def test_a_token_without_the_caller_role_is_403_insufficient_scope(up: Up) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            up.endpoints.mcp, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {SURFACE}"}
        )
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_the_protected_resource_metadata_names_the_endpoint_and_is_open(up: Up) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(_metadata_url(up))
    assert response.status_code == 200
    document = response.json()
    assert document["resource"] == up.endpoints.mcp
    assert document["bearer_methods_supported"] == ["header"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_python_sdk_client_with_a_caller_token_lists_and_calls_tools(up: Up, mode: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CALLER}"}, timeout=60)
    transport = streamable_http_client(up.endpoints.mcp, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        listed = await client.list_tools()
        result = await client.call_tool("examples.ping", {})
    assert "examples.deploy" in {tool.name for tool in listed.tools}
    assert [block.text for block in result.content if block.type == "text"] == ["pong"]


async def test_the_typescript_client_with_a_caller_token_calls_ping(up: Up) -> None:
    env = node_env(headers={"Authorization": f"Bearer {CALLER}"})
    code, out, err = await run_node(str(TS_CLIENT), up.endpoints.mcp, "call", "examples.ping", "{}", env=env)
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["text"] == "pong"


async def test_the_inspector_cli_with_a_caller_token_lists_tools(up: Up, tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {CALLER}"}
    code, out, err = await inspector(up.endpoints.mcp, "--method", "tools/list", tmp=tmp_path, headers=headers)
    assert code == 0, err
    assert "examples.deploy" in {tool["name"] for tool in json.loads(out)["tools"]}


async def test_the_typescript_client_without_a_token_is_refused(up: Up) -> None:
    code, _out, err = await run_node(str(TS_CLIENT), up.endpoints.mcp, "list", env=node_env())
    assert code != 0
    assert "needs a bearer token" in err


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_broker_call_carries_the_clients_own_token_not_the_doors(up: Up, mode: str) -> None:
    # The door's own token may call in every session; bob's may not call in the door's session.
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ELSEWHERE}"}, timeout=60)
    transport = streamable_http_client(up.endpoints.mcp, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        result = await client.call_tool("examples.ping", {})
    assert result.is_error
    text = "\n".join(block.text for block in result.content if block.type == "text")
    assert text.startswith("PERMISSION_DENIED"), text


async def _accept_staging(context: object, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"environment": "staging", "confirm": True})


async def test_a_request_state_issued_to_one_principal_answers_nothing_for_another(up: Up) -> None:
    alice_http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CALLER}"}, timeout=60)
    other_http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {STACK}"}, timeout=60)
    async with (
        alice_http,
        other_http,
        Client(
            streamable_http_client(up.endpoints.mcp, http_client=alice_http), elicitation_callback=_accept_staging
        ) as alice,
        Client(
            streamable_http_client(up.endpoints.mcp, http_client=other_http), elicitation_callback=_accept_staging
        ) as other,
    ):
        arguments = {"artifact": "alices"}
        first = await alice.session.call_tool("examples.deploy", arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert first.input_requests is not None
        (key,) = first.input_requests
        production = ElicitResult(action="accept", content={"environment": "production", "confirm": True})
        with pytest.raises(MCPError) as raised:
            await other.session.call_tool(
                "examples.deploy",
                arguments,
                input_responses={key: production},
                request_state=first.request_state,
                allow_input_required=True,
            )
        assert raised.value.error.data == {"reason": "invalid_request_state"}
        staging = ElicitResult(action="accept", content={"environment": "staging", "confirm": True})
        done = await alice.session.call_tool(
            "examples.deploy",
            arguments,
            input_responses={key: staging},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, CallToolResult)
    assert [block.text for block in done.content if block.type == "text"] == ["Deployed alices to staging."]


async def test_the_public_host_name_the_setting_allows_is_served_and_another_name_is_refused(up: Up) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {CALLER}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "server/discover",
    }
    async with httpx.AsyncClient(timeout=30) as http:
        public = await http.post(up.endpoints.mcp, json=discover, headers={**headers, "host": PUBLIC_HOST})
        other = await http.post(up.endpoints.mcp, json=discover, headers={**headers, "host": "evil.example"})
    assert public.status_code == 200, public.text
    assert "maka" in public.text  # the server's discover result
    assert other.status_code == 421


FOREIGN_HOST = "evil.example"
"""What a DNS-rebinding page's requests carry: its own name, resolved to the loopback endpoint."""
UNAUTHENTICATED = [
    ("GET", "/.well-known/oauth-protected-resource/mcp", {}),
    ("GET", "/.well-known/oauth-protected-resource", {}),
    ("POST", "/mcp", {}),
    ("POST", "/mcp", {"Authorization": f"Bearer {UNKNOWN}"}),
]


@pytest.mark.parametrize(("method", "path", "extra"), UNAUTHENTICATED)
async def test_the_metadata_and_the_challenge_refuse_a_foreign_host_421_naming_neither_resource_nor_issuer(
    up: Up, provider: Provider, method: str, path: str, extra: dict[str, str]
) -> None:
    base = up.endpoints.mcp.removesuffix("/mcp")
    headers = {**ACCEPT, **extra, "host": FOREIGN_HOST}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.request(method, base + path, json=INIT if method == "POST" else None, headers=headers)
    assert response.status_code == 421
    assert response.text == "Invalid Host header"  # the endpoint's own refusal of a foreign Host
    assert "www-authenticate" not in response.headers
    assert provider.issuer not in response.text
    assert FOREIGN_HOST not in response.text


async def test_the_metadata_and_the_challenge_answer_the_public_host_name_the_setting_allows(
    up: Up, provider: Provider
) -> None:
    base = up.endpoints.mcp.removesuffix("/mcp")
    metadata = f"http://{PUBLIC_HOST}/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient(timeout=30) as http:
        document = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp", headers={"host": PUBLIC_HOST})
        challenge = await http.post(up.endpoints.mcp, json=INIT, headers={**ACCEPT, "host": PUBLIC_HOST})
    assert document.status_code == 200
    assert document.json()["resource"] == f"http://{PUBLIC_HOST}/mcp"
    assert document.json()["authorization_servers"] == [provider.issuer]
    assert challenge.status_code == 401
    assert challenge.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{metadata}"')


async def _history(up: Up, reader: str) -> dict[str, dict[str, object]]:
    code, out, err = await maka_on_tier(up.endpoints.interaction, reader, "history", "--json")
    assert code == 0, err
    return {str(entry["id"]): entry for entry in json.loads(out)}


async def _deploy_answered_in_the_client(
    up: Up, token: str, mode: str, artifact: str, reader: str = STACK
) -> list[tuple[object, ...]]:
    """Call deploy as ``token``'s principal, answer its form in the client (staging); the history entries the call
    added as ``reader`` sees them, as (answered_by principal, principal_kind, issuer, via, surface, made_for)."""
    before = await _history(up, reader)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(up.endpoints.mcp, http_client=http)
    async with http, Client(transport, mode=mode, elicitation_callback=_accept_staging) as client:
        async with asyncio.timeout(60):
            result = await client.call_tool("examples.deploy", {"artifact": artifact})
    assert [block.text for block in result.content if block.type == "text"] == [f"Deployed {artifact} to staging."]

    async def added() -> list[dict[str, object]] | None:
        entries = [entry for key, entry in (await _history(up, reader)).items() if key not in before]
        return entries or None

    entries = await eventually(added, timeout=30, what="the answered form in history")
    rows: list[tuple[object, ...]] = []
    for entry in entries:
        who = entry["answered_by"]
        assert isinstance(who, dict)
        rows.append(
            (who["principal"], who["principal_kind"], who["issuer"], who["via"], who["surface"], entry["made_for"])
        )
    return rows


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_answer_given_in_the_client_names_the_callers_token_via_the_door_in_history(up: Up, mode: str) -> None:
    rows = await _deploy_answered_in_the_client(up, CALLER, mode, f"named-{mode}")
    # a static token's principal the door answered for is a token's (no issuer); its call is made for nobody
    assert rows == [("alice", "token", None, "stack", "mcp", None)]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_oidc_persons_call_answered_in_their_client_deploys_and_history_names_them(
    up: Up, provider: Provider, mode: str
) -> None:
    token = await asyncio.to_thread(id_token, provider, DANA, AUDIENCE)
    rows = await _deploy_answered_in_the_client(up, token, mode, f"dana-{mode}", reader=token)
    assert rows == [(DANA.email, "oidc", provider.issuer, "stack", "mcp", DANA.email)]
    # her form is hers: the door's own (admin) token does not see it, in history either
    assert not [entry for entry in (await _history(up, STACK)).values() if entry["made_for"] == DANA.email]
    assert token not in (up.state_dir.parent / "up.log").read_text()


async def _waiting_call(broker: str, token: str, tool: str) -> broker_pb2.CallSummary | None:
    """The call of ``tool`` waiting on a form that ``token``'s principal sees in the broker's recent calls."""
    async with open_channel(broker, token=token) as channel:
        status = await broker_pb2_grpc.CapabilityBrokerServiceStub(channel).GetStatus(
            broker_pb2.GetStatusRequest(), timeout=20
        )
    waiting = [c for c in status.recent_calls if c.tool_name == tool and c.state == "awaiting_interaction"]
    return waiting[0] if waiting else None


async def test_another_person_stops_nothing_of_a_persons_front_door_call_by_its_session_its_id_or_all(
    up: Up, provider: Provider
) -> None:
    dana, carol = [await asyncio.to_thread(id_token, provider, p, AUDIENCE) for p in (DANA, CAROL)]
    asked, release = asyncio.Event(), asyncio.Event()

    async def hold_then_accept(context: object, params: ElicitRequestParams) -> ElicitResult:
        asked.set()
        await release.wait()
        return await _accept_staging(context, params)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {dana}"}, timeout=120)
    transport = streamable_http_client(up.endpoints.mcp, http_client=http)
    async with http, Client(transport, mode="legacy", elicitation_callback=hold_then_accept) as client:
        call = asyncio.create_task(client.call_tool("examples.deploy", {"artifact": "dana-kept"}))
        async with asyncio.timeout(60):
            await asyncio.wait({call, asyncio.create_task(asked.wait())}, return_when=asyncio.FIRST_COMPLETED)
        assert asked.is_set(), call
        hers = await eventually(
            lambda: _waiting_call(up.endpoints.broker, dana, "examples:deploy"), timeout=30, what="dana's call"
        )
        # the session id the door used to derive from her email, and the real one, which dana sees and carol cannot
        derived = "default.p" + hashlib.sha256(DANA.email.encode()).hexdigest()[:12]
        assert hers.session_id != derived
        assert DANA.email not in hers.session_id
        assert await _waiting_call(up.endpoints.broker, carol, "examples:deploy") is None
        async with open_channel(up.endpoints.broker, token=carol) as channel:
            stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            for request in (
                broker_pb2.StopRequest(session_id=derived),
                broker_pb2.StopRequest(session_id=hers.session_id),
                broker_pb2.StopRequest(session_id=hers.session_id, turn_id=hers.turn_id),
                broker_pb2.StopRequest(invocation_id=hers.invocation_id),
                broker_pb2.StopRequest(all=True),
            ):
                assert (await stub.Stop(request, timeout=20)).stopped_invocations == 0, request
        assert not call.done()
        release.set()
        async with asyncio.timeout(60):
            result = await call
    assert [block.text for block in result.content if block.type == "text"] == ["Deployed dana-kept to staging."]
