"""An asyncio event loop in a background thread, for sync tests (Playwright's sync API, pytest's sync
fixtures) that drive async stacks: :meth:`LoopThread.run` executes a coroutine there with a bounded wait."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """``start()`` the loop's thread, ``run(coro)`` / ``submit(coro)`` on it, ``stop()`` ends and closes it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait (at most ``timeout`` s) for its result."""
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop, join its thread (bounded) and close the loop."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        self.loop.close()
