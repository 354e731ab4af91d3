"""bench.pythons: the probe's medians read from its output, combined per Python, and the side-by-side page."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import pytest

from bench import pythons


def test_the_version_of_another_interpreter_is_asked_of_it() -> None:
    assert pythons.python_version(sys.executable) == platform.python_version()
    assert pythons.python_version(os.path.realpath(sys.executable)) == platform.python_version()


def test_the_medians_line_of_the_probe_output_is_read() -> None:
    out = 'pids this {"broker": 1}\nthis {"broker": 5.0, "total": 30.0}\nmedian this {"broker": 4.5, "total": 29.0}\n'
    assert pythons.probe_medians(out) == {"broker": 4.5, "total": 29.0}
    with pytest.raises(ValueError, match="no 'median this' line"):
        pythons.probe_medians("this {}\n")


def test_runs_of_one_python_combine_to_the_median_per_process() -> None:
    runs = [
        {"medians": {"broker": 3.0, "total": 30.0, "web": 0.5}},
        {"medians": {"broker": 5.0, "total": 34.0}},
        {"medians": {"broker": 4.0, "total": 31.0}},
    ]
    assert pythons.combine(runs) == {"broker": 4.0, "total": 31.0}


def _results() -> dict[str, Any]:
    run: dict[str, Any] = {"loadavg_before": [1.0, 1.0, 1.0], "loadavg_after": [2.0, 1.0, 1.0], "seconds": 60.0}
    return {
        "written_at": "2026-12-03T04:00:00Z",
        "machine": "2 CPUs, x86_64",
        "versions": ["3.11.7", "3.13.0"],
        "cpuprobe": {
            "args": ["--calls", "200"],
            "runs_per_python": 1,
            "runs": [
                {"version": "3.11.7", "medians": {"broker": 4.0, "total": 40.0, "errors": 0}, **run},
                {"version": "3.13.0", "medians": {"broker": 3.0, "total": 30.0, "errors": 0}, **run},
            ],
            "combined": {
                "3.11.7": {"broker": 4.0, "total": 40.0, "errors": 0},
                "3.13.0": {"broker": 3.0, "total": 30.0, "errors": 0},
            },
        },
        "full": {"3.11.7": {"deploy p50, stack (ms)": 31.5}, "3.13.0": {"deploy p50, stack (ms)": 28.25}},
    }


def test_the_page_shows_both_pythons_side_by_side_with_the_ratio_and_each_runs_load() -> None:
    page = pythons.markdown(_results())
    assert "# This checkout on Python 3.11.7 vs 3.13.0" in page
    assert "**Provisional**" in page
    assert "| total | 40 | 30 | 0.75 |" in page
    assert "| broker | 4 | 3 | 0.75 |" in page
    assert "| 2 | 3.13.0 | [1.0, 1.0, 1.0] -> [2.0, 1.0, 1.0] | 30 | 60.0 |" in page
    assert "| deploy p50, stack (ms) | 31.5 | 28.2 |" in page
    assert "errors" not in page


def test_the_headline_figures_of_a_full_run_include_the_targets_and_the_load() -> None:
    results = {
        "meta": {
            "machine": {"loadavg_at_start": [1.0, 2.0, 3.0], "loadavg_at_end": [2.0, 2.0, 3.0]},
            "duration_s": 200,
        },
        "latency": {"stack": {"deploy": {"latency_ms": {"p50": 30.0}}}, "ratio": {"deploy_p50": 1.4}},
        "sweep": [{"concurrency": 10, "stack": {"calls_per_s": 50.0}, "cpu": {"stack": {"total_ms_per_call": 37.0}}}],
    }
    figures = pythons.full_figures(results)
    assert figures["deploy p50, stack (ms)"] == 30.0
    assert figures["calls/s at 10 in flight, stack"] == 50.0
    assert figures["CPU ms per call at 10 in flight, stack"] == 37.0
    assert figures["one-form call p50, stack / anchor <= 1.5"] == 1.4
    assert figures["load average at start -> end"] == "[1.0, 2.0, 3.0] -> [2.0, 2.0, 3.0]"
