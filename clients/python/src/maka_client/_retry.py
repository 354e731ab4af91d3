"""One reconnect backoff for the client: exponential with jitter, reset on success.

A copy of the runtime's ``services/core/backoff.py`` (same API, same numbers): this library ships alone
(its own ``pyproject.toml``, installed into callers' environments without the runtime) and must never import
``services``, so it carries its own. ``tests/clients/test_retry.py`` keeps the two equal.

Modelled on google-api-core's ``exponential_sleep_generator``: each delay is a uniform draw between half
the current ceiling and the ceiling, and the ceiling grows by ``multiplier`` per failure up to ``maximum``.
The jitter is what keeps every surface of a restarted service from reconnecting at the same instant.

Use it as a value (``Backoff``) and one mutable cursor per reconnecting loop (``Backoff.attempts()``)::

    retry = backoff.attempts()
    while True:
        try:
            await session()
            retry.reset()          # a session that ran resets the ceiling
        except Failure:
            ...
        await retry.sleep()        # or: delay = retry.next_delay()

``maximum`` may be ``math.inf`` only when ``initial`` is too (a delay that never ends: wait for an event).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff", "BackoffAttempts"]


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: ``initial`` seconds, times ``multiplier`` per failed attempt, at most ``maximum``,
    each drawn uniformly between half the ceiling and the ceiling (``jitter=False``: the ceiling itself)."""

    initial: float = 0.2
    maximum: float = 5.0
    multiplier: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if not self.initial >= 0 or not self.maximum >= self.initial or not self.multiplier >= 1:
            raise ValueError("backoff needs 0 <= initial <= maximum and multiplier >= 1")

    def ceiling(self, attempt: int) -> float:
        """The largest delay before reconnect ``attempt`` (1-based)."""
        if math.isinf(self.initial):
            return math.inf
        exponent = max(0, attempt - 1)
        # Bounded before the power so a long outage never overflows a float.
        if self.initial == 0 or exponent > 1024:
            return self.maximum if self.initial else 0.0
        return min(self.maximum, self.initial * self.multiplier**exponent)

    def delay(self, attempt: int, *, uniform: Callable[[float, float], float] = random.uniform) -> float:
        """Seconds to wait before reconnect ``attempt`` (1-based)."""
        top = self.ceiling(attempt)
        if not self.jitter or math.isinf(top) or top == 0:
            return top
        return uniform(top / 2, top)

    def attempts(self) -> BackoffAttempts:
        """A fresh cursor for one reconnecting loop."""
        return BackoffAttempts(self)


@dataclass
class BackoffAttempts:
    """The mutable side of :class:`Backoff`: how many failures in a row one loop has seen."""

    backoff: Backoff
    failures: int = field(default=0)

    def next_delay(self) -> float:
        """Count one more failure and return the delay to wait before the next attempt."""
        self.failures += 1
        return self.backoff.delay(self.failures)

    def reset(self) -> None:
        """A success: the next failure waits ``initial`` again."""
        self.failures = 0

    async def sleep(self) -> float:
        """Count one failure and sleep its delay (reconnect backoff, not synchronisation). Returns the delay."""
        delay = self.next_delay()
        if math.isinf(delay):
            await asyncio.Event().wait()  # pragma: no cover - an infinite backoff waits for cancellation
        await asyncio.sleep(delay)
        return delay
