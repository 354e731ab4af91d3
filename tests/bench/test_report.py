"""bench.report: targets judged against measured figures; Markdown and PNG written from a results dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import report


def _summary(p50: float, p99: float) -> dict[str, float | int]:
    return {"n": 10, "p50": p50, "p90": p99, "p99": p99, "mean": p50, "min": p50, "max": p99}


def _cpu(anchor_total: float, stack_total: float) -> dict[str, Any]:
    return {
        "anchor": {"calls": 10, "ms_per_call": {"bench": 1.0, "example_server": anchor_total - 1.0},
                   "total_ms_per_call": anchor_total},
        "stack": {"calls": 10, "ms_per_call": {"bench": 1.0, "broker": stack_total - 1.0},
                  "total_ms_per_call": stack_total},
        "ratio_total": round(stack_total / anchor_total, 3),
    }  # fmt: skip


def _front_door_row(tool: str, level: int, added_p50: float) -> dict[str, Any]:
    def side(p50: float, processes: dict[str, float]) -> dict[str, Any]:
        total = sum(processes.values())
        return {
            "calls_per_s": 100.0,
            "latency_ms": _summary(p50, p50 + 2),
            "answer_to_result_ms": _summary(0, 0),
            "errors": 0,
            "cpu": {"calls": 10, "ms_per_call": processes, "total_ms_per_call": total},
        }

    return {
        "tool": tool,
        "concurrency": level,
        "direct": side(3.0, {"bench": 1.0, "example_server": 1.0}),
        "stack": side(3.0 + added_p50 / 2, {"bench": 1.0, "example_server": 1.0, "broker": 1.5}),
        "front_door": side(3.0 + added_p50, {"bench": 1.0, "example_server": 1.0, "broker": 1.5, "mcp": 2.5}),
        "added_ms": {"p50": added_p50, "p99": added_p50},
        "added_p50_split_ms": {"broker_path": added_p50 / 2, "front_door": added_p50 / 2},
        "ratio_calls_per_s": 0.5,
    }


def _results(
    deploy_ratio: float,
    answer_p50: float,
    delivery_p99: float,
    bytes_per_form: float,
    *,
    throughput_ratio: float = 1.0,
    cpu_ratio: float = 2.0,
    front_door_added_p50: float = 1.0,
) -> dict[str, Any]:
    side = {
        tool: {"tool": tool, "latency_ms": _summary(5, 9), "answer_to_result_ms": _summary(answer_p50, 9), "errors": 0}
        for tool in ("ping", "deploy")
    }
    point = {"calls_per_s": 100.0, "latency_ms": _summary(5, 9), "answer_to_result_ms": _summary(2, 3), "errors": 0}
    return {
        "meta": {
            "started_at": "2026-11-30T00:00:00+00:00",
            "duration_s": 1.0,
            "machine": {"cpu": "test cpu", "cpus": 2, "mem_total_mib": 1},
            "versions": {"git": "abc", "python": "3.11", "mcp": "2.3.0", "grpcio": "1.85", "redis-server": "v=7"},
            "parameters": {"calls": 1},
        },
        "latency": {
            "anchor": side,
            "stack": side,
            "ratio": {
                "ping_p50": 1.0,
                "ping_p99": 1.0,
                "deploy_p50": deploy_ratio,
                "deploy_p99": 1.0,
                "answer_to_result_p50": deploy_ratio,
            },
        },
        "sweep": [
            {
                "concurrency": n,
                "anchor": point,
                "stack": point,
                "ratio_calls_per_s": throughput_ratio,
                "cpu": _cpu(4.0, 4.0 * cpu_ratio),
            }
            for n in (1, 10, 50, 200)
        ],
        "sweep_ping": [
            {
                "concurrency": n,
                "tool": "ping",
                "anchor": point,
                "stack": point,
                "ratio_calls_per_s": throughput_ratio,
                "cpu": _cpu(2.0, 2.0 * cpu_ratio),
            }
            for n in (1, 10, 50, 200)
        ],
        "front_door": [
            _front_door_row(tool, n, front_door_added_p50) for tool in ("ping", "deploy") for n in (1, 10, 50)
        ],
        "scale": {
            "pending": 10,
            "sessions": 2,
            "redis_used_memory_before": 0,
            "redis_used_memory_after": 10,
            "redis_bytes_per_pending_form": bytes_per_form,
            "rss_kib_before": {"redis": 1},
            "rss_kib_after": {"redis": 2},
            "fill_s": 1.0,
            "fill_opens_per_s": 10.0,
            "delivery_during_fill_ms": _summary(1, 2),
            "delivery_at_full_ms": _summary(1, delivery_p99),
            "epoch_change_closed": 10,
            "epoch_change_reply_s": 0.1,
            "epoch_change_surface_s": 0.2,
            "notes": ["played the broker"],
        },
    }


def test_targets_are_met_only_within_their_limits() -> None:
    results = _results(1.2, 4.9, 19.0, 4000, throughput_ratio=0.6, cpu_ratio=2.5, front_door_added_p50=2.0)
    met = {row["key"]: row["met"] for row in report.targets(results)}
    assert met == dict.fromkeys(report.LIMITS, True)
    results = _results(1.6, 5.1, 21.0, 4100, throughput_ratio=0.59, cpu_ratio=2.6, front_door_added_p50=2.01)
    results["latency"]["ratio"]["ping_p50"] = 1.31
    missed = {row["key"]: row["met"] for row in report.targets(results)}
    assert missed == dict.fromkeys(report.LIMITS, False)


def test_the_cpu_target_is_judged_at_ten_in_flight_and_missing_cpu_leaves_it_unjudged() -> None:
    results = _results(1.0, 1.0, 1.0, 1.0)
    results["sweep"][1]["cpu"] = _cpu(4.0, 12.0)
    rows = {row["key"]: row for row in report.targets(results)}
    assert rows["cpu_per_call_ratio"]["measured"] == 3.0
    assert rows["cpu_per_call_ratio"]["met"] is False
    for point in results["sweep"]:
        del point["cpu"]
    assert {row["key"]: row for row in report.targets(results)}["cpu_per_call_ratio"]["met"] is None


def test_a_missing_scale_phase_leaves_its_targets_unjudged() -> None:
    results = _results(1.0, 1.0, 1.0, 1.0)
    del results["scale"]
    rows = {row["key"]: row for row in report.targets(results)}
    assert rows["delivery_p99_ms"]["met"] is None
    assert rows["redis_bytes_per_form"]["measured"] is None
    assert rows["one_form_p50_ratio"]["met"] is True


def test_write_produces_json_markdown_and_a_png(tmp_path: Path) -> None:
    results = _results(2.0, 1.0, 1.0, 1.0)
    report.write(results, {"anchor deploy": [1.0, 2.0, 3.0]}, [1.0, 1.5, 2.0], tmp_path, "run")
    markdown = (tmp_path / "run.md").read_text()
    assert "| one-form call p50, stack / anchor <= 1.5 | 2.000 | **no** |" in markdown
    assert "Note: played the broker" in markdown
    assert "## CPU per call" in markdown
    assert "| 10 | 1.00 | 3.00 | 4.00 | 1.00 | 7.00 | 8.00 | 2.0 |" in markdown
    assert (tmp_path / "run.json").read_text().startswith("{")
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_report_with_a_target_not_met_points_to_the_profile_analysis_and_one_with_all_met_does_not(
    tmp_path: Path,
) -> None:
    report.write(_results(2.0, 1.0, 1.0, 1.0), {"anchor deploy": [1.0, 2.0]}, [1.0, 1.5], tmp_path, "missed")
    assert f"]({report.PROFILE_NOTES}) beside this report" in (tmp_path / "missed.md").read_text()
    met = _results(1.2, 4.9, 19.0, 4000, throughput_ratio=0.6, cpu_ratio=2.5)
    report.write(met, {"anchor deploy": [1.0, 2.0]}, [1.0, 1.5], tmp_path, "met")
    assert report.PROFILE_NOTES not in (tmp_path / "met.md").read_text()


def test_the_no_form_throughput_targets_are_judged_on_the_ping_sweep_not_the_deploy_sweep() -> None:
    results = _results(1.0, 1.0, 1.0, 1.0, throughput_ratio=0.9)
    for point in results["sweep_ping"]:
        point["ratio_calls_per_s"] = 0.5
    rows = {row["key"]: row for row in report.targets(results)}
    assert [rows[f"ping_calls_per_s_ratio_{n}"]["met"] for n in (10, 50, 200)] == [False, False, False]
    assert [rows[f"calls_per_s_ratio_{n}"]["met"] for n in (10, 50, 200)] == [True, True, True]
    assert rows["ping_calls_per_s_ratio_50"]["target"] == "no-form calls/s at 50 in flight, stack / anchor >= 0.6"
    del results["sweep_ping"]
    assert {row["key"]: row for row in report.targets(results)}["ping_calls_per_s_ratio_10"]["met"] is None


def test_the_front_door_target_is_the_added_no_form_p50_at_one_in_flight() -> None:
    results = _results(1.0, 1.0, 1.0, 1.0, front_door_added_p50=1.5)
    for row in results["front_door"]:
        if (row["tool"], row["concurrency"]) != ("ping", 1):
            row["added_ms"]["p50"] = 50.0
    rows = {row["key"]: row for row in report.targets(results)}
    assert rows["front_door_added_p50_ms"]["measured"] == 1.5
    assert rows["front_door_added_p50_ms"]["met"] is True
    del results["front_door"]
    assert {row["key"]: row for row in report.targets(results)}["front_door_added_p50_ms"]["met"] is None


def test_the_report_has_the_no_form_sweep_and_the_front_door_tables_and_says_where_an_excess_goes(
    tmp_path: Path,
) -> None:
    report.write(_results(1.0, 1.0, 1.0, 1.0, front_door_added_p50=3.0), {"a": [1.0]}, [], tmp_path, "door")
    page = (tmp_path / "door.md").read_text()
    assert "## Concurrency sweep (no-form Tool `ping`)" in page
    assert "## CPU per call (the sweep's `ping` calls" in page
    assert "| ping | 1 | 100.0 | 100.0 | 0.5 | 3.00/5.00 | 6.00/8.00 | 3.00/3.00 | 1.50 / 1.50 | 0/0/0 |" in page
    assert "| ping | 1 | 1.00 | 1.00 | 1.50 | 2.50 | 6.00 | 2.00 |" in page
    assert "| front door added p50, no-form <= 2 ms | 3.000 | **no** |" in page
    assert "Where the excess goes (no-form, 1 in flight): added p50 3.00 ms = broker path 1.50 ms" in page
    assert "most CPU per call: mcp 2.50 ms, broker 1.50 ms" in page
    assert (
        "The front door's share (1.50 ms) is not all its own process: its process spends 2.50 ms of CPU per call; "
        "the calling process +0.00 ms against the stack row" in page
    )
    assert "the other processes +0.00 ms; -1.00 ms of wall time is left" in page
    report.write(_results(1.0, 1.0, 1.0, 1.0, front_door_added_p50=1.0), {"a": [1.0]}, [], tmp_path, "fast")
    assert "Where the excess goes" not in (tmp_path / "fast.md").read_text()


def test_the_front_door_share_counts_the_calling_process_and_the_others_before_any_wait() -> None:
    row = _front_door_row("ping", 1, 9.0)
    row["front_door"]["cpu"]["ms_per_call"].update({"bench": 2.8, "provider": 0.5})
    row["stack"]["cpu"]["ms_per_call"]["bench"] = 1.0

    share = report.front_door_share(row)

    # front door - stack = 4.50 ms: mcp 2.50 + the SDK Client's 1.80 more than the gRPC caller + provider 0.50
    assert share == {"door_cpu": 2.5, "caller_cpu": 1.8, "others_cpu": 0.5, "rest": -0.3}
    del row["front_door"]["cpu"]["ms_per_call"]["mcp"]
    assert report.front_door_share(row) is None
