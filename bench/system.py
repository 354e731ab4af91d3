"""What the benchmark ran on: machine, software versions, and per-process memory (Linux ``/proc``)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PACKAGES = ("mcp", "grpcio", "protobuf", "redis", "hiredis", "uvicorn", "starlette", "httpx", "pyinstrument")


def rss_kib(pid: int) -> int | None:
    """Resident set size of process ``pid`` in KiB (``VmRSS`` of ``/proc/<pid>/status``); None if gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def _status_kib(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/<pid>/task/*/children``), e.g. a provider's stdio MCP servers."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def process_tree_usage(pid: int) -> dict[str, float] | None:
    """Peak RSS (``VmHWM``, MiB, summed over the tree) and CPU seconds (user + system) of ``pid`` and its
    descendants, as a container holding them would be charged; None once ``pid`` is gone."""
    if not Path(f"/proc/{pid}").exists():
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    peak_kib = 0
    cpu = 0.0
    for member in _descendants(pid):
        peak_kib += _status_kib(member, "VmHWM") or 0
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14 and 15 of stat)
    return {"peak_rss_mib": round(peak_kib / 1024, 1), "cpu_seconds": round(cpu, 2)}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _command_output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, object]:
    """CPU model, logical CPU count, memory, kernel, OS and 1/5/15-minute load average of this machine
    (other work on the machine skews every figure; the load average says how busy it was)."""
    return {
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total_mib": _mem_total_mib(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "hostname": platform.node(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict[str, str]:
    """Python, the key libraries, ``redis-server`` and the git commit of the tree being measured."""
    out: dict[str, str] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    redis_server = shutil.which("redis-server")
    out["redis-server"] = _command_output([redis_server, "--version"]) if redis_server else "not installed"
    commit = _command_output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _command_output(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    out["git"] = (commit or "unknown") + ("+dirty" if dirty else "")
    return out
