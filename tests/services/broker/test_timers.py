"""Unit tests of the execution timers (`services/broker/timers.py`): pure logic on the event loop's clock."""

from __future__ import annotations

import asyncio

from services.broker.call_log import CallLog
from services.broker.invocation import Invocation, InvocationState
from services.broker.timers import ExecutionTimers, run_every
from tests.helpers.waiting import eventually


def _invocation(name: str = "inv_1") -> Invocation:
    return Invocation(
        invocation_id=name,
        session_id="s1",
        turn_id="t1",
        tool_use_id=name,
        qualified_name="examples:deploy",
        arguments_json="{}",
        registration=None,
        log=CallLog(16),
    )


class _Expired:
    def __init__(self) -> None:
        self.fired: list[tuple[str, str]] = []

    def __call__(self, invocation: Invocation, message: str) -> None:
        self.fired.append((invocation.invocation_id, message))


async def test_an_armed_timer_reports_its_invocation_once_the_execution_timeout_passed() -> None:
    expired = _Expired()
    timers = ExecutionTimers(0.05, 0.0, expired)
    invocation = _invocation()
    timers.arm(invocation)
    await eventually(lambda: bool(expired.fired), what="the timer fired")
    assert expired.fired == [("inv_1", "the provider execution timer fired (no progress within the execution timeout)")]


async def test_a_disarmed_timer_never_reports_and_counts_the_execution_it_saw() -> None:
    expired = _Expired()
    timers = ExecutionTimers(0.01, 0.0, expired)
    suspended, later = _invocation("inv_suspended"), _invocation("inv_later")
    timers.arm(suspended)
    timers.disarm(suspended)
    assert suspended.timer is None
    assert suspended.run_spent >= 0.0
    timers.execution_timeout = 0.05
    timers.arm(later)  # due after the disarmed one would have been
    await eventually(lambda: bool(expired.fired), what="the later timer fired")
    assert [name for name, _ in expired.fired] == ["inv_later"]


async def test_a_timer_of_an_invocation_awaiting_a_form_or_settled_does_not_report() -> None:
    expired = _Expired()
    timers = ExecutionTimers(0.01, 0.0, expired)
    awaiting, settled, running = _invocation("inv_awaiting"), _invocation("inv_settled"), _invocation("inv_running")
    for invocation in (awaiting, settled):
        timers.arm(invocation)
    awaiting.move(InvocationState.OPENING)
    awaiting.move(InvocationState.AWAITING)
    settled.end_as(InvocationState.FAILED)
    timers.execution_timeout = 0.05
    timers.arm(running)
    await eventually(lambda: bool(expired.fired), what="the running invocation's timer fired")
    assert [name for name, _ in expired.fired] == ["inv_running"]


async def test_progress_re_arms_only_a_running_timer_and_only_when_a_maximum_bounds_it() -> None:
    unbounded = ExecutionTimers(10.0, 0.0, _Expired())
    invocation = _invocation()
    unbounded.arm(invocation)
    first = invocation.timer
    unbounded.rearm_on_progress(invocation)
    assert invocation.timer is first

    bounded = ExecutionTimers(10.0, 60.0, _Expired())
    bounded.rearm_on_progress(invocation)
    assert invocation.timer is not first
    assert first is not None
    assert first.cancelled()

    invocation.move(InvocationState.OPENING)
    opening = invocation.timer
    bounded.rearm_on_progress(invocation)
    assert invocation.timer is opening
    bounded.disarm(invocation)


async def test_the_maximum_cuts_the_delay_to_what_is_left_and_names_itself_when_it_fires() -> None:
    expired = _Expired()
    timers = ExecutionTimers(10.0, 1.0, expired)
    invocation = _invocation()
    invocation.run_spent = 0.95  # earlier legs used almost all of the maximum
    timers.arm(invocation)
    assert invocation.timer is not None
    assert invocation.timer.when() - asyncio.get_running_loop().time() <= 0.05 + 0.01
    await eventually(lambda: bool(expired.fired), what="the maximum reached")
    [(_, message)] = expired.fired
    assert "the maximum execution time (1 s)" in message


async def test_run_every_ticks_after_each_interval_until_cancelled() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(run_every(0.01, lambda: ticks.append(len(ticks))))
    await eventually(lambda: len(ticks) >= 3, what="three ticks")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert ticks[:3] == [0, 1, 2]
