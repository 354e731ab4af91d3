"""Profiling the stack's services while the benchmark drives them (pyinstrument, started/stopped by signal).

:func:`profile_env` returns the environment that makes each child service load
``bench/profiling/hook/sitecustomize.py``; :func:`start` / :func:`stop` send ``SIGUSR1`` / ``SIGUSR2`` to the
service processes; each writes ``<dir>/<service>.txt`` (pyinstrument text, wall clock of the main thread,
including the event loop's idle ``select``) when it stops.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parent / "hook"
DIR_ENV = "BENCH_PROFILE_DIR"
"""Where profiled services write their reports (not ``MAKA_*``: no service setting reads it)."""
SERVICES = ("interaction", "broker", "provider")
"""The Stack children that the hook profiles."""


def profile_env(directory: Path) -> dict[str, str]:
    """Extra child environment: ``PYTHONPATH`` with the hook first and :data:`DIR_ENV` = ``directory``."""
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(HOOK_DIR), path) if p), DIR_ENV: str(directory)}


def start(pids: dict[str, int]) -> None:
    """Start the profiler in each service of :data:`SERVICES` found in ``pids`` (SIGUSR1)."""
    for name in SERVICES:
        if name in pids:
            os.kill(pids[name], signal.SIGUSR1)


async def stop(pids: dict[str, int], directory: Path, *, timeout: float = 180.0) -> dict[str, Path]:
    """Stop the profilers (SIGUSR2) and wait (bounded by ``timeout`` s) for their reports.

    Returns ``{service: report path}``. Raises TimeoutError when a report does not appear.
    """
    names = [name for name in SERVICES if name in pids]
    for name in names:
        os.kill(pids[name], signal.SIGUSR2)
    reports = {name: directory / f"{name}.txt" for name in names}
    async with asyncio.timeout(timeout):
        while not all(path.exists() for path in reports.values()):  # noqa: ASYNC110 - files of other processes
            await asyncio.sleep(0.05)  # the services write after their next loop turn; bounded above
    return reports


def cpu_seconds(report: str) -> float | None:
    """The ``CPU time`` a pyinstrument text report's header states (seconds), or None when absent."""
    match = re.search(r"CPU time:\s*([0-9.]+)", report)
    return float(match.group(1)) if match else None
