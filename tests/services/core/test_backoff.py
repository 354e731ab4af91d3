"""services/core/backoff.py: one jittered exponential backoff."""

from __future__ import annotations

import math

import pytest

from services.core.backoff import Backoff


def test_the_ceiling_doubles_per_failure_up_to_the_maximum() -> None:
    backoff = Backoff(initial=0.1, maximum=1.0)
    assert [backoff.ceiling(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_each_delay_is_drawn_between_half_the_ceiling_and_the_ceiling() -> None:
    backoff = Backoff(initial=0.4, maximum=10.0)
    seen: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        seen.append((low, high))
        return high

    assert backoff.delay(3, uniform=uniform) == pytest.approx(1.6)
    assert seen == [pytest.approx((0.8, 1.6))]


def test_delays_of_many_loops_spread_instead_of_landing_at_one_instant() -> None:
    backoff = Backoff(initial=1.0, maximum=1.0)
    delays = {round(backoff.delay(1), 6) for _ in range(50)}
    assert len(delays) > 10
    assert all(0.5 <= d <= 1.0 for d in delays)


def test_without_jitter_the_delay_is_the_ceiling() -> None:
    assert Backoff(initial=0.5, maximum=4.0, jitter=False).delay(3) == 2.0


def test_a_success_resets_the_cursor_to_the_initial_delay() -> None:
    retry = Backoff(initial=0.1, maximum=5.0, jitter=False).attempts()
    assert [retry.next_delay() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])
    retry.reset()
    assert retry.next_delay() == pytest.approx(0.1)


def test_a_long_outage_never_overflows() -> None:
    assert Backoff(initial=0.1, maximum=30.0).ceiling(10_000) == 30.0
    assert math.isinf(Backoff(initial=math.inf, maximum=math.inf).delay(1))


@pytest.mark.parametrize(("initial", "maximum", "multiplier"), [(-1, 1, 2), (2, 1, 2), (0.1, 1, 0.5)])
def test_a_backoff_that_cannot_grow_sensibly_is_refused(initial: float, maximum: float, multiplier: float) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(initial=initial, maximum=maximum, multiplier=multiplier)


async def test_sleep_waits_the_drawn_delay_and_counts_the_failure() -> None:
    retry = Backoff(initial=0.001, maximum=0.001, jitter=False).attempts()
    assert await retry.sleep() == pytest.approx(0.001)
    assert retry.failures == 1
