"""A call's stop signal, and waits it aborts inside the waiting task (no watcher task per wait).

A provider call waits on three things that ``stop`` (the broker's ``CancelInvocation``, the broker stream
ending, the provider shutting down) must abort: each ``tools/call`` leg, and each form of a round. Each
wait used to run as a task of its own beside a second task blocked in ``stop.wait()``, with
``asyncio.wait(FIRST_COMPLETED)`` over the pair: two tasks, a waiter future and four done-callbacks per
wait, on every call. :func:`abortable` runs the awaitable in the calling task instead, and :class:`Stop`
cancels that task when it is set, the way ``asyncio.timeout`` does: no task at all, and only a loop
callback when the stop actually comes.

The outcome is the same as before: the work's own result or exception when it ends first (also when it
ends in the same loop turn as the stop, e.g. a form's future failed just before its stream's calls are
stopped), else ``STOPPED`` (the work cancelled; whatever it raised while unwinding is dropped), and a
cancellation of the calling task from outside still propagates as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TypeVar

from services.mcp_provider.errors import CallErrorCode, McpToolCallError

T = TypeVar("T")


class Stop(asyncio.Event):
    """An :class:`asyncio.Event` whose :meth:`set` also runs the callbacks of the waits it aborts."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        """Set the event (waking its ``wait()`` callers) and run every registered callback once."""
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    @contextlib.contextmanager
    def on_set(self, callback: Callable[[], None]) -> Iterator[None]:
        """Run ``callback`` when the event is set while the block runs (the event is not set on entry)."""
        self._callbacks.append(callback)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):  # already run by set()
                self._callbacks.remove(callback)


def stopped() -> McpToolCallError:
    """The error of a call stopped by its :class:`Stop`."""
    return McpToolCallError(CallErrorCode.STOPPED, "the call was stopped")


async def abortable(awaitable: Awaitable[T], stop: Stop) -> T:
    """Await ``awaitable`` in this task unless ``stop`` is set first; then cancel it and raise ``STOPPED``."""
    if stop.is_set():
        if isinstance(awaitable, Coroutine):
            awaitable.close()
        raise stopped()
    task = asyncio.current_task()
    assert task is not None, "abortable() runs in a task"
    loop = asyncio.get_running_loop()
    cancelling = task.cancelling()
    pending: asyncio.Handle | None = None
    cancelled = False

    def cancel() -> None:
        nonlocal cancelled
        cancelled = True
        task.cancel()

    def on_stop() -> None:
        # One loop turn later, as the watcher task's wake-up was: work that ended in this turn keeps its outcome.
        nonlocal pending
        pending = loop.call_soon(cancel)

    with stop.on_set(on_stop):
        try:
            result = await awaitable
        except BaseException as error:
            if pending is not None:
                pending.cancel()
            if not cancelled:
                raise
            if task.uncancel() > cancelling and isinstance(error, asyncio.CancelledError):
                raise  # cancelled from outside too: that wins, as asyncio.timeout does
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            raise stopped() from None
        if pending is not None:
            pending.cancel()
        if cancelled:  # the work swallowed the cancellation and returned: stopped all the same
            task.uncancel()
            raise stopped()
        return result
