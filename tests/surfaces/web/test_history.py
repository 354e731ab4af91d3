"""The history view and ``maka history`` against the whole stack as processes (``running_stack``: Redis, Interaction
service, broker, MCP provider, the example MCP server, the web surface) in real Chromium: a form answered in the
page and one answered from the CLI are listed with who answered through which surface, and never a value."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.surfaces.web.test_activity import TIMEOUT_MS, ProcessStack

pytestmark = pytest.mark.browser

ARTIFACT = f"build-canary-{uuid.uuid4().hex[:8]}"
"""A Tool argument (the example server echoes it in its result): never in the history."""


@pytest.fixture(scope="module")
def history_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessStack]:
    stack = ProcessStack(tmp_path_factory.mktemp("history"))
    try:
        yield stack
    finally:
        stack.stop()


def test_the_history_view_and_maka_history_name_who_answered_through_which_surface(
    page: Page, history_stack: ProcessStack
) -> None:
    web_session, cli_session = f"w-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4().hex[:8]}"
    args = json.dumps({"artifact": ARTIFACT})
    in_page = history_stack.maka("call", "examples:deploy", "--session", web_session, "--args", args)
    page.goto(history_stack.running.endpoints.web)
    card = page.locator(f'article.card[data-session="{web_session}"]')
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    web_id = card.get_attribute("data-id")
    card.get_by_label("environment").select_option("production")
    card.get_by_label("confirm").get_by_role("radio", name="Yes").check()
    card.get_by_role("button", name="Submit").click()
    out, err = in_page.communicate(timeout=60)
    assert out.strip() == f"Deployed {ARTIFACT} to production.", err

    from_cli = history_stack.maka("call", "examples:deploy", "--session", cli_session, "--args", args)
    cli_card = page.locator(f'article.card[data-session="{cli_session}"]')
    expect(cli_card).to_have_count(1, timeout=TIMEOUT_MS)
    cli_id = cli_card.get_attribute("data-id")
    assert cli_id
    values = json.dumps({"environment": "staging", "confirm": True})
    answered = history_stack.maka("answer", cli_id, "accept", "--values", values)
    _, answer_err = answered.communicate(timeout=60)
    assert answered.returncode == 0, answer_err
    from_cli.communicate(timeout=60)

    by_web = page.locator(f'#history-list li[data-interaction="{web_id}"]')
    expect(by_web.locator(".history-outcome")).to_have_text("accept · delivered", timeout=TIMEOUT_MS)
    expect(by_web.locator(".history-who")).to_have_text("by anonymous (anonymous) via web")
    expect(by_web.locator(".history-tool")).to_have_text("examples:deploy")
    by_cli = page.locator(f'#history-list li[data-interaction="{cli_id}"]')
    expect(by_cli.locator(".history-who")).to_have_text("by anonymous (anonymous) via cli", timeout=TIMEOUT_MS)
    expect(page.locator("#history-list li").first).to_have_attribute("data-interaction", cli_id)  # newest first
    expect(page.locator("#history")).not_to_contain_text("production")  # the answer's value is never listed
    expect(page.locator("#history")).not_to_contain_text(ARTIFACT)

    listing = history_stack.maka("history", "--json", "--limit", "5")
    out, err = listing.communicate(timeout=60)
    assert listing.returncode == 0, err
    assert "production" not in out
    assert ARTIFACT not in out
    entries = {entry["id"]: entry for entry in json.loads(out)}
    assert entries[web_id]["answered_by"] == {
        "principal": "anonymous",
        "principal_kind": "anonymous",
        "surface": "web",
        "issuer": None,
        "via": None,
    }
    assert entries[cli_id]["answered_by"]["surface"] == "cli"
    assert (entries[web_id]["action"], entries[web_id]["delivery"]) == ("accept", "delivered")
