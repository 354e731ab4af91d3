"""The machine's Chromium (Debian package, installed by ``scripts/setup.sh --test``) that Playwright drives.

Tests launch it by path; the suite never runs ``playwright install``. The ``browser_type_launch_args`` fixture of
``tests/conftest.py`` launches it so for every test that uses pytest-playwright's ``page``.
"""

from __future__ import annotations

from typing import Any

CHROMIUM = "/usr/bin/chromium"

CHROMIUM_ARGS = ("--disable-gpu", "--disable-dev-shm-usage")
"""No GPU process, and shared memory in /tmp rather than a container's small /dev/shm."""


def launch_args(base: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments ``base`` with :data:`CHROMIUM` and :data:`CHROMIUM_ARGS`."""
    return {**base, "executable_path": CHROMIUM, "args": list(CHROMIUM_ARGS)}
