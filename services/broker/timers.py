"""The broker's timers: each invocation's execution timer, and the periodic provider liveness sweep.

The execution timer (RFC criterion 10; docs/design.md#lifecycle) runs while the provider executes
(``RUNNING``/``OPENING``), is suspended while a form is pending and re-armed fresh after it was answered; a
progress notification re-arms it, never past ``max_execution_seconds`` of execution in total. When it fires,
:class:`ExecutionTimers` tells the broker, which fails the invocation ``EXECUTION_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from services.broker.invocation import Invocation, InvocationState

TimerExpired = Callable[[Invocation, str], None]
"""Called with the invocation whose execution timer fired and the failure message to report."""


class ExecutionTimers:
    """Arms, suspends and re-arms the execution timers of invocations (kept on each :class:`Invocation`).

    Args:
        execution_timeout: provider execution budget of one leg, seconds; progress re-arms it.
        max_execution_seconds: most provider execution (outside forms) of one invocation, however
            often progress re-arms the timer; 0 = progress does not re-arm.
        on_expired: called when a timer fires while its invocation still runs.
    """

    def __init__(self, execution_timeout: float, max_execution_seconds: float, on_expired: TimerExpired) -> None:
        self.execution_timeout = execution_timeout
        self._max_execution = max_execution_seconds
        self._on_expired = on_expired

    def arm(self, invocation: Invocation) -> None:
        """(Re)start the execution timer: ``execution_timeout``, cut to what is left of
        ``max_execution_seconds`` when that is set."""
        self.disarm(invocation)
        invocation.timer_generation += 1
        generation = invocation.timer_generation
        invocation.run_started = time.monotonic()
        delay = self.execution_timeout
        if self._max_execution > 0:
            delay = max(0.0, min(delay, self._max_execution - invocation.run_spent))
        invocation.timer = asyncio.get_running_loop().call_later(delay, self._fired, invocation, generation)

    def disarm(self, invocation: Invocation) -> None:
        """Stop the timer (a form is pending, or the invocation settled), counting the execution it saw."""
        if invocation.timer is not None:
            invocation.timer.cancel()
            invocation.timer = None
            invocation.run_spent += time.monotonic() - invocation.run_started
        invocation.timer_generation += 1

    def rearm_on_progress(self, invocation: Invocation) -> None:
        """A progress notification re-arms a running execution timer (docs/operations.md#timers-and-progress) when
        ``max_execution_seconds`` bounds the total (time with a form pending does not count)."""
        if invocation.state is InvocationState.RUNNING and self._max_execution > 0 and invocation.timer is not None:
            self.arm(invocation)

    def _fired(self, invocation: Invocation, generation: int) -> None:
        if generation != invocation.timer_generation or invocation.state not in (
            InvocationState.RUNNING,
            InvocationState.OPENING,
        ):
            return
        used = invocation.run_spent + time.monotonic() - invocation.run_started
        if self._max_execution > 0 and used >= self._max_execution - 0.001:
            message = f"the provider ran {used:.0f} s in total, the maximum execution time ({self._max_execution:g} s)"
        else:
            message = "the provider execution timer fired (no progress within the execution timeout)"
        self._on_expired(invocation, message)


async def run_every(seconds: float, tick: Callable[[], None]) -> None:
    """Call ``tick`` every ``seconds`` (the first time after one interval) until cancelled."""
    while True:
        await asyncio.sleep(seconds)
        tick()
