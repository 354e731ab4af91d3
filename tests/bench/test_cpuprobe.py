"""bench.cpuprobe: per-thread CPU of a process and the medians of its rounds."""

from __future__ import annotations

import os
import time

from bench import cpuprobe


def test_thread_seconds_grow_for_the_thread_that_burns_cpu() -> None:
    name = next(iter(cpuprobe.thread_seconds(os.getpid())))
    before = cpuprobe.thread_seconds(os.getpid())
    started = time.thread_time()
    while time.thread_time() - started < 0.1:  # burn CPU in this thread (no sleep: the figure is CPU time)
        pass
    after = cpuprobe.thread_seconds(os.getpid())
    assert set(before) <= set(after)
    assert sum(after.values()) - sum(before.values()) >= 0.05
    assert after[name] >= before[name]


def test_the_median_of_rounds_is_taken_per_process() -> None:
    rounds = [{"broker": 3.0, "total": 9.0}, {"broker": 1.0, "total": 12.0}, {"broker": 2.0, "total": 10.0}]
    assert cpuprobe.medians(rounds) == {"broker": 2.0, "total": 10.0}
