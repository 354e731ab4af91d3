"""OpenID Connect sign-in on N web replicas without sticky sessions, with a real OpenID provider: a sign-in
started on one replica finishes on another, the person's session cookie and CSRF token hold on every replica
that shares ``MAKA_WEB_SECRET_FILE`` (and on none that does not), and the answer names the person."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from surfaces.web.main import build, start_web
from surfaces.web.oidc import PENDING_COOKIE, SESSION_COOKIE
from surfaces.web.security import CSRF_HEADER
from surfaces.web.settings import WebSettings
from tests.helpers.oidc import ALICE, Provider, oidc_provider
from tests.helpers.tokens import write_secret_file
from tests.surfaces.web.stack import WebStack, running_stack, text_form

ORIGIN = "http://maka.test"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE]) as running:
        yield running


@pytest.fixture
async def stack(redis_url: str) -> AsyncIterator[WebStack]:
    async with running_stack(redis_url) as running:
        yield running


async def _replica(stack: WebStack, exits: AsyncExitStack, provider: Provider, secret: Path, client: Path) -> str:
    settings = WebSettings(
        interaction_target=stack.target,
        web_listen="127.0.0.1:0",
        sessions=["s1"],
        web_secret_file=secret,
        web_public_origin=ORIGIN,
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=client,
        oidc_roles={"approvers": ["surface"]},
    )
    app = await build(settings)
    running = await start_web(app, settings)
    exits.push_async_callback(app.close)
    exits.push_async_callback(running.stop)
    return running.url


async def test_a_sign_in_started_on_one_replica_finishes_on_another_and_its_session_holds_on_every_replica(
    stack: WebStack, provider: Provider, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    shared, other, client_secret = (
        write_secret_file(tmp_path / "web.secret"),
        write_secret_file(tmp_path / "other.secret"),
        write_secret_file(tmp_path / "client.secret"),
    )
    ix = await stack.link.open(text_form("Ship it?"), session_id="s1", wait_seconds=300)
    async with AsyncExitStack() as exits, httpx.AsyncClient(timeout=10, headers={"Host": "maka.test"}) as web:
        one, two, stranger = [
            await _replica(stack, exits, provider, secret, client_secret) for secret in (shared, shared, other)
        ]
        started = await web.get(f"{one}/oidc/login")
        assert started.status_code == 303
        authorize = started.headers["location"]
        assert authorize.startswith(f"{provider.issuer}/oauth2/authorize?")
        assert "code_challenge_method=S256" in authorize
        pending = started.cookies[PENDING_COOKIE]
        async with httpx.AsyncClient(timeout=10) as browser_at_issuer:
            chosen = await browser_at_issuer.post(authorize, data={"sub": ALICE.sub})
        assert chosen.status_code == 302
        callback = urlsplit(chosen.headers["location"])
        assert f"{callback.scheme}://{callback.netloc}" == ORIGIN
        finished = await web.get(
            f"{two}{callback.path}?{callback.query}", headers={"Cookie": f"{PENDING_COOKIE}={pending}"}
        )
        assert finished.status_code == 200
        assert "Signed in as alice@example.com" in finished.text
        person = finished.cookies[SESSION_COOKIE]

        sessions = [
            await web.get(f"{url}/api/session", headers={"Cookie": f"{SESSION_COOKIE}={person}"})
            for url in (one, two, stranger)
        ]
        assert [r.status_code for r in sessions] == [200, 200, 401]
        assert sessions[0].json()["person"] == sessions[1].json()["person"] == "alice@example.com"
        csrf = sessions[0].json()["csrf"]
        assert sessions[1].json()["csrf"] == csrf

        body = {
            "session_id": "s1",
            "submission_id": "sub-1",
            "action": "accept",
            "values": {"target": "prod"},
        }
        answered = await web.post(
            f"{two}/api/interactions/{ix.interaction_id}/answer",
            json=body,
            headers={"Cookie": f"{SESSION_COOKIE}={person}", "Origin": ORIGIN, CSRF_HEADER: csrf},
        )
        assert answered.status_code == 200, answered.text
    stub = interaction_service_pb2_grpc.InteractionServiceStub(stack.channel)
    stored = await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=ix.interaction_id))
    assert stored.interaction.answer.action == form_pb2.ACTION_ACCEPT
    by = [
        r.__dict__["by"]
        for r in caplog.records
        if r.__dict__.get("interaction_id") == ix.interaction_id and r.getMessage() == "answered"
    ]
    assert by == ["alice@example.com"]
    for secret in (pending, person, csrf, client_secret.read_text().strip()):
        assert secret not in caplog.text


async def test_a_csrf_token_of_another_sign_in_is_refused(stack: WebStack, provider: Provider, tmp_path: Path) -> None:
    shared, client_secret = write_secret_file(tmp_path / "web.secret"), write_secret_file(tmp_path / "client.secret")
    async with AsyncExitStack() as exits, httpx.AsyncClient(timeout=10, headers={"Host": "maka.test"}) as web:
        url = await _replica(stack, exits, provider, shared, client_secret)
        people = []
        for _ in range(2):
            started = await web.get(f"{url}/oidc/login")
            async with httpx.AsyncClient(timeout=10) as browser_at_issuer:
                chosen = await browser_at_issuer.post(started.headers["location"], data={"sub": ALICE.sub})
            callback = urlsplit(chosen.headers["location"])
            finished = await web.get(
                f"{url}{callback.path}?{callback.query}",
                headers={"Cookie": f"{PENDING_COOKIE}={started.cookies[PENDING_COOKIE]}"},
            )
            people.append(finished.cookies[SESSION_COOKIE])
        first_csrf = (await web.get(f"{url}/api/session", headers={"Cookie": f"{SESSION_COOKIE}={people[0]}"})).json()[
            "csrf"
        ]
        refused = await web.post(
            f"{url}/api/interactions/ix-1/answer",
            json={"session_id": "s1", "action": "decline"},
            headers={"Cookie": f"{SESSION_COOKIE}={people[1]}", "Origin": ORIGIN, CSRF_HEADER: first_csrf},
        )
        assert refused.status_code == 403
        assert refused.json()["error"]["reason"] == "CSRF_REJECTED"
