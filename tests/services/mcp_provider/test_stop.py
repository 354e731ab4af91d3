"""A call's waits run in the call's own task and end on its stop, with the outcomes a separate task gave."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.mcp_provider.errors import CallErrorCode, InteractionAborted, McpToolCallError
from services.mcp_provider.stop import Stop, abortable


async def _suspended(task: asyncio.Task[Any], reached: asyncio.Event) -> None:
    async with asyncio.timeout(10):
        await reached.wait()
    assert not task.done()


async def test_the_work_runs_in_the_waiting_task_and_its_result_comes_back() -> None:
    async def work() -> asyncio.Task[object] | None:
        await asyncio.sleep(0)
        return asyncio.current_task()

    assert await abortable(work(), Stop()) is asyncio.current_task()


async def test_the_works_own_exception_comes_back_unchanged() -> None:
    async def work() -> None:
        await asyncio.sleep(0)
        raise InteractionAborted(CallErrorCode.INTERACTION_CLOSED, "closed")

    with pytest.raises(InteractionAborted):
        await abortable(work(), Stop())


async def test_a_stop_already_set_fails_stopped_without_starting_the_work() -> None:
    started = False

    async def work() -> None:
        nonlocal started
        started = True

    stop = Stop()
    stop.set()
    with pytest.raises(McpToolCallError) as caught:
        await abortable(work(), stop)
    assert caught.value.code is CallErrorCode.STOPPED
    assert not started


async def test_a_stop_cancels_the_work_fails_stopped_and_leaves_the_task_usable() -> None:
    reached, unwound = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        reached.set()
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()

    async def call() -> tuple[CallErrorCode, int]:
        with pytest.raises(McpToolCallError) as caught:
            await abortable(work(), stop)
        await asyncio.sleep(0)  # the task is not left cancelled: its next await runs
        this = asyncio.current_task()
        assert this is not None
        return caught.value.code, this.cancelling()

    stop = Stop()
    task: asyncio.Task[tuple[CallErrorCode, int]] = asyncio.create_task(call())
    await _suspended(task, reached)
    stop.set()
    async with asyncio.timeout(10):
        code, cancelling = await task
    assert code is CallErrorCode.STOPPED
    assert cancelling == 0
    assert unwound.is_set()


async def test_work_that_swallows_the_cancellation_still_fails_stopped() -> None:
    reached = asyncio.Event()

    async def work() -> str:
        reached.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "swallowed"
        return "unreachable"

    stop = Stop()
    task = asyncio.create_task(abortable(work(), stop))
    await _suspended(task, reached)
    stop.set()
    with pytest.raises(McpToolCallError) as caught:
        async with asyncio.timeout(10):
            await task
    assert caught.value.code is CallErrorCode.STOPPED


async def test_work_that_failed_in_the_same_turn_as_the_stop_keeps_its_own_failure() -> None:
    # the broker stream ending: a pending form's future fails, then the stream's calls are stopped
    form: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    reached = asyncio.Event()

    async def work() -> str:
        reached.set()
        return await form

    stop = Stop()
    task = asyncio.create_task(abortable(work(), stop))
    await _suspended(task, reached)
    form.set_exception(InteractionAborted(CallErrorCode.CONNECTION_LOST, "the broker stream ended"))
    stop.set()
    with pytest.raises(InteractionAborted) as caught:
        async with asyncio.timeout(10):
            await task
    assert caught.value.code is CallErrorCode.CONNECTION_LOST


async def test_a_cancellation_from_outside_propagates_as_cancelled_even_with_a_stop() -> None:
    reached = asyncio.Event()

    async def work() -> None:
        reached.set()
        await asyncio.Event().wait()

    stop = Stop()
    task = asyncio.create_task(abortable(work(), stop))
    await _suspended(task, reached)
    task.cancel()
    stop.set()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):
            await task
    assert task.cancelled()


async def test_a_timeout_around_the_wait_still_times_out() -> None:
    async def work() -> None:
        await asyncio.Event().wait()

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await abortable(work(), Stop())


async def test_a_stop_after_the_wait_ended_touches_nothing() -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    stop = Stop()
    assert await abortable(work(), stop) == 7
    stop.set()
    await asyncio.sleep(0)  # no cancellation was left behind for this task
    assert stop.is_set()
    assert await stop.wait() is True
