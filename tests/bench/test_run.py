"""bench.run: the whole benchmark in --quick mode (a smoke test of every code path, not a timed assertion)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.report import LIMITS
from bench.run import main_async, parse_args


def test_quick_flag_shrinks_every_size_and_keeps_the_output_directory(tmp_path: Path) -> None:
    params, out_dir, stem = parse_args(["--quick", "--out", str(tmp_path), "--stem", "smoke"])
    assert params.quick
    assert params.pending < 100
    assert params.concurrency == (1, 4)
    assert params.front_door_concurrency == (1, 4)
    assert params.front_door_calls < 100
    assert (out_dir, stem) == (tmp_path, "smoke")


def test_sweep_levels_get_at_least_five_rounds_of_calls() -> None:
    params, _, _ = parse_args(["--concurrency", "1,200", "--sweep-calls", "50"])
    assert params.concurrency == (1, 200)
    assert params.sweep_calls_for(1) == 50
    assert params.sweep_calls_for(200) == 1000


def test_the_front_door_phase_defaults_to_one_ten_and_fifty_in_flight() -> None:
    params, _, _ = parse_args([])
    assert params.front_door_concurrency == (1, 10, 50)
    params, _, _ = parse_args(["--front-door-concurrency", "2,3", "--front-door-calls", "7"])
    assert (params.front_door_concurrency, params.front_door_calls) == ((2, 3), 7)


def test_invalid_sizes_are_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--concurrency", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--front-door-concurrency", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--front-door-calls", "0"])


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_quick_run_measures_both_sides_and_the_scale_phase_and_writes_results(tmp_path: Path) -> None:
    params, _, _ = parse_args(["--quick", "--profile"])
    code = await main_async(params, tmp_path, "smoke")
    assert code == 0
    results = json.loads((tmp_path / "smoke.json").read_text())

    for side in ("anchor", "stack"):
        for tool in ("ping", "deploy"):
            run = results["latency"][side][tool]
            assert run["errors"] == 0, run["first_error"]
            assert run["latency_ms"]["n"] == params.calls
        # the one-form Tool went through an answer on both sides
        assert results["latency"][side]["deploy"]["answer_to_result_ms"]["n"] == params.calls
        assert results["latency"][side]["ping"]["answer_to_result_ms"]["n"] == 0
    phases = results["latency"]["stack"]["deploy"]["phases_ms"]
    assert all(summary["n"] == params.calls for summary in phases.values())
    assert sum(summary["mean"] for summary in phases.values()) == pytest.approx(
        results["latency"]["stack"]["deploy"]["latency_ms"]["mean"], rel=0.01
    )
    assert [point["concurrency"] for point in results["sweep"]] == list(params.concurrency)
    assert [point["concurrency"] for point in results["sweep_ping"]] == list(params.concurrency)
    for point in results["sweep_ping"]:
        assert point["tool"] == "ping"
        assert point["anchor"]["errors"] == point["stack"]["errors"] == 0, point
        assert point["anchor"]["calls_per_s"] > 0
        assert point["stack"]["answer_to_result_ms"]["n"] == 0  # no form
        assert point["cpu"]["ratio_total"] > 0
        assert "mcp" not in point["cpu"]["stack"]["ms_per_call"]  # the idle front door is not the stack side
    for point in results["sweep"]:
        assert point["anchor"]["errors"] == point["stack"]["errors"] == 0
        assert point["stack"]["calls_per_s"] > 0
        for side, processes in (
            ("anchor", {"bench", "example_server"}),
            ("stack", {"interaction", "broker", "provider"}),
        ):
            cpu = point["cpu"][side]
            assert processes <= set(cpu["ms_per_call"])
            assert cpu["total_ms_per_call"] > 0
        assert point["cpu"]["ratio_total"] > 0

    front_door = results["front_door"]
    assert [(row["tool"], row["concurrency"]) for row in front_door] == [
        (tool, level) for tool in ("ping", "deploy") for level in params.front_door_concurrency
    ]
    for row in front_door:
        for side in ("direct", "stack", "front_door"):
            assert row[side]["errors"] == 0, row[side]["first_error"]
            assert row[side]["calls"] >= params.front_door_calls
            assert row[side]["calls_per_s"] > 0
        assert "mcp" in row["front_door"]["cpu"]["ms_per_call"]
        assert row["added_ms"]["p50"] == pytest.approx(
            row["front_door"]["latency_ms"]["p50"] - row["direct"]["latency_ms"]["p50"], abs=0.01
        )
    # the one-form call through the front door went through the answering surface
    assert all(row["stack"]["answer_to_result_ms"]["n"] > 0 for row in front_door if row["tool"] == "deploy")

    scale = results["scale"]
    assert scale["pending"] == params.pending
    assert scale["delivery_at_full_ms"]["n"] == params.probes
    assert scale["epoch_change_closed"] == params.pending + params.probes
    assert scale["redis_bytes_per_pending_form"] > 0
    assert {"interaction", "broker", "provider", "redis"} <= set(scale["rss_kib_after"])

    team = results["team_scale"]
    assert team["snapshots"] == team["subscribers"] == params.fanout_hosts * params.fanout_sessions
    failover = results["failover"]
    assert failover["calls"] == params.failover_calls
    assert failover["lost"] == failover["misdelivered"] == []
    assert failover["completed"] == params.failover_calls

    assert set(results["profile"]["reports"]) == {"interaction", "broker", "provider"}
    assert all(ms is not None and ms > 0 for ms in results["profile"]["cpu_ms_per_call"].values())
    for report_path in results["profile"]["reports"].values():
        assert "Recorded:" in (tmp_path / report_path).read_text()
    assert {row["key"] for row in results["targets"]} == set(LIMITS)
    assert {"one_form_p50_ratio", "cpu_per_call_ratio", "delivery_p99_ms"} <= set(LIMITS)
    assert "## Targets" in (tmp_path / "smoke.md").read_text()
    page = (tmp_path / "smoke.md").read_text()
    assert "## CPU per call" in page
    assert "## Concurrency sweep (no-form Tool `ping`)" in page
    assert "## MCP front door" in page
    rows = {row["key"]: row for row in results["targets"]}
    assert rows["front_door_added_p50_ms"]["measured"] is not None
    assert rows["ping_calls_per_s_ratio_10"]["measured"] is None  # quick mode sweeps 1 and 4 in flight
    assert (tmp_path / "smoke.png").read_bytes()[:4] == b"\x89PNG"
