"""surfaces/mcp/drain.py: what a draining front door counts as in flight, waits for, and stops (the processes:
test_front_door_drain.py)."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from surfaces.mcp.drain import Flights


def _request() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/readyz", "headers": []})


async def test_readiness_is_ok_until_the_drain_starts_then_503_draining() -> None:
    flights = Flights()
    before = await flights.readyz(_request())
    assert (before.status_code, before.body) == (200, b"ok")

    assert await flights.drain(0.5) is True  # nothing in flight: it ends at once
    after = await flights.readyz(_request())
    assert (after.status_code, after.body) == (503, b"draining")


async def _drain_started(flights: Flights, budget: float) -> asyncio.Task[bool]:
    """``flights.drain(budget)`` in a task, returned once it runs (waiting, or already done)."""
    started = asyncio.Event()

    async def drain() -> bool:
        started.set()
        return await flights.drain(budget)

    task = asyncio.create_task(drain())
    await started.wait()  # the task ran on until its first wait before this one resumes
    return task


async def test_a_drain_ends_when_the_last_request_and_detached_call_end() -> None:
    flights = Flights()
    release = asyncio.Event()
    entered = [asyncio.Event(), asyncio.Event()]

    async def in_flight(index: int) -> None:
        with flights.request() if index == 0 else flights.detached_call():
            entered[index].set()
            await release.wait()

    calls = [asyncio.create_task(in_flight(index)) for index in (0, 1)]
    for event in entered:
        await event.wait()
    assert (flights.requests, flights.detached) == (1, 1)
    draining = await _drain_started(flights, 60)
    assert not draining.done(), "two calls are in flight"

    release.set()
    async with asyncio.timeout(10):
        assert await draining is True
    await asyncio.gather(*calls)
    assert flights.count == 0


async def test_a_drain_whose_budget_runs_out_reports_what_is_left_and_stop_calls_cancels_it() -> None:
    flights = Flights()
    entered = asyncio.Event()

    async def stuck() -> None:
        with flights.request():
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(stuck())
    await entered.wait()
    assert await flights.drain(0.05) is False

    assert await flights.stop_calls(10) == 1
    assert task.cancelled()
    assert flights.count == 0


async def test_an_outcome_held_for_its_client_counts_until_delivered() -> None:
    flights = Flights()
    delivered = asyncio.Event()
    flights.hold(delivered, 60)
    assert flights.detached == 1
    draining = await _drain_started(flights, 60)
    assert not draining.done(), "the outcome waits for its client"

    delivered.set()
    async with asyncio.timeout(10):
        assert await draining is True
    assert flights.count == 0


async def test_a_held_outcome_is_released_by_stop_calls_even_before_it_ran() -> None:
    flights = Flights()
    flights.hold(asyncio.Event(), 60)
    assert await flights.stop_calls(10) == 1
    assert flights.count == 0


async def test_no_outcome_is_held_without_a_grace_or_once_delivered() -> None:
    flights = Flights()
    flights.hold(asyncio.Event(), 0)
    done = asyncio.Event()
    done.set()
    flights.hold(done, 60)
    assert flights.count == 0
