"""bench.frontdoor: one round's figures and the medians and spread over rounds."""

from __future__ import annotations

from bench import frontdoor


def test_a_round_gives_the_added_p50_the_own_share_and_the_baselines_added_p50() -> None:
    row = frontdoor.round_row(
        {"direct": 4.0, "stack": 8.0, "front_door": 12.5, "base_front_door": 14.0},
        {"front_door": 3.5, "base_front_door": 4.25},
    )

    assert row["added"] == 8.5
    assert row["own_share"] == 4.5
    assert row["base_added"] == 10.0
    assert row["cpu_front_door"] == 3.5
    assert row["cpu_base_front_door"] == 4.25
    assert row["p50_stack"] == 8.0


def test_without_a_baseline_a_round_has_no_baseline_figures() -> None:
    row = frontdoor.round_row({"direct": 4.0, "stack": 8.0, "front_door": 12.5}, {"front_door": 3.5})

    assert "base_added" not in row
    assert row["added"] == 8.5


def test_the_spread_is_the_median_min_and_max_per_figure() -> None:
    rounds = [{"added": 9.0, "cpu": 1.0}, {"added": 7.0, "cpu": 3.0}, {"added": 8.0, "cpu": 2.0}]

    assert frontdoor.spread(rounds) == {"added": (8.0, 7.0, 9.0), "cpu": (2.0, 1.0, 3.0)}
