"""The web page against the whole stack as processes (broker, provider, example MCP server) in real
Chromium: drafts survive a tab reload, an answered card follows its call to the end, the activity list
shows recent calls (status only) and the MCP servers' status is shown."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
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

    def __init__(self, tmp_path: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="activity-stack", daemon=True)
        self._thread.start()
        self._cm: Any = running_stack(tmp_path, web=True, echo=False)
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
        asyncio.run_coroutine_threadsafe(self._cm.__aexit__(None, None, None), self._loop).result(120)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


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
    expect(followed.locator(".notice-text")).to_have_text("You answered; the Tool completed.")
    out, err = call.communicate(timeout=60)
    assert out.strip() == "Deployed build-42 to production.", err
    drafts = page.evaluate("Object.keys(sessionStorage).filter((k) => k.startsWith('maka.draft.'))")
    assert drafts == []

    activity = page.locator("#activity-list li")
    expect(activity.first).to_have_attribute("data-state", "succeeded", timeout=TIMEOUT_MS)
    expect(activity.first).to_contain_text("examples:deploy")
    failed = page.locator('#activity-list li[data-state="failed"]')
    expect(failed.first).to_contain_text("INVALID_ARGUMENTS")
    expect(page.locator("#activity")).not_to_contain_text("build-42")  # status only, never arguments
    expect(page.locator('#server-list li[data-server="examples"]')).to_have_attribute("data-state", "ready")
