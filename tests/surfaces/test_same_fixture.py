"""RFC criterion 14: every surface passes the same real-server form fixture.

One real stack (``Stack`` processes, as ``maka up`` starts them, with the web surface) runs the bundled
example MCP server (``examples/deploy_server.py``, official SDK, stdio behind the tee proxy). The same
fixture - ``examples:deploy {"artifact": ...}`` pausing with the RFC's deployment-target form - is
answered with ``accept``, ``decline`` and ``cancel`` on each surface:

- the TUI (``surfaces.tui.app.MakaTui`` driven by Textual's pilot against the real Interaction service);
- the web surface (Playwright in ``/usr/bin/chromium``, marked ``browser`` only, so ``make test`` runs
  it once, in its browser pass; the TUI and CLI tests are marked ``e2e``);
- the CLI (``maka pending --json`` then ``maka answer`` as processes).

Each answer must reach the MCP server distinctly: the final Tool result text differs per action and the
server's retry carries exactly the matching bare ``inputResponses`` (read from the captured wire).
The stack lives in a background thread with its own event loop, so the synchronous Playwright tests
and the asyncio tests share it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
from collections.abc import Iterator
from typing import TypeVar

import pytest
from playwright.sync_api import Page, expect
from textual.widgets import Select

from surfaces.common.interactions import Interactions
from surfaces.tui.app import MakaTui
from tests.helpers.tui import settle
from tests.surfaces.acceptance_stack import (
    ACTIONS,
    TIMEOUT_MS,
    AcceptanceStackThread,
    first_pending,
    run_maka,
)


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcceptanceStackThread]:
    thread = AcceptanceStackThread(tmp_path_factory.mktemp("same-fixture"))
    try:
        thread.start()
        yield thread
    finally:
        thread.stop()


T = TypeVar("T")


async def _awaited(future: concurrent.futures.Future[T], timeout: float = 90.0) -> T:
    async with asyncio.timeout(timeout):
        return await asyncio.wrap_future(future)


# --- TUI ---------------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("action", ACTIONS)
async def test_the_tui_answers_the_deploy_fixture_and_the_server_gets_that_action(
    shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"tui-{action}", f"tui-build-{action}"
    call = shared_stack.deploy(artifact, session)
    interaction_id = await first_pending(shared_stack, session)
    app = MakaTui(lambda: Interactions.connect(shared_stack.endpoints.interaction), session_ids=[session])
    async with app.run_test(size=(140, 60)) as pilot:
        await settle(pilot, lambda: app.selected_id == interaction_id, "the deploy form to be shown", timeout=30)
        if action == "accept":
            app.query_one("#field-0", Select).value = "staging"
            await pilot.click("#field-1-yes")
            await pilot.pause()
            await pilot.click("#submit")
        elif action == "decline":
            await pilot.click("#decline")
        else:
            await pilot.press("escape")
        await settle(pilot, lambda: interaction_id not in app.pending, "the answered form to leave", timeout=30)
        assert [outcome.action.value for outcome in app.outcomes] == [action]

    shared_stack.assert_reached_server(artifact, action, await _awaited(call))


# --- CLI ---------------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("action", ACTIONS)
async def test_the_cli_answers_the_deploy_fixture_and_the_server_gets_that_action(
    shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"cli-{action}", f"cli-build-{action}"
    state = str(shared_stack.state_dir)
    call = shared_stack.deploy(artifact, session)
    await first_pending(shared_stack, session)
    code, out, err = await run_maka("pending", "--session", session, "--json", "--state-dir", state)
    assert code == 0, err
    [listed] = json.loads(out)
    argv = ["answer", listed["id"], action, "--session", session, "--state-dir", state]
    if action == "accept":
        argv += ["--values", json.dumps({"environment": "staging", "confirm": True})]
    code, out, err = await run_maka(*argv)
    assert code == 0, (out, err)

    shared_stack.assert_reached_server(artifact, action, await _awaited(call))


# --- web (Chromium) ----------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("action", ACTIONS)
def test_the_web_page_answers_the_deploy_fixture_and_the_server_gets_that_action(
    page: Page, shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"web-{action}", f"web-build-{action}"
    call = shared_stack.deploy(artifact, session)
    interaction_id = shared_stack.run(first_pending(shared_stack, session))
    page.goto(shared_stack.endpoints.web)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
    card = page.locator(f'article.card[data-id="{interaction_id}"]')
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    expect(card.locator(".claimed-tool")).to_have_text("deploy")
    if action == "accept":
        card.get_by_label(re.compile(r"^environment\b", re.IGNORECASE)).select_option("staging")
        card.locator('.field[data-name="confirm"]').get_by_role("radio", name="Yes").check()
        card.get_by_role("button", name="Submit").click()
    elif action == "decline":
        card.get_by_role("button", name="Decline").click()
    else:
        card.get_by_role("button", name="Dismiss").click()
    expect(page.locator(f'article.card[data-id="{interaction_id}"] form')).to_have_count(0, timeout=TIMEOUT_MS)

    shared_stack.assert_reached_server(artifact, action, call.result(90))
