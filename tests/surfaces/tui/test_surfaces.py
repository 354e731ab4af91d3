"""``maka tui`` against a real stack (processes): ``#status`` counts the attached surfaces as the web page
does (``N surfaces attached``, the Interaction service's ``ListSurfaces``) and as ``maka status`` lists them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from surfaces.common.interactions import FormSnapshot, Interactions
from surfaces.tui.app import MakaTui
from surfaces.tui.backend import FollowingBackend
from tests.helpers.stack import ROOT, running_stack
from tests.helpers.tui import settle
from tests.surfaces.helpers import screen_text

MAKA = [sys.executable, "-m", "surfaces.cli.main"]


@contextlib.asynccontextmanager
async def attached_client_library(interaction: str) -> AsyncIterator[None]:
    """One more surface: a client library's ``Attach`` stream, open until exit."""
    snapshot = asyncio.Event()

    async def follow() -> None:
        async with Interactions.connect(interaction, surface_kind="script") as client:
            async for event in client.attach():
                if isinstance(event, FormSnapshot):
                    snapshot.set()

    task = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(30):
            await snapshot.wait()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def listed_by_maka_status(state_dir: Path) -> list[str]:
    """The kinds of the attached surfaces ``maka status --json`` lists."""
    process = await asyncio.create_subprocess_exec(
        *MAKA, "status", "--json", "--state-dir", str(state_dir), stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    return sorted(s["kind"] for s in json.loads(out)["surfaces"]["attached"])


@pytest.mark.e2e
async def test_the_tui_shows_how_many_surfaces_are_attached_as_maka_status_lists_them(tmp_path: Path) -> None:
    async with running_stack(tmp_path) as running:
        interaction = running.endpoints.interaction
        app = MakaTui(
            lambda: FollowingBackend(
                lambda: interaction, connect=functools.partial(Interactions.connect, surface_kind="tui")
            )
        )
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot, lambda: app.surface_count == 1, "the TUI counting itself")
            assert "Connected · all visible sessions · 0 pending · 1 surface attached" in screen_text(app)
            assert await listed_by_maka_status(tmp_path / "state") == ["tui"]

            async with attached_client_library(interaction):
                await settle(pilot, lambda: app.surface_count == 2, "the second surface", timeout=30)
                assert "· 2 surfaces attached" in screen_text(app)
                assert await listed_by_maka_status(tmp_path / "state") == ["script", "tui"]

            await settle(pilot, lambda: app.surface_count == 1, "the second surface to leave", timeout=30)
            assert "· 1 surface attached" in screen_text(app)
