"""Dismiss with undo (``static/js/undo.js``) when the page goes within the undo window, in real Chromium: the
person saw the form dismissed, so leaving the page (closing the tab, navigating away: ``pagehide``) sends the
dismissal at once — a ``keepalive`` request through the answer route with its CSRF header — and nothing else."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from tests.surfaces.web.stack import WebStackThread, text_form

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000
UNDO_SECONDS = 60
"""Longer than any test: a dismissal that reaches the service was sent by the page leaving, not the countdown."""


def _dismiss(card: Locator) -> None:
    card.get_by_role("button", name="Dismiss").click()
    expect(card.locator(".undo-bar")).to_contain_text("Dismissed — sending in ", timeout=TIMEOUT_MS)


def _open(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)


def test_closing_the_tab_within_the_undo_window_sends_the_dismissal_and_not_the_one_undone(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    dismissed = stack_thread.open(text_form("dismiss, then close the tab"), session_id)
    undone = stack_thread.open(text_form("dismiss, undo, then close the tab"), session_id)
    _open(page, stack_thread.web([session_id], undo_seconds=UNDO_SECONDS))
    _dismiss(page.locator(f'article.card[data-id="{dismissed.interaction_id}"]'))
    undone_card = page.locator(f'article.card[data-id="{undone.interaction_id}"]')
    _dismiss(undone_card)
    undone_card.locator(".undo-bar").get_by_role("button", name="Undo").click()
    expect(undone_card.locator(".undo-bar")).to_have_count(0)
    assert stack_thread.get(dismissed.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING

    page.close()

    assert stack_thread.stack is not None
    settled = stack_thread.run(stack_thread.stack.link.next_settled())  # what the Tool's broker is told
    assert settled.interaction_id == dismissed.interaction_id
    assert settled.answer.action == form_pb2.ACTION_CANCEL
    assert stack_thread.get(undone.interaction_id).state == interaction_pb2.INTERACTION_STATE_PENDING


def test_navigating_away_within_the_undo_window_sends_the_dismissal(
    page: Page, stack_thread: WebStackThread, session_id: str
) -> None:
    ix = stack_thread.open(text_form("dismiss, then leave the page"), session_id)
    _open(page, stack_thread.web([session_id], undo_seconds=UNDO_SECONDS))
    _dismiss(page.locator(f'article.card[data-id="{ix.interaction_id}"]'))

    page.goto("about:blank")

    assert stack_thread.stack is not None
    settled = stack_thread.run(stack_thread.stack.link.next_settled())
    assert settled.interaction_id == ix.interaction_id
    assert settled.answer.action == form_pb2.ACTION_CANCEL
