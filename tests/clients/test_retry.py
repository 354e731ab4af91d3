"""The client's backoff is the runtime's (same API, same numbers) though the library ships its own copy."""

from __future__ import annotations

import inspect

import pytest

from maka_client import ReattachPolicy
from maka_client import _retry as client_retry
from services.core import backoff as runtime_backoff


def test_the_client_carries_the_runtimes_backoff_code_unchanged() -> None:
    # The library may not import the runtime; its copy must not drift from the one every service uses.
    client = inspect.getsource(client_retry)
    runtime = inspect.getsource(runtime_backoff)
    assert client[client.index("from __future__") :] == runtime[runtime.index("from __future__") :]


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 10, 2000])
def test_the_client_and_the_runtime_give_the_same_delay_for_the_same_draw(attempt: int) -> None:
    def top(low: float, high: float) -> float:
        return high

    client = client_retry.Backoff(initial=0.1, maximum=1.0, multiplier=2.0)
    runtime = runtime_backoff.Backoff(initial=0.1, maximum=1.0, multiplier=2.0)
    assert client.delay(attempt, uniform=top) == runtime.delay(attempt, uniform=top)


def test_reattach_delays_grow_with_attempts_and_stay_within_the_cap() -> None:
    policy = ReattachPolicy(initial_delay=0.1, max_delay=1.0)
    for attempt, ceiling in ((1, 0.1), (2, 0.2), (3, 0.4), (10, 1.0)):
        delay = policy.delay(attempt)
        assert ceiling / 2 <= delay <= ceiling


def test_a_cursor_resets_to_the_initial_delay_after_a_success() -> None:
    attempts = ReattachPolicy(initial_delay=0.1, max_delay=1.0).backoff.attempts()
    for _ in range(5):
        attempts.next_delay()
    attempts.reset()
    assert 0.05 <= attempts.next_delay() <= 0.1
