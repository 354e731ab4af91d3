"""Load shapes run against any :class:`bench.callers.Caller`: sequential latency and a concurrency sweep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.callers import STACK_PHASES, Caller, CallSample
from bench.stats import Summary, summarize


@dataclass
class LatencyResult:
    """Sequential calls of one Tool: per-call latency and answer-to-result (ms summaries), errors."""

    tool: str
    latency: Summary
    answer_to_result: Summary
    errors: int
    first_error: str = ""
    samples_ms: list[float] = field(default_factory=lambda: list[float]())
    phases: dict[str, Summary] = field(default_factory=lambda: dict[str, Summary]())
    """Per-phase summaries (ms) when the caller reports phases (the stack's one-form calls)."""

    def to_json(self) -> dict[str, object]:
        """For ``latest.json`` (raw samples are plotted, not stored)."""
        out: dict[str, object] = {
            "tool": self.tool,
            "latency_ms": self.latency.to_json(),
            "answer_to_result_ms": self.answer_to_result.to_json(),
            "errors": self.errors,
            "first_error": self.first_error,
        }
        if self.phases:
            out["phases_ms"] = {name: summary.to_json() for name, summary in self.phases.items()}
        return out


@dataclass
class SweepPoint:
    """``calls`` calls of one Tool with ``concurrency`` in flight: throughput, latency under load, errors."""

    concurrency: int
    calls: int
    elapsed_s: float
    calls_per_s: float
    latency: Summary
    answer_to_result: Summary
    errors: int
    first_error: str = ""

    def to_json(self) -> dict[str, object]:
        """For ``latest.json``."""
        return {
            "concurrency": self.concurrency,
            "calls": self.calls,
            "elapsed_s": round(self.elapsed_s, 3),
            "calls_per_s": round(self.calls_per_s, 1),
            "latency_ms": self.latency.to_json(),
            "answer_to_result_ms": self.answer_to_result.to_json(),
            "errors": self.errors,
            "first_error": self.first_error,
        }


def _first_error(samples: Sequence[CallSample]) -> str:
    return next((s.error for s in samples if not s.ok), "")


def _latency_result(tool: str, samples: Sequence[CallSample]) -> LatencyResult:
    good = [s for s in samples if s.ok]
    return LatencyResult(
        tool=tool,
        latency=summarize([s.latency for s in good]),
        answer_to_result=summarize([s.answer_to_result for s in good if s.answer_to_result is not None]),
        errors=len(samples) - len(good),
        first_error=_first_error(samples),
        samples_ms=[s.latency * 1000 for s in good],
        phases={name: summarize([s.phases[name] for s in good if name in s.phases]) for name in STACK_PHASES}
        if any(s.phases for s in good)
        else {},
    )


async def sequential(
    callers: Sequence[Caller], tool: str, arguments: Mapping[str, Any], *, calls: int, warmup: int
) -> list[LatencyResult]:
    """``warmup`` untimed rounds, then ``calls`` timed rounds; each round makes one call per caller, in turn
    (interleaved call by call, so every caller samples the same machine load over time). One
    :class:`LatencyResult` per caller, in order."""
    for _ in range(warmup):
        for caller in callers:
            await caller.call(tool, arguments)
    samples: list[list[CallSample]] = [[] for _ in callers]
    for _ in range(calls):
        for index, caller in enumerate(callers):
            samples[index].append(await caller.call(tool, arguments))
    return [_latency_result(tool, per_caller) for per_caller in samples]


async def concurrent(
    caller: Caller, tool: str, arguments: Mapping[str, Any], *, concurrency: int, calls: int
) -> SweepPoint:
    """``calls`` calls with ``concurrency`` workers, each starting its next call when its last one ends
    (a closed loop, so exactly ``concurrency`` calls are in flight until the tail). Calls per second =
    good calls / wall time from the first start to the last end."""
    remaining = calls
    samples: list[CallSample] = []

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            samples.append(await caller.call(tool, arguments))

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, calls)):
            group.create_task(worker())
    elapsed = time.perf_counter() - start
    good = [s for s in samples if s.ok]
    return SweepPoint(
        concurrency=concurrency,
        calls=len(samples),
        elapsed_s=elapsed,
        calls_per_s=len(good) / elapsed if elapsed > 0 else 0.0,
        latency=summarize([s.latency for s in good]),
        answer_to_result=summarize([s.answer_to_result for s in good if s.answer_to_result is not None]),
        errors=len(samples) - len(good),
        first_error=_first_error(samples),
    )
