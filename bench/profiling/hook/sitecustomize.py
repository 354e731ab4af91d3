"""Benchmark-only profiling hook, loaded by Python at start-up when ``bench/profiling/hook`` is on ``PYTHONPATH``.

Active only when ``BENCH_PROFILE_DIR`` is set and the process runs one of the Maka services
(``python -m services.<interaction|broker|mcp_provider>.main``). ``SIGUSR1`` starts a pyinstrument
profiler on the main thread (the asyncio loop; ``async_mode="disabled"`` samples the real stack, idle
``select`` included); ``SIGUSR2`` stops it and writes ``$BENCH_PROFILE_DIR/<service>.txt``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

_MODULES = {
    "services.interaction.main": "interaction",
    "services.broker.main": "broker",
    "services.mcp_provider.main": "provider",
}


def _install() -> None:
    directory = os.environ.get("BENCH_PROFILE_DIR")
    argv: list[str] = list(getattr(sys, "orig_argv", []))
    service = next((label for module, label in _MODULES.items() if module in argv), None)
    if not directory or service is None:
        return
    # Imported only in a profiled service: pyinstrument is a dev dependency and this hook loads in every process.
    from pyinstrument import Profiler

    state: dict[str, Any] = {}

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
        partial.write_text(text)
        partial.replace(target)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


_install()
