"""The web page against the whole stack as processes (broker, provider, example MCP server) in real
Chromium: drafts survive a tab reload, an answered card follows its call to the end, the activity list
shows recent calls (status only) and the MCP servers' status is shown."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.helpers.stack import RunningStack, running_stack

pytestmark = pytest.mark.browser

TIMEOUT_MS = 30_000
ROOT = Path(__file__).resolve().parents[3]


class ProcessStack:
    """:func:`tests.helpers.stack.running_stack` (web on) driven from a background event loop."""

    def __init__(self, tmp_path: Path, extra_env: dict[str, str] | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="activity-stack", daemon=True)
        self._thread.start()
        self._cm: Any = running_stack(tmp_path, web=True, echo=False, extra_env=extra_env)
        self.running: RunningStack = asyncio.run_coroutine_threadsafe(self._cm.__aenter__(), self._loop).result(150)
        self.state_dir = tmp_path / "state"

    def maka(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "surfaces.cli.main", *argv, "--state-dir", str(self.state_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._cm.__aexit__(None, None, None), self._loop).result(120)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()


@pytest.fixture(scope="module")
def process_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessStack]:
    stack = ProcessStack(tmp_path_factory.mktemp("activity"))
    try:
        yield stack
    finally:
        stack.stop()


def test_a_draft_survives_a_reload_and_the_answered_card_follows_its_call_to_the_end(
    page: Page, process_stack: ProcessStack
) -> None:
    bad = process_stack.maka("call", "examples:deploy")  # no artifact: INVALID_ARGUMENTS, before any form
    _, bad_err = bad.communicate(timeout=60)
    assert "INVALID_ARGUMENTS: " in bad_err
    call = process_stack.maka("call", "examples:deploy", "--args", json.dumps({"artifact": "build-42"}))
    page.goto(process_stack.running.endpoints.web)
    card = page.locator("article.card")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    card.get_by_label("environment").select_option("production")
    card.get_by_label("confirm").get_by_role("radio", name="Yes").check()

    page.reload()
    card = page.locator("article.card")
    expect(card).to_have_attribute("data-draft", "restored", timeout=TIMEOUT_MS)
    expect(card.get_by_label("environment")).to_have_value("production")
    expect(card.get_by_label("confirm").get_by_role("radio", name="Yes")).to_be_checked()
    card.get_by_role("button", name="Submit").click()

    followed = page.locator(".notice[data-interaction]")
    expect(followed).to_have_attribute("data-call", "succeeded", timeout=TIMEOUT_MS)
    expect(followed.locator(".notice-text")).to_have_text("Sent; the Tool finished.")
    out, err = call.communicate(timeout=60)
    assert out.strip() == "Deployed build-42 to production.", err
    drafts = page.evaluate("Object.keys(sessionStorage).filter((k) => k.startsWith('maka.draft.'))")
    assert drafts == []

    activity = page.locator("#activity-list li")
    expect(activity.first).to_have_attribute("data-state", "succeeded", timeout=TIMEOUT_MS)
    expect(activity.first).to_contain_text("examples:deploy")
    expect(activity.first.locator(".call-state")).to_have_text("succeeded")  # accepted: no form outcome to tell
    failed = page.locator('#activity-list li[data-state="failed"]')
    expect(failed.first).to_contain_text("INVALID_ARGUMENTS")
    expect(page.locator("#activity")).not_to_contain_text("build-42")  # status only, never arguments
    expect(page.locator('#server-list li[data-server="examples"]')).to_have_attribute("data-state", "ready")


def _open_tabs(page: Page, stack: ProcessStack, session: str) -> tuple[list[Page], str]:
    """Two tabs showing the one pending form of ``session``, and that form's id."""
    tabs = [page, page.context.new_page()]
    for tab in tabs:
        tab.goto(stack.running.endpoints.web)
        expect(tab.locator(f'article.card[data-session="{session}"]')).to_have_count(1, timeout=TIMEOUT_MS)
    interaction_id = page.locator(f'article.card[data-session="{session}"]').get_attribute("data-id")
    assert interaction_id
    return tabs, interaction_id


def test_every_open_tab_follows_a_call_answered_from_the_cli_to_its_end(
    page: Page, process_stack: ProcessStack
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    call = process_stack.maka(
        "call", "examples:deploy", "--session", session, "--args", json.dumps({"artifact": "build-7"})
    )
    tabs, interaction_id = _open_tabs(page, process_stack, session)
    for tab in tabs:  # each tab is one Attach stream of the web surface (ListSurfaces)
        expect(tab.locator("#surface-count")).to_have_text("2 surfaces attached", timeout=TIMEOUT_MS)
    values = json.dumps({"environment": "staging", "confirm": True})
    answered = process_stack.maka("answer", interaction_id, "accept", "--values", values)
    _, answer_err = answered.communicate(timeout=60)
    assert answered.returncode == 0, answer_err
    for tab in tabs:
        followed = tab.locator(f'.notice[data-interaction="{interaction_id}"]')
        expect(followed).to_have_attribute("data-call", "succeeded", timeout=TIMEOUT_MS)
        expect(followed.locator(".notice-text")).to_have_text("Answered on another surface; the Tool completed.")
        expect(tab.locator(f'article.card[data-id="{interaction_id}"]')).to_have_count(0)
    out, err = call.communicate(timeout=60)
    assert out.strip() == "Deployed build-7 to staging.", err


def test_the_tab_that_did_not_answer_follows_the_call_another_tab_answered(
    page: Page, process_stack: ProcessStack
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    call = process_stack.maka(
        "call", "examples:deploy", "--session", session, "--args", json.dumps({"artifact": "build-8"})
    )
    (answering, watching), interaction_id = _open_tabs(page, process_stack, session)
    card = answering.locator(f'article.card[data-id="{interaction_id}"]')
    card.get_by_role("button", name="Decline").click()
    mine = answering.locator('.notice.own[data-action="decline"]')  # a decline is the whole story: not followed
    expect(mine.locator(".notice-text")).to_have_text("Declined; the Tool was told.", timeout=TIMEOUT_MS)
    theirs = watching.locator(f'.notice[data-interaction="{interaction_id}"]')
    expect(theirs).to_have_attribute("data-call", "succeeded", timeout=TIMEOUT_MS)
    expect(theirs.locator(".notice-text")).to_have_text(
        "Answered on another surface; the form was declined and the Tool was told."
    )
    out, err = call.communicate(timeout=60)
    assert "was declined by the user" in out, err


@pytest.mark.parametrize(("action", "shown"), [("decline", "declined"), ("cancel", "cancelled")])
def test_recent_calls_show_a_deploy_whose_form_was_declined_or_cancelled_as_such_not_as_succeeded(
    page: Page, process_stack: ProcessStack, action: str, shown: str
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    call = process_stack.maka(
        "call", "examples:deploy", "--session", session, "--args", json.dumps({"artifact": "build-11"})
    )
    (tab, _), interaction_id = _open_tabs(page, process_stack, session)
    answered = process_stack.maka("answer", interaction_id, action)
    _, answer_err = answered.communicate(timeout=60)
    assert answered.returncode == 0, answer_err
    out, err = call.communicate(timeout=60)
    assert f"was {shown} by the user" in out, err  # the Tool returned: the broker's call "succeeded"

    entry = tab.locator("#activity-list li", has_text=f"session {session}")
    expect(entry).to_have_attribute("data-form-outcome", shown, timeout=TIMEOUT_MS)
    expect(entry).to_have_attribute("data-state", "succeeded")
    expect(entry.locator(".call-state")).to_have_text(f"{shown} · the Tool was told")
    expect(entry).not_to_have_class("call state-succeeded")


def test_every_open_tab_shows_a_stopped_call_as_stopped(page: Page, process_stack: ProcessStack) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    call = process_stack.maka(
        "call", "examples:deploy", "--session", session, "--args", json.dumps({"artifact": "build-9"})
    )
    tabs, interaction_id = _open_tabs(page, process_stack, session)
    stopped = process_stack.maka("stop", "--session", session)
    _, stop_err = stopped.communicate(timeout=60)
    assert stopped.returncode == 0, stop_err
    for tab in tabs:
        followed = tab.locator(f'.notice[data-interaction="{interaction_id}"]')
        expect(followed).to_have_attribute("data-call", "stopped", timeout=TIMEOUT_MS)
        expect(followed.locator(".notice-text")).to_contain_text("the call was stopped.")
    call.communicate(timeout=60)


def test_every_open_tab_shows_a_call_that_failed_when_its_form_timed_out_with_the_code(
    page: Page, tmp_path: Path
) -> None:
    stack = ProcessStack(tmp_path, extra_env={"MAKA_FORM_WAIT_SECONDS": "10"})  # the form's bounded wait
    try:
        session = f"s-{uuid.uuid4().hex[:8]}"
        call = stack.maka("call", "examples:deploy", "--session", session, "--args", json.dumps({"artifact": "b-10"}))
        tabs, interaction_id = _open_tabs(page, stack, session)
        for tab in tabs:  # nobody answers: the Interaction service closes the form, the call fails
            followed = tab.locator(f'.notice[data-interaction="{interaction_id}"]')
            expect(followed).to_have_attribute("data-call", "failed", timeout=TIMEOUT_MS)
            expect(followed).to_have_attribute("data-failure", "INTERACTION_TIMED_OUT")
            expect(followed.locator(".notice-text")).to_contain_text("the Tool failed (INTERACTION_TIMED_OUT).")
        _, err = call.communicate(timeout=60)
        assert "INTERACTION_TIMED_OUT" in err
    finally:
        stack.stop()
