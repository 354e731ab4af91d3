"""Latency and throughput summaries (pure functions; numbers in milliseconds unless named otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Distribution of ``n`` samples in milliseconds: p50, p90, p99 (linear interpolation), mean, min, max.

    An empty sample set gives ``n == 0`` and NaN-free zeros so JSON stays valid; check ``n``.
    """

    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float

    def to_json(self) -> dict[str, float | int]:
        """Plain dict for ``latest.json`` (values rounded to microseconds)."""
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def summarize(seconds: Sequence[float]) -> Summary:
    """Summarise durations given in **seconds** as a :class:`Summary` in **milliseconds**."""
    if not seconds:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    ms = np.asarray(seconds, dtype=float) * 1000.0
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return Summary(
        n=len(seconds),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        mean=float(ms.mean()),
        min=float(ms.min()),
        max=float(ms.max()),
    )


def ratio(stack: float, anchor: float) -> float | None:
    """``stack / anchor`` rounded to 3 places, or None when the anchor is zero (nothing to compare)."""
    if anchor <= 0:
        return None
    return round(stack / anchor, 3)
