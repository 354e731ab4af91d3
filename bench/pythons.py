"""``python -m bench.pythons --other PYTHON``: this checkout on two Pythons side by side (e.g. 3.11 vs 3.13).

Runs :mod:`bench.cpuprobe` under this interpreter and under ``--other`` (a venv's ``bin/python`` with this
checkout installed: ``make setup`` with ``MAKA_PYTHON``), ``--runs`` times each, alternating which goes first,
and records the machine's load average before and after every run. The stack's processes run on the
interpreter of the probe that starts them (``sys.executable``), so each run measures one Python throughout.
With ``--full``, ``python -m bench.run`` (what ``make bench`` runs) under each too, written as
``python-<version>.{json,md,png}``. Writes ``<out>/python.json`` and ``<out>/python.md``: CPU per one-form
call per process (the median over each Python's runs of their medians) and, from the full runs found in
``<out>``, their headline figures side by side with the load each saw.

On a shared machine the figures move with the load: compare the two columns of one report, not across
reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import report

ROOT = Path(__file__).resolve().parents[1]
MEDIAN_PREFIX = "median this "
STEM = "python"


def python_version(python: str) -> str:
    """``X.Y.Z`` of the interpreter ``python`` (this one without a subprocess)."""
    if python == sys.executable:
        return platform.python_version()
    out = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def probe_medians(stdout: str) -> dict[str, float]:
    """The ``median this {...}`` line of a :mod:`bench.cpuprobe` run's output (CPU ms per call per process)."""
    for line in stdout.splitlines():
        if line.startswith(MEDIAN_PREFIX):
            medians: dict[str, float] = json.loads(line.removeprefix(MEDIAN_PREFIX))
            return medians
    raise ValueError("the probe printed no 'median this' line")


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_probe(python: str, probe_args: Sequence[str]) -> dict[str, Any]:
    """One :mod:`bench.cpuprobe` run under ``python``: its medians, the load before and after, the wall time."""
    load_before, started = _loadavg(), time.monotonic()
    done = subprocess.run(
        [python, "-m", "bench.cpuprobe", *probe_args], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return {
        "medians": probe_medians(done.stdout),
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
        "seconds": round(time.monotonic() - started, 1),
    }


def combine(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per process, the median over ``runs`` of their medians (processes missing from a run are left out)."""
    keys = [key for key in runs[0]["medians"] if all(key in run["medians"] for run in runs)]
    return {key: round(statistics.median(run["medians"][key] for run in runs), 2) for key in keys}


def full_figures(results: Mapping[str, Any]) -> dict[str, Any]:
    """The headline figures of one ``bench.run`` result (``latest.json``'s shape)."""
    stack = results.get("latency", {}).get("stack", {})
    figures: dict[str, Any] = {
        "deploy p50, stack (ms)": stack.get("deploy", {}).get("latency_ms", {}).get("p50"),
        "ping p50, stack (ms)": stack.get("ping", {}).get("latency_ms", {}).get("p50"),
    }
    for point in results.get("sweep", []):
        level = point.get("concurrency")
        figures[f"calls/s at {level} in flight, stack"] = point.get("stack", {}).get("calls_per_s")
        figures[f"CPU ms per call at {level} in flight, stack"] = (
            point.get("cpu", {}).get("stack", {}).get("total_ms_per_call")
        )
    for target in report.targets(results):
        figures[target["target"]] = target["measured"]
    machine = results.get("meta", {}).get("machine", {})
    figures["load average at start -> end"] = f"{machine.get('loadavg_at_start')} -> {machine.get('loadavg_at_end')}"
    figures["run (s)"] = results.get("meta", {}).get("duration_s")
    return figures


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def markdown(results: Mapping[str, Any]) -> str:
    """``python.md`` from ``python.json``'s content."""
    versions: list[str] = list(results["versions"])
    lines = [
        f"# This checkout on Python {' vs '.join(versions)}",
        "",
        f"Written by `python -m bench.pythons` at {results['written_at']} on {results['machine']}. **Provisional**: "
        "this machine is shared and its load moves the figures (load average recorded with every run); compare "
        "the columns of this page, not figures across pages.",
        "",
    ]
    probe = results.get("cpuprobe")
    if probe:
        first, last = versions[0], versions[-1]
        lines += [
            f"## CPU per one-form call (`python -m bench.cpuprobe {' '.join(probe['args'])}`)",
            "",
            f"ms of CPU per `deploy` call per process, the median over {probe['runs_per_python']} run(s) per Python "
            "of each run's median round.",
            "",
            f"| process | {' | '.join(versions)} | {last} / {first} |",
            "| --- |" + " ---: |" * (len(versions) + 1),
        ]
        combined = probe["combined"]
        for key in combined[first]:
            if key == "errors":
                continue
            values = [combined[version].get(key) for version in versions]
            ratio = values[-1] / values[0] if values[0] and values[-1] is not None else None
            lines.append(f"| {key} | {' | '.join(_cell(v) for v in values)} | {_cell(ratio)} |")
        lines += ["", "| run | Python | load average before -> after | total (ms) | seconds |", "|" + " --- |" * 5]
        for index, run in enumerate(probe["runs"], 1):
            lines.append(
                f"| {index} | {run['version']} | {run['loadavg_before']} -> {run['loadavg_after']} | "
                f"{_cell(run['medians'].get('total'))} | {run['seconds']} |"
            )
        lines.append("")
    full = results.get("full") or {}
    if full:
        shown = [version for version in versions if version in full]
        lines += [
            f"## `make bench` (`python -m bench.run`, written as `{STEM}-<version>.*`)",
            "",
            f"| figure | {' | '.join(shown)} |",
            "| --- |" + " ---: |" * len(shown),
        ]
        for key in full[shown[0]]:
            lines.append(f"| {key} | {' | '.join(_cell(full[version].get(key)) for version in shown)} |")
        lines.append("")
    return "\n".join(lines)


def _full_results(out: Path, versions: Sequence[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for version in versions:
        path = out / f"{STEM}-{version}.json"
        if path.exists():
            found[version] = full_figures(json.loads(path.read_text()))
    return found


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.pythons", description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="the other interpreter (a venv's bin/python)")
    parser.add_argument("--runs", type=int, default=2, help="cpuprobe runs per Python, alternating")
    parser.add_argument("--calls", type=int, default=200, help="cpuprobe: deploy calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="cpuprobe: measured rounds per run")
    parser.add_argument("--warmup", type=int, default=40, help="cpuprobe: untimed calls first")
    parser.add_argument("--concurrency", type=int, default=10, help="cpuprobe: calls in flight")
    parser.add_argument("--no-probe", action="store_true", help="skip cpuprobe (keep the last report's figures)")
    parser.add_argument(
        "--append", action="store_true", help="add the cpuprobe runs to the last report's (same Pythons and probe args)"
    )
    parser.add_argument("--full", action="store_true", help="also run python -m bench.run under each Python")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    pythons = [os.path.abspath(args.other), sys.executable]  # abspath: a venv's python is a symlink to keep
    versions = [python_version(python) for python in pythons]
    if len(set(versions)) != len(versions):
        parser.error(f"both interpreters are Python {versions[0]}")
    order = sorted(range(len(pythons)), key=lambda i: tuple(int(p) for p in versions[i].split(".")))
    pythons, versions = [pythons[i] for i in order], [versions[i] for i in order]
    path = args.out / f"{STEM}.json"
    previous: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    probe_args = ["--calls", str(args.calls), "--rounds", str(args.rounds), "--warmup", str(args.warmup)]
    probe_args += ["--concurrency", str(args.concurrency)]
    cpuprobe = previous.get("cpuprobe") if previous.get("versions") == versions else None
    if not args.no_probe:
        runs: list[dict[str, Any]] = []
        if args.append and cpuprobe is not None and cpuprobe["args"] == probe_args:
            runs += cpuprobe["runs"]
        for index in range(args.runs):
            turn = list(zip(pythons, versions, strict=True))
            for python, version in turn if index % 2 == 0 else reversed(turn):
                print(f"cpuprobe on Python {version} ({python}), load {_loadavg()}", flush=True)
                runs.append({"version": version, **run_probe(python, probe_args)})
                print(f"  total {runs[-1]['medians'].get('total')} ms per call", flush=True)
        cpuprobe = {
            "args": probe_args,
            "runs_per_python": len(runs) // len(versions),
            "runs": runs,
            "combined": {version: combine([run for run in runs if run["version"] == version]) for version in versions},
        }
    if args.full:
        for python, version in zip(pythons, versions, strict=True):
            print(f"bench.run on Python {version} ({python}), load {_loadavg()}", flush=True)
            command = [python, "-m", "bench.run", "--out", str(args.out), "--stem", f"{STEM}-{version}"]
            subprocess.run(command, cwd=ROOT, check=True)
    results = {
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}",
        "versions": versions,
        "pythons": [
            os.path.relpath(python, ROOT) if python.startswith(f"{ROOT}{os.sep}") else python for python in pythons
        ],
        "cpuprobe": cpuprobe,
        "full": _full_results(args.out, versions),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"{STEM}.md").write_text(markdown(results))
    print(f"wrote {path} and {args.out / f'{STEM}.md'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
