"""People sign in to the web page with OpenID Connect, in real Chromium, through a real OpenID provider's sign-in
page (``oidc-provider-mock``: its own Authorize page, code flow with PKCE, ID tokens signed with its key,
RP-initiated logout), against the real Interaction service: the page shows the forms, an answer names the
person to the service, a person without the surface role stays out, and no token reaches a log or the page."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from maka.form.v1 import form_pb2
from surfaces.web.oidc import PENDING_COOKIE, SESSION_COOKIE
from tests.helpers.oidc import Person, Provider, oidc_provider
from tests.surfaces.web.stack import WebStackThread, text_form

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000
ALICE = Person("alice", "alice@example.com", ("approvers",))
BOB = Person("bob", "bob@example.com", ("visitors",))
MALLORY = Person("mallory", "alice@example.com", ("approvers",), email_verified=False)
"""Someone who put alice's address on their own account, which the issuer never verified."""


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, MALLORY]) as running:
        yield running


CLIENT_SECRET = "maka-web-client-secret-canary"


def _web(stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path) -> str:
    secret_file = tmp_path / "oidc-client-secret"
    secret_file.write_text(CLIENT_SECRET + "\n")
    return stack_thread.web(
        [session_id],
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=secret_file,
        oidc_roles={"approvers": ["surface"]},
    )


def _sign_in_as(page: Page, url: str, person: Person) -> None:
    page.goto(url)
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=person.sub, exact=True).click()


def test_a_person_signs_in_at_the_issuer_sees_the_forms_and_answers_as_themselves(
    page: Page,
    stack_thread: WebStackThread,
    provider: Provider,
    session_id: str,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.INFO)
    ix = stack_thread.open(text_form("Deploy build-7 to production?"), session_id, wait_seconds=300)
    url = _web(stack_thread, provider, session_id, tmp_path)
    codes: list[str] = []
    page.on("request", lambda r: codes.extend(parse_qs(urlsplit(r.url).query).get("code", [])))
    _sign_in_as(page, url, ALICE)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    expect(page.locator("#person")).to_have_text("alice@example.com")
    card = page.locator(f'article.card[data-id="{ix.interaction_id}"]')
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    card.get_by_label("Target").fill("production-eu")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=TIMEOUT_MS)
    stored = stack_thread.get(ix.interaction_id)
    assert stored.answer.action == form_pb2.ACTION_ACCEPT
    # The Interaction service committed the answer as the person, via the web surface's own identity.
    answered = [r.__dict__ for r in caplog.records if r.getMessage() == "answered"]
    by = [(r["by"], r["via"]) for r in answered if r.get("interaction_id") == ix.interaction_id]
    assert by == [("alice@example.com", "anonymous")]
    # The session cookie is HttpOnly, encrypted, and holds no token of the issuer.
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies[SESSION_COOKIE]["httpOnly"]
    assert cookies[SESSION_COOKIE]["sameSite"] == "Strict"
    assert "alice" not in cookies[SESSION_COOKIE]["value"]
    assert PENDING_COOKIE not in cookies
    # Canaries: the authorization code, the client secret and the session cookie reach no log line.
    assert codes
    for secret in (*codes, CLIENT_SECRET, cookies[SESSION_COOKIE]["value"]):
        assert secret not in caplog.text


def test_signing_out_ends_the_session_at_the_issuer_and_the_page_asks_for_a_new_sign_in(
    page: Page, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    url = _web(stack_thread, provider, session_id, tmp_path)
    _sign_in_as(page, url, ALICE)
    expect(page.locator("#person")).to_have_text("alice@example.com", timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Sign out").click()
    # RP-initiated logout: the issuer's end-session page, which returns to the page's signed-out page.
    page.wait_for_url(f"{provider.issuer}/oauth2/end_session**", timeout=TIMEOUT_MS)
    query = parse_qs(urlsplit(page.url).query)
    assert query["client_id"] == ["maka-web"]
    assert query["post_logout_redirect_uri"] == [f"{url}/oidc/signed-out"]
    assert SESSION_COOKIE not in {c["name"] for c in page.context.cookies()}
    response = page.request.get(f"{url}/api/pending")
    assert response.status == 401


def test_a_person_whose_groups_grant_no_surface_role_is_refused_and_gets_no_session(
    page: Page, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    url = _web(stack_thread, provider, session_id, tmp_path)
    _sign_in_as(page, url, BOB)
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("main")).to_contain_text("bob@example.com may not use this page")
    assert SESSION_COOKIE not in {c["name"] for c in page.context.cookies()}
    assert page.request.get(f"{url}/api/pending").status == 401


def test_a_person_whose_email_the_issuer_has_not_verified_is_refused_and_is_not_the_owner_of_that_address(
    page: Page, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    url = _web(stack_thread, provider, session_id, tmp_path)
    _sign_in_as(page, url, MALLORY)
    expect(page.get_by_role("heading", name="Sign-in was refused")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("main")).to_contain_text("Your email address is not verified at the identity provider.")
    assert SESSION_COOKIE not in {c["name"] for c in page.context.cookies()}
    assert page.request.get(f"{url}/api/pending").status == 401


def test_a_forged_callback_without_the_sign_in_s_cookie_is_refused(
    page: Page, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    url = _web(stack_thread, provider, session_id, tmp_path)
    page.goto(f"{url}/oidc/callback?code=stolen&state=guessed")
    expect(page.get_by_role("heading", name="This sign-in is not pending")).to_be_visible(timeout=TIMEOUT_MS)
    assert SESSION_COOKIE not in {c["name"] for c in page.context.cookies()}
