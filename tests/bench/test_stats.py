"""bench.stats: summaries in milliseconds and stack/anchor ratios."""

from __future__ import annotations

import pytest

from bench.stats import ratio, summarize


def test_summary_converts_seconds_to_milliseconds_with_interpolated_percentiles() -> None:
    summary = summarize([0.001 * n for n in range(1, 101)])  # 1..100 ms
    assert summary.n == 100
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p99 == pytest.approx(99.01)
    assert summary.min == pytest.approx(1.0)
    assert summary.max == pytest.approx(100.0)
    assert summary.mean == pytest.approx(50.5)


def test_empty_samples_give_a_zero_summary_that_serialises() -> None:
    summary = summarize([])
    assert summary.n == 0
    assert summary.to_json() == {"n": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0, "min": 0.0, "max": 0.0}


def test_ratio_is_stack_over_anchor_and_none_without_an_anchor() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(1.0, 0.0) is None
