"""bench.cpu: CPU time of processes from /proc, per call."""

from __future__ import annotations

import os
import time

from bench.cpu import CpuMeter, CpuUse, cpu_seconds


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_seconds_of_this_process_grows_with_the_work_it_does() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    _burn(0.1)
    after = cpu_seconds(os.getpid())
    assert after is not None
    assert after - before >= 0.05


def test_a_process_that_is_gone_has_no_cpu_time() -> None:
    assert cpu_seconds(2**22 + 12345) is None


def test_the_meter_divides_each_process_s_cpu_by_the_calls_and_drops_processes_that_vanished() -> None:
    meter = CpuMeter({"self": os.getpid(), "gone": 2**22 + 12345})
    meter.start()
    _burn(0.1)
    use = meter.stop(calls=10)
    assert set(use.seconds) == {"self"}
    assert use.ms_per_call()["self"] >= 5.0
    assert use.to_json()["total_ms_per_call"] == round(use.total_ms_per_call(), 3)


def test_no_calls_gives_zero_per_call_rather_than_a_division_error() -> None:
    use = CpuUse(0, {"a": 1.0})
    assert use.ms_per_call() == {"a": 0.0}
    assert use.total_ms_per_call() == 0.0
