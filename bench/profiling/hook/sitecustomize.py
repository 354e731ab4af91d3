"""Benchmark-only profiling hook, loaded by Python at start-up when ``bench/profiling/hook`` is on ``PYTHONPATH``.

Active only when ``BENCH_PROFILE_DIR`` is set and the process runs one of the Maka services
(``python -m services.<interaction|broker|mcp_provider>.main``) or the MCP front door (``surfaces.mcp.main``,
``mcp``). ``SIGUSR1`` starts a pyinstrument profiler on the main thread (the asyncio loop;
``async_mode="disabled"`` samples the real stack, idle ``select`` included); ``SIGUSR2`` stops it and writes
``$BENCH_PROFILE_DIR/<service>.txt`` (and the session, ``<service>.pyisession``: ``pyinstrument --load``).

With ``BENCH_PROFILER=cprofile`` the signals drive :mod:`cProfile` instead (deterministic: exact call counts per
function, CPU time of the main thread, inflated by its per-call overhead) and ``SIGUSR2`` writes ``<service>.pstats``.
"""

from __future__ import annotations

import cProfile
import gc
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

_MODULES = {
    "services.interaction.main": "interaction",
    "services.broker.main": "broker",
    "services.mcp_provider.main": "provider",
    "surfaces.mcp.main": "mcp",
}


def _install() -> None:
    directory = os.environ.get("BENCH_PROFILE_DIR")
    argv: list[str] = list(getattr(sys, "orig_argv", []))
    service = next((label for module, label in _MODULES.items() if module in argv), None)
    if not directory or service is None:
        return
    state: dict[str, Any] = {}
    if os.environ.get("BENCH_PROFILER") == "cprofile":
        _install_cprofile(Path(directory) / f"{service}.pstats", state)
        return
    if os.environ.get("BENCH_PROFILER") == "gc":
        _install_gc_timer(Path(directory) / f"{service}.gc.json", state)
        return
    # Imported only in a profiled service: pyinstrument is a dev dependency and this hook loads in every process.
    from pyinstrument import Profiler

    def start(signum: int, frame: FrameType | None) -> None:
        if "profiler" not in state:
            profiler = Profiler(interval=0.001, async_mode="disabled")
            profiler.start()
            state["profiler"] = profiler

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler = state.pop("profiler", None)
        if profiler is None:
            return
        profiler.stop()
        text = profiler.output_text(unicode=False, color=False, show_all=False)
        target = Path(directory) / f"{service}.txt"
        partial = target.with_suffix(".tmp")
        session = profiler.last_session
        if session is not None:  # re-render it: ``pyinstrument --load <file> --show-all``
            session.save(str(target.with_suffix(".pyisession")))
        partial.write_text(text)
        partial.replace(target)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


def _install_cprofile(target: Path, state: dict[str, Any]) -> None:

    def start(signum: int, frame: FrameType | None) -> None:
        if "profiler" not in state:
            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
            state["profiler"] = profiler

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler = state.pop("profiler", None)
        if profiler is None:
            return
        profiler.disable()
        partial = target.with_suffix(".tmp")
        profiler.dump_stats(str(partial))
        partial.replace(target)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


def _install_gc_timer(target: Path, state: dict[str, Any]) -> None:
    """Time the cyclic garbage collector's passes (``gc.callbacks``), per generation, thread CPU."""

    def callback(phase: str, info: dict[str, int]) -> None:
        totals = state.get("totals")
        if totals is None:
            return
        if phase == "start":
            state["started"] = time.thread_time()
            return
        generation = str(info["generation"])
        spent, count = totals.get(generation, (0.0, 0))
        totals[generation] = (spent + time.thread_time() - state.get("started", time.thread_time()), count + 1)

    gc.callbacks.append(callback)

    def start(signum: int, frame: FrameType | None) -> None:
        state["totals"] = {}
        state["thread_started"] = time.thread_time()

    def stop(signum: int, frame: FrameType | None) -> None:
        totals = state.pop("totals", None)
        if totals is None:
            return
        body = {
            "main_thread_cpu_s": time.thread_time() - state["thread_started"],
            "gc": {gen: {"cpu_s": spent, "passes": count} for gen, (spent, count) in totals.items()},
            "thresholds": gc.get_threshold(),
            "frozen": gc.get_freeze_count(),
        }
        partial = target.with_suffix(".tmp")
        partial.write_text(json.dumps(body, indent=1))
        partial.replace(target)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


_install()
