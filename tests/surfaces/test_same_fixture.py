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
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Page, expect
from textual.widgets import Select

from maka.broker.v1 import broker_pb2
from surfaces.common.interaction_client import InteractionClient, Opened, Snapshot
from surfaces.tui.app import MakaTui
from tests.acceptance.harness import Wire, acceptance_stack, tee_stdio, write_config
from tests.helpers.chromium import CHROMIUM
from tests.helpers.loop_thread import LoopThread
from tests.helpers.stack import RunningStack, call_tool, result_text
from tests.helpers.tui import settle

T = TypeVar("T")
MAKA = [sys.executable, "-m", "surfaces.cli.main"]
TIMEOUT_MS = 20_000

EXPECTED = {
    "accept": (
        "Deployed {artifact} to staging.",
        {"action": "accept", "content": {"environment": "staging", "confirm": True}},
    ),
    "decline": ("Deployment of {artifact} was declined by the user; nothing was deployed.", {"action": "decline"}),
    "cancel": ("Deployment of {artifact} was cancelled by the user; nothing was deployed.", {"action": "cancel"}),
}
"""Per action: the Tool's final text and the bare ``inputResponses["target"]`` the server must receive."""

ACTIONS = list(EXPECTED)


class AcceptanceStackThread:
    """The stack on an event loop in a background thread; :meth:`run` / :meth:`submit` use that loop."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.wire = Wire(directory / "examples.log")
        self.thread = LoopThread("same-fixture-stack")
        self._cm: Any = None
        self.running: RunningStack | None = None

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return self.thread.submit(coro)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return self.submit(coro).result(timeout)

    def start(self) -> RunningStack:
        self.thread.start()
        config = write_config(self.directory, {"examples": tee_stdio(self.wire.path, "examples.deploy_server")})
        self._cm = acceptance_stack(self.directory, config, web=True)
        self.running = self.run(self._cm.__aenter__())
        return self.running

    def stop(self) -> None:
        try:
            if self._cm is not None:
                self.run(self._cm.__aexit__(None, None, None))
        finally:
            self.thread.stop(30)

    @property
    def endpoints(self) -> Any:
        assert self.running is not None
        return self.running.endpoints

    @property
    def state_dir(self) -> Path:
        assert self.running is not None
        return self.running.stack.state_dir

    def deploy(self, artifact: str, session: str) -> concurrent.futures.Future[list[broker_pb2.CallToolResponse]]:
        """Start ``examples:deploy`` for ``artifact`` in ``session`` (runs on the stack's loop)."""
        return self.submit(call_tool(self.endpoints.broker, "examples:deploy", {"artifact": artifact}, session=session))

    def assert_reached_server(self, artifact: str, action: str, events: list[broker_pb2.CallToolResponse]) -> None:
        """The call ended with the action's text and the server got exactly the action's bare response."""
        text, response = EXPECTED[action]
        assert result_text(events) == text.format(artifact=artifact)
        first, retry = self.wire.tool_calls("deploy", where={"artifact": artifact})
        assert "inputResponses" not in first["params"]
        assert retry["params"]["inputResponses"] == {"target": response}
        assert retry["params"]["arguments"] == {"artifact": artifact}


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcceptanceStackThread]:
    thread = AcceptanceStackThread(tmp_path_factory.mktemp("same-fixture"))
    try:
        thread.start()
        yield thread
    finally:
        thread.stop()


async def _awaited(future: concurrent.futures.Future[T], timeout: float = 90.0) -> T:
    async with asyncio.timeout(timeout):
        return await asyncio.wrap_future(future)


async def _first_pending(stack: AcceptanceStackThread, session: str) -> str:
    """The id of the first form of ``session``, from the Interaction service's ``Attach`` feed (bounded)."""
    async with InteractionClient.connect(stack.endpoints.interaction) as client, asyncio.timeout(60):
        feed = client.attach([session])
        try:
            async for event in feed:
                if isinstance(event, Snapshot) and event.pending:
                    return event.pending[0].interaction_id
                if isinstance(event, Opened):
                    return event.interaction.interaction_id
        finally:
            await feed.aclose()
    raise AssertionError("the Attach feed ended")


# --- TUI ---------------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("action", ACTIONS)
async def test_the_tui_answers_the_deploy_fixture_and_the_server_gets_that_action(
    shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"tui-{action}", f"tui-build-{action}"
    call = shared_stack.deploy(artifact, session)
    interaction_id = await _first_pending(shared_stack, session)
    app = MakaTui(lambda: InteractionClient.connect(shared_stack.endpoints.interaction), session_ids=[session])
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


async def _maka(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *MAKA, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.e2e
@pytest.mark.parametrize("action", ACTIONS)
async def test_the_cli_answers_the_deploy_fixture_and_the_server_gets_that_action(
    shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"cli-{action}", f"cli-build-{action}"
    state = str(shared_stack.state_dir)
    call = shared_stack.deploy(artifact, session)
    await _first_pending(shared_stack, session)
    code, out, err = await _maka("pending", "--session", session, "--json", "--state-dir", state)
    assert code == 0, err
    [listed] = json.loads(out)
    argv = ["answer", listed["id"], action, "--session", session, "--state-dir", state]
    if action == "accept":
        argv += ["--values", json.dumps({"environment": "staging", "confirm": True})]
    code, out, err = await _maka(*argv)
    assert code == 0, (out, err)

    shared_stack.assert_reached_server(artifact, action, await _awaited(call))


# --- web (Chromium) ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch the machine's Chromium by path (never ``playwright install``)."""
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--disable-gpu", "--disable-dev-shm-usage"],
    }


@pytest.mark.browser
@pytest.mark.parametrize("action", ACTIONS)
def test_the_web_page_answers_the_deploy_fixture_and_the_server_gets_that_action(
    page: Page, shared_stack: AcceptanceStackThread, action: str
) -> None:
    session, artifact = f"web-{action}", f"web-build-{action}"
    call = shared_stack.deploy(artifact, session)
    interaction_id = shared_stack.run(_first_pending(shared_stack, session))
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
