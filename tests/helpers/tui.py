"""Waiting on the Textual app in tests: Textual's own pause between checks, bounded by :func:`eventually`."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from surfaces.tui.app import MakaTui
from tests.helpers.waiting import eventually


async def settle(pilot: Pilot[None], check: Callable[[], object], what: str, *, timeout: float = 20.0) -> None:
    """Let the app process messages until it is idle and ``check()`` holds; fail after ``timeout`` s naming
    ``what`` (generous: Textual is slow on a loaded machine)."""
    app = pilot.app
    assert isinstance(app, MakaTui)

    async def settled() -> bool:
        if app.idle and check():
            return True
        await pilot.pause(0.01)  # Textual's pause: a time slice for the app, then a screen refresh
        return False

    await eventually(settled, timeout=timeout, interval=0, what=what)
    await pilot.pause()  # let layout catch up before the next click
