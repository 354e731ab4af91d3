"""A notification's link (``<web>/#/interaction/<id>``, services/interaction/notify.py) opens the page on that
form, in real Debian Chromium against the real Interaction service: its card is marked and scrolled to, also when
the link was opened before the surface token's login (the sign-in page hands the fragment on)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from services.interaction.notice import form_link
from tests.surfaces.web.stack import WebStackThread, text_form
from tests.surfaces.web.test_page import TIMEOUT_MS, card_of, open_page

pytestmark = pytest.mark.browser

LINKED = re.compile(r"\blinked\b")


def test_a_notification_link_marks_its_form_and_scrolls_to_it_and_a_new_link_moves_the_mark(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    page.set_viewport_size({"width": 900, "height": 500})
    opened = [stack_thread.open(text_form(f"Form {n}"), session_id, wait_seconds=300) for n in range(5)]
    base = stack_thread.web([session_id])
    last = opened[-1].interaction_id
    open_page(page, form_link(base, last))
    expect(card_of(page, last)).to_have_class(LINKED, timeout=TIMEOUT_MS)
    expect(card_of(page, last)).to_be_in_viewport()
    expect(page.locator("article.card.linked")).to_have_count(1)
    first = opened[0].interaction_id
    page.evaluate("id => { location.hash = '#/interaction/' + encodeURIComponent(id); }", first)
    expect(card_of(page, first)).to_have_class(LINKED, timeout=TIMEOUT_MS)
    expect(card_of(page, first)).to_be_in_viewport()
    expect(card_of(page, last)).not_to_have_class(LINKED)


def test_a_form_link_opened_before_the_token_login_lands_on_its_form_after_it(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    opened = [stack_thread.open(text_form(f"Behind a login {n}"), session_id, wait_seconds=300) for n in range(3)]
    url = stack_thread.web([session_id], token="linked-t0ken")
    linked = opened[0].interaction_id
    page.goto(form_link(url, linked))
    expect(page).to_have_url(re.compile(r"/login#/interaction/"))
    page.get_by_label("Surface token").fill("linked-t0ken")
    page.get_by_role("button", name="Sign in").click()
    expect(card_of(page, linked)).to_have_class(LINKED, timeout=TIMEOUT_MS)
    assert page.url == form_link(url, linked), "back on the link's target, not the bare list"
    expect(page.locator("article.card.linked")).to_have_count(1)
