"""Fixtures of the web-surface tests: the stack in a thread (Chromium is ``tests/conftest.py``'s)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.redis_server import RedisServer
from tests.surfaces.web.stack import WebStackThread

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "web"


@pytest.fixture(scope="module")
def stack_thread(redis_server: RedisServer) -> Iterator[WebStackThread]:
    """The Interaction service + broker link in a background loop, shared by a module's browser tests."""
    thread = WebStackThread(redis_server.url)
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def session_id() -> str:
    """A fresh session id per test, so tests sharing a stack never see each other's forms."""
    return f"s-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where browser tests save screenshots (git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
