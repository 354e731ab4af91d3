"""CPU time of the benchmark's processes (Linux ``/proc/<pid>/stat``), per call.

Each side of a measurement is a set of named processes: the anchor is the benchmark process (the SDK
``Client``) and the example server; the stack is the benchmark process (the ``CallTool`` caller and the
answering surface), the example server and every ``maka up`` child. :class:`CpuMeter` reads user + system
time (all threads, so gRPC's and redis-py's helper threads count) of each before and after a load and
divides by the calls made. The clock tick is 10 ms, so a load should run long enough (hundreds of calls)
for the figures to mean something.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
BENCH_PROCESS = "bench"
"""The name of this process in a side's process table (the SDK client, or the caller and surface)."""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process ``pid`` used so far (every thread), or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is parenthesised and may hold spaces: split after its closing paren
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), counted from 1
    return (utime + stime) / TICKS_PER_S


def snapshot(pids: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds of every named process still running."""
    return {name: seconds for name, pid in pids.items() if (seconds := cpu_seconds(pid)) is not None}


@dataclass(frozen=True)
class CpuUse:
    """CPU a side's processes used over ``calls`` calls: seconds per process, milliseconds per call."""

    calls: int
    seconds: dict[str, float]

    @property
    def total_s(self) -> float:
        """Every process together."""
        return sum(self.seconds.values())

    def ms_per_call(self) -> dict[str, float]:
        """Per process, CPU milliseconds per call (0 calls gives zeros)."""
        return {name: (s * 1000 / self.calls if self.calls else 0.0) for name, s in self.seconds.items()}

    def total_ms_per_call(self) -> float:
        """Every process together, CPU milliseconds per call."""
        return self.total_s * 1000 / self.calls if self.calls else 0.0

    def to_json(self) -> dict[str, object]:
        """For ``latest.json``: per process and total, ms per call (rounded to microseconds)."""
        return {
            "calls": self.calls,
            "ms_per_call": {name: round(ms, 3) for name, ms in self.ms_per_call().items()},
            "total_ms_per_call": round(self.total_ms_per_call(), 3),
        }


class CpuMeter:
    """CPU used by named processes between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = dict(pids)
        self._before: dict[str, float] = {}

    def start(self) -> None:
        """Note every process's CPU time now."""
        self._before = snapshot(self.pids)

    def stop(self, calls: int) -> CpuUse:
        """CPU used since :meth:`start` by each process that ran throughout, for ``calls`` calls."""
        after = snapshot(self.pids)
        used = {name: max(0.0, after[name] - before) for name, before in self._before.items() if name in after}
        return CpuUse(calls, used)
