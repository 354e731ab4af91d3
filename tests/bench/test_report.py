"""bench.report: targets judged against measured figures; Markdown and PNG written from a results dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import report


def _summary(p50: float, p99: float) -> dict[str, float | int]:
    return {"n": 10, "p50": p50, "p90": p99, "p99": p99, "mean": p50, "min": p50, "max": p99}


def _results(deploy_ratio: float, answer_p50: float, delivery_p99: float, bytes_per_form: float) -> dict[str, Any]:
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
                "answer_to_result_p50": 1.0,
            },
        },
        "sweep": [{"concurrency": 1, "anchor": point, "stack": point, "ratio_calls_per_s": 1.0}],
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
    met = {row["key"]: row["met"] for row in report.targets(_results(1.4, 4.9, 19.0, 4000))}
    assert met == dict.fromkeys(report.LIMITS, True)
    missed = {row["key"]: row["met"] for row in report.targets(_results(1.6, 5.1, 21.0, 4100))}
    assert missed == dict.fromkeys(report.LIMITS, False)


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
    assert (tmp_path / "run.json").read_text().startswith("{")
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
