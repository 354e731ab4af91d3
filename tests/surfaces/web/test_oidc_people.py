"""Two people signed in to the same web page through a real OpenID provider, in real Chromium (docs/security.md
"Who sees a form"): a form of a call made for alice shows on alice's page and on bob's (group release-managers, the
approvers of the policy file), never on carol's, neither in the first list nor live; bob answers it as himself; a
machine caller's form shows to everyone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import acts_for_metadata
from services.interaction.notice import form_link
from tests.helpers.oidc import Person, Provider, oidc_provider
from tests.helpers.redis_server import RedisServer
from tests.surfaces.web.stack import WebStackThread, text_form

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000
LINKED = re.compile(r"\blinked\b")
ALICE = Person("alice", "alice@example.com", ("staff",))
BOB = Person("bob", "bob@example.com", ("staff", "release-managers"))
CAROL = Person("carol", "carol@example.com", ("staff",))
POLICY = {"policies": [{"server": "deployer", "tool": "deploy", "approvers": {"groups": ["release-managers"]}}]}
"""The test link opens forms of Tool ``deployer:deploy``."""
FOR_ALICE = interaction_pb2.Person(principal=ALICE.email, via="mcp-front-door")


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, CAROL]) as running:
        yield running


@pytest.fixture(scope="module")
def stack_thread(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebStackThread]:
    """The Interaction service (with the approver policy file) + broker link in a background loop."""
    policies = tmp_path_factory.mktemp("policies") / "policies.json"
    policies.write_text(json.dumps(POLICY))
    thread = WebStackThread(redis_server.url, approver_policies_file=policies)
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


def _as_alice(stack_thread: WebStackThread, interaction_id: str) -> interaction_pb2.Interaction:
    """The record as alice reads it (the service shows her form to nobody else: not to the test's own link)."""
    assert stack_thread.stack is not None
    stub = interaction_service_pb2_grpc.InteractionServiceStub(stack_thread.stack.channel)
    request = interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id)

    async def fetch() -> interaction_pb2.Interaction:
        return (await stub.GetInteraction(request, metadata=acts_for_metadata(ALICE.email))).interaction

    return stack_thread.run(fetch())


def _signed_in(browser: Browser, url: str, person: Person) -> Page:
    page = browser.new_context().new_page()
    page.goto(url)
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=person.sub, exact=True).click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    expect(page.locator("#person")).to_have_text(person.email, timeout=TIMEOUT_MS)
    return page


def test_each_person_sees_their_own_forms_and_those_they_approve_first_listed_and_live(
    browser: Browser, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    hers = stack_thread.open(text_form("Deploy for alice?"), session_id, wait_seconds=300, made_for=FOR_ALICE)
    machine = stack_thread.open(text_form("A machine's question"), session_id, wait_seconds=300)
    # a call alice made with her own ID token (the form names the issuer): her page, acting with that issuer, sees it
    own = stack_thread.open(
        text_form("Deploy alice's own call?"),
        session_id,
        wait_seconds=300,
        made_for=interaction_pb2.Person(principal=ALICE.email, issuer=provider.issuer),
    )
    secret_file = tmp_path / "oidc-client-secret"
    secret_file.write_text("maka-web-client-secret\n")
    url = stack_thread.web(
        [session_id],
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=secret_file,
        oidc_roles={"staff": ["surface"]},
    )
    pages = {person.sub: _signed_in(browser, url, person) for person in (ALICE, BOB, CAROL)}
    try:
        for page in pages.values():
            expect(page.locator(f'article.card[data-id="{machine.interaction_id}"]')).to_be_visible(timeout=TIMEOUT_MS)
        expect(pages["alice"].locator(f'article.card[data-id="{hers.interaction_id}"]')).to_be_visible()
        expect(pages["alice"].locator(f'article.card[data-id="{own.interaction_id}"]')).to_be_visible()
        expect(pages["carol"].locator(f'article.card[data-id="{own.interaction_id}"]')).to_have_count(0)
        expect(pages["bob"].locator(f'article.card[data-id="{hers.interaction_id}"]')).to_be_visible()
        expect(pages["carol"].locator(f'article.card[data-id="{hers.interaction_id}"]')).to_have_count(0)
        expect(pages["bob"].locator(f'article.card[data-id="{hers.interaction_id}"] .session')).to_contain_text(
            f"for {ALICE.email}"
        )
        hidden = pages["carol"].request.get(f"{url}/api/interactions/{hers.interaction_id}?session_id={session_id}")
        assert hidden.status == 404

        live = stack_thread.open(text_form("Live deploy for alice?"), session_id, wait_seconds=300, made_for=FOR_ALICE)
        later = stack_thread.open(text_form("Another machine question"), session_id, wait_seconds=300)
        for name in ("alice", "bob"):
            expect(pages[name].locator(f'article.card[data-id="{live.interaction_id}"]')).to_be_visible(
                timeout=TIMEOUT_MS
            )
        # carol's stream shows the later machine form, and nothing of alice's before it (one ordered stream)
        expect(pages["carol"].locator(f'article.card[data-id="{later.interaction_id}"]')).to_be_visible(
            timeout=TIMEOUT_MS
        )
        expect(pages["carol"].locator(f'article.card[data-id="{live.interaction_id}"]')).to_have_count(0)

        card = pages["bob"].locator(f'article.card[data-id="{hers.interaction_id}"]')
        card.get_by_label("Target").fill("production")
        card.get_by_role("button", name="Submit").click()
        expect(card).to_have_count(0, timeout=TIMEOUT_MS)
        stored = _as_alice(stack_thread, hers.interaction_id)
        assert stored.answer.action == form_pb2.ACTION_ACCEPT
        # the page states the issuer bob signed in at: an OpenID Connect person's answer, through the page
        assert (
            stored.answered_by.principal,
            stored.answered_by.principal_kind,
            stored.answered_by.issuer,
            stored.answered_by.via,
        ) == (BOB.email, interaction_pb2.PRINCIPAL_KIND_OIDC, provider.issuer, "anonymous")
    finally:
        for page in pages.values():
            page.context.close()


def test_a_history_row_names_the_person_its_call_was_made_for_as_the_card_did(
    browser: Browser, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    hers = stack_thread.open(
        text_form("Deploy for alice, then closed?"), session_id, wait_seconds=300, made_for=FOR_ALICE
    )
    machine = stack_thread.open(text_form("A machine's question, then closed"), session_id, wait_seconds=300)
    for settled in (hers, machine):
        stack_thread.close(settled.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
    secret_file = tmp_path / "oidc-client-secret"
    secret_file.write_text("maka-web-client-secret\n")
    url = stack_thread.web(
        [session_id],
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=secret_file,
        oidc_roles={"staff": ["surface"]},
    )
    page = _signed_in(browser, url, ALICE)
    try:
        her_row = page.locator(f'#history-list li[data-interaction="{hers.interaction_id}"]')
        machine_row = page.locator(f'#history-list li[data-interaction="{machine.interaction_id}"]')
        expect(her_row.locator(".history-for")).to_have_text(f"for {ALICE.email}", timeout=TIMEOUT_MS)
        expect(machine_row).to_be_visible()
        expect(machine_row.locator(".history-for")).to_have_count(0)  # a machine caller's call names nobody
    finally:
        page.context.close()


def test_a_form_link_opened_signed_out_lands_on_its_form_after_signing_in_at_the_issuer(
    browser: Browser, stack_thread: WebStackThread, provider: Provider, session_id: str, tmp_path: Path
) -> None:
    others = [stack_thread.open(text_form(f"Earlier question {n}"), session_id, wait_seconds=300) for n in range(4)]
    linked = stack_thread.open(text_form("Deploy for alice, linked?"), session_id, wait_seconds=300, made_for=FOR_ALICE)
    secret_file = tmp_path / "oidc-client-secret"
    secret_file.write_text("maka-web-client-secret\n")
    url = stack_thread.web(
        [session_id],
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=secret_file,
        oidc_roles={"staff": ["surface"]},
    )
    link = form_link(url, linked.interaction_id)
    page = browser.new_context().new_page()
    try:
        page.goto(link)  # signed out: the page, the sign-in page, the issuer
        expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_role("button", name=ALICE.sub, exact=True).click()
        expect(page.locator("#person")).to_have_text(ALICE.email, timeout=TIMEOUT_MS)
        assert page.url == link, "back on the link's target, not the bare list"
        card = page.locator(f'article.card[data-id="{linked.interaction_id}"]')
        expect(card).to_have_class(LINKED, timeout=TIMEOUT_MS)
        expect(page.locator("article.card.linked")).to_have_count(1)
        for other in others:
            expect(page.locator(f'article.card[data-id="{other.interaction_id}"]')).to_be_visible()
    finally:
        page.context.close()
