"""Who sees which recent calls on the web page (``GET /api/status``, the activity list): two people signed in through a
real OpenID provider, in real Chromium, against the whole stack as processes (broker, MCP provider, the example MCP
server). Each sees the calls made for them and the machine caller's, never the other person's: the page asks the
broker as its person (``x-maka-acts-for``), and the broker applies the rule that decides who sees a call's forms."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from maka_client import BrokerClient
from services.core.auth import acts_for_metadata
from surfaces.web.main import build, start_web
from surfaces.web.settings import WebSettings
from tests.helpers.oidc import Person, Provider, oidc_provider
from tests.surfaces.web.test_activity import TIMEOUT_MS, ProcessStack

pytestmark = pytest.mark.browser

ALICE = Person("alice", "alice@example.com", ("staff",))
BOB = Person("bob", "bob@example.com", ("staff",))


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB]) as running:
        yield running


@pytest.fixture(scope="module")
def people_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessStack]:
    stack = ProcessStack(tmp_path_factory.mktemp("status-people"))
    try:
        yield stack
    finally:
        stack.stop()


def _run(stack: ProcessStack, coro: Any, timeout: float = 60.0) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, stack._loop).result(timeout)


def _signed_in(browser: Browser, url: str, person: Person) -> Page:
    page = browser.new_context().new_page()
    page.goto(url)
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=person.sub, exact=True).click()
    expect(page.locator("#person")).to_have_text(person.email, timeout=TIMEOUT_MS)
    return page


def test_each_person_sees_the_calls_made_for_them_and_the_machines_never_the_other_persons(
    browser: Browser, people_stack: ProcessStack, provider: Provider, tmp_path: Path
) -> None:
    endpoints = people_stack.running.endpoints
    session = f"p-{uuid.uuid4().hex[:8]}"

    async def start_calls() -> tuple[dict[str, str], list[asyncio.Task[None]]]:
        """Three calls of ``examples:deploy`` (each waits on its form): made for alice, for bob, by a machine."""
        ids: dict[str, str] = {}
        tasks: list[asyncio.Task[None]] = []
        for who in (ALICE.email, BOB.email, ""):
            client = BrokerClient(endpoints.broker)
            if who:
                client.metadata = (*client.metadata, *acts_for_metadata(who))
            call = client.call_tool("examples:deploy", {"artifact": "build-7"}, session_id=session)
            ids[who or "machine"] = call.request.turn_id

            async def follow(call: Any = call, client: BrokerClient = client) -> None:
                try:
                    async for _event in call:
                        pass
                finally:
                    await client.close()

            tasks.append(asyncio.get_running_loop().create_task(follow()))
        return ids, tasks

    turns, tasks = _run(people_stack, start_calls())
    secret_file = tmp_path / "oidc-client-secret"
    secret_file.write_text("maka-web-client-secret\n")
    settings = WebSettings(
        interaction_target=endpoints.interaction,
        broker_target=endpoints.broker,
        web_listen="127.0.0.1:0",
        sessions=[session],
        oidc_issuer=provider.issuer,
        oidc_client_id="maka-web",
        oidc_client_secret_file=secret_file,
        oidc_roles={"staff": ["surface"]},
    )

    async def web() -> tuple[Any, Any]:
        app = await build(settings)
        return app, await start_web(app, settings)

    app, running = _run(people_stack, web())
    pages = {person.sub: _signed_in(browser, running.url, person) for person in (ALICE, BOB)}
    try:
        for name, other in (("alice", "bob@example.com"), ("bob", "alice@example.com")):
            page, own = pages[name], ALICE.email if name == "alice" else BOB.email
            calls = page.locator("#activity-list li")
            expect(calls).to_have_count(2, timeout=TIMEOUT_MS)  # theirs and the machine's, not the other's
            status = page.request.get(f"{running.url}/api/status").json()
            shown = {call["turnId"] for call in status["calls"]}
            assert shown == {turns[own], turns["machine"]}, (name, status["calls"])
            assert turns[other] not in shown
    finally:
        for page in pages.values():
            page.context.close()

        async def stop() -> None:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await running.stop()
            await app.close()

        _run(people_stack, stop())
