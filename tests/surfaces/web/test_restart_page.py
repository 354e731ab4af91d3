"""The web page across ``maka up`` restarts, in real Chromium (docs/operations.md#the-web-page-across-restarts):

- a tab open on a ``maka up`` stack shows "Reconnecting…" while the stack is down and is live again once the stack
  restarts with the same state dir: the login cookie is signed with ``STATE/web-session.key``, which outlives the
  per-run owner token, so the same browser (even restarted: the cookie is persistent) stays signed in;
- a tab whose sign-in the restarted stack no longer accepts (its ``web-session.key`` was replaced) says it is
  signed out and how to sign in again, instead of "Reconnecting…" forever; the sign-in page names the owner token
  and the tokens file, and that token signs in.

Each ``maka up`` is a real process (embedded Redis, no MCP servers) on one fixed web port, so the tab reconnects
to the same address; every wait is bounded and waits on the page's own state.
"""

from __future__ import annotations

import asyncio
import json
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.async_api import BrowserContext, Page, Playwright, async_playwright, expect

from stack.access import read_owner_token
from stack.ports import free_port
from stack.state_dir import read_endpoints
from surfaces.web.security import COOKIE_NAME
from tests.helpers.chromium import CHROMIUM, CHROMIUM_ARGS

MAKA = [sys.executable, "-m", "surfaces.cli.main"]
ROOT = Path(__file__).resolve().parents[3]
START_SECONDS = 120
PAGE_MS = 30_000


@dataclass
class Up:
    """A running ``maka up``: its ready line's web link, the owner token and the tokens file."""

    link: str
    token: str
    tokens_file: Path


@asynccontextmanager
async def maka_up(folder: Path, web_port: int) -> AsyncIterator[Up]:
    """``maka up`` with its state dir ``folder/state`` and the web page on ``web_port``; Ctrl-C (bounded) at the end."""
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    state_dir = folder / "state"
    with (folder / "up.log").open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            *MAKA, "up", "--config", str(config), "--state-dir", str(state_dir), "--ports", f"web={web_port},mcp=0",
            stdout=asyncio.subprocess.PIPE, stderr=log, cwd=ROOT,
        )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_SECONDS):
            ready = (await process.stdout.readline()).decode()
        assert ready.startswith("maka is ready: "), ready + (folder / "up.log").read_text()[-3000:]
        link = ready.removeprefix("maka is ready: ").split()[0]
        tokens_file = Path(read_endpoints(state_dir).tokens)
        token = read_owner_token(tokens_file)
        assert token is not None
        assert link == f"http://127.0.0.1:{web_port}/?token={token}"
        yield Up(link, token, tokens_file)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await process.communicate()


async def _browser(playwright: Playwright, profile: Path) -> BrowserContext:
    """Chromium with a profile on disk: closing and launching it again is a browser restart."""
    return await playwright.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, args=list(CHROMIUM_ARGS)
    )


async def _open_signed_in(context: BrowserContext, url: str) -> Page:
    page = await context.new_page()
    await page.goto(url)
    await page.wait_for_selector("body[data-ready='true']", timeout=PAGE_MS)
    await expect(page.locator("#connection")).to_have_text("Live", timeout=PAGE_MS)
    return page


async def test_an_open_tab_is_live_again_after_maka_up_restarts_and_a_restarted_browser_stays_signed_in(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with async_playwright() as playwright:
        context = await _browser(playwright, tmp_path / "profile")
        try:
            async with maka_up(tmp_path, port) as first:
                page = await _open_signed_in(context, first.link)
                assert page.url == f"http://127.0.0.1:{port}/", "the token left the address bar"
            await expect(page.locator("#connection")).to_have_text("Reconnecting…", timeout=PAGE_MS)
            async with maka_up(tmp_path, port) as second:
                assert second.token != first.token, "each run has a new owner token"
                await expect(page.locator("#connection")).to_have_text("Live", timeout=PAGE_MS)
                await expect(page.locator("#signed-out")).to_be_hidden()
                (cookie,) = [c for c in await context.cookies() if c["name"] == COOKIE_NAME]
                assert cookie["httpOnly"]
                assert cookie["sameSite"] == "Strict"
                assert cookie["expires"] > time.time() + 13 * 24 * 3600, "persistent, for the default 14 days"
                assert first.token not in cookie["value"]
                assert second.token not in cookie["value"]
            await context.close()
            context = await _browser(playwright, tmp_path / "profile")  # the browser restarts too
            async with maka_up(tmp_path, port):
                page = await _open_signed_in(context, f"http://127.0.0.1:{port}/")
                assert page.url == f"http://127.0.0.1:{port}/", "signed in without a token: no login page"
        finally:
            await context.close()


async def test_a_tab_the_restarted_stack_no_longer_signs_in_says_signed_out_and_the_login_names_the_owner_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with async_playwright() as playwright:
        context = await _browser(playwright, tmp_path / "profile")
        try:
            async with maka_up(tmp_path, port) as first:
                page = await _open_signed_in(context, first.link)
            key = tmp_path / "state" / "web-session.key"
            assert stat.S_IMODE(key.stat().st_mode) == 0o600, "the kept key is the owner's only"
            assert key.read_text().strip() not in (tmp_path / "up.log").read_text(), "and never logged"
            key.unlink()  # a new key: every old sign-in ends
            async with maka_up(tmp_path, port) as second:
                notice = page.locator("#signed-out")
                await expect(notice).to_be_visible(timeout=PAGE_MS)
                await expect(page.locator("#connection")).to_have_text("Signed out")
                text = await notice.inner_text()
                assert "Signed out" in text, text
                assert "ready line" in text, text
                assert str(second.tokens_file) in text, text
                await page.get_by_role("link", name="Sign in again").click()
                await page.wait_for_url(f"http://127.0.0.1:{port}/login", timeout=PAGE_MS)
                login = await page.locator("p.login-token").inner_text()
                assert "owner token" in login, login
                assert str(second.tokens_file) in login, login
                assert "ready line" in login, login
                assert "MAKA_SURFACE_TOKEN" not in await page.content()
                await page.get_by_label("Owner token").fill(second.token)
                await page.get_by_role("button", name="Sign in").click()
                await page.wait_for_selector("body[data-ready='true']", timeout=PAGE_MS)
                await expect(page.locator("#connection")).to_have_text("Live", timeout=PAGE_MS)
        finally:
            await context.close()
