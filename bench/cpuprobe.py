"""``python -m bench.cpuprobe``: only the stack's CPU per one-form call, per process, in under a minute.

A quick loop for a performance change (not part of ``make bench``): one example server, one ``maka up``
stack and the benchmark's answering surface (:mod:`bench.callers`), ``--warmup`` untimed ``deploy`` calls,
then ``--rounds`` rounds of ``--calls`` calls with ``--concurrency`` in flight. Each round reports the CPU
milliseconds per call of every process (``/proc/<pid>/stat``, :mod:`bench.cpu`); the last line is the median
over the rounds. CPU per call still moves with the machine's load (caches, batching), so to judge a change
pass ``--baseline DIR`` (the code before, e.g. ``git archive <commit> | tar -x -C DIR``): two stacks, the one
of DIR and this checkout's, on the same example server, their rounds alternating; the last line is the
difference of the medians per process.

``--profile pyinstrument|cprofile`` profiles the interaction, broker and provider processes over one more
round (:mod:`bench.profiling`) and writes ``<out>/<service>.txt`` or ``.pstats``
(``python -m pstats <file>``; cProfile's own overhead inflates the times, the call counts are exact).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from bench import profiling
from bench.callers import AnchorCaller, Caller, StackCaller
from bench.cpu import BENCH_PROCESS, TICKS_PER_S, CpuMeter
from bench.measure import concurrent
from bench.run import DEPLOY_ARGS, tree_stack
from bench.servers import example_server

REPORT_TIMEOUT = 120.0


def thread_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (``comm``; threads of one name summed) of process ``pid``."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS_PER_S
    return out


async def _wait_reports(paths: list[Path]) -> None:
    async with asyncio.timeout(REPORT_TIMEOUT):
        while not all(path.exists() for path in paths):  # noqa: ASYNC110 - files of other processes
            await asyncio.sleep(0.05)  # the services write after their next loop turn; bounded above


@contextlib.asynccontextmanager
async def _stack_at(
    tree: Path | None, config: Path, work: Path, log_level: str, env: dict[str, str] | None
) -> AsyncIterator[tuple[StackCaller, dict[str, int], dict[str, int]]]:
    """A stack running the services of ``tree`` (None: this checkout) with its caller; yields (caller, every
    process of the side, the services)."""
    async with tree_stack(tree, config, work, log_level, env) as (stack, caller):
        yield caller, {BENCH_PROCESS: os.getpid(), **stack.supervisor.pids()}, stack.supervisor.pids()


async def _round(caller: Caller, pids: dict[str, int], args: argparse.Namespace, label: str) -> dict[str, float]:
    meter = CpuMeter(pids)
    threads = {name: thread_seconds(pid) for name, pid in pids.items() if args.threads}
    meter.start()
    point = await concurrent(caller, "deploy", DEPLOY_ARGS, concurrency=args.concurrency, calls=args.calls)
    use = meter.stop(point.calls)
    row: dict[str, float] = {name: round(ms, 2) for name, ms in use.ms_per_call().items()}
    row["total"] = round(use.total_ms_per_call(), 2)
    row["errors"] = point.errors
    print(label, json.dumps(row), flush=True)
    for name, before in threads.items():
        after = thread_seconds(pids[name])
        per = {t: round((after[t] - before.get(t, 0.0)) * 1000 / point.calls, 2) for t in after}
        print(f"  threads {name}:", json.dumps({t: ms for t, ms in per.items() if ms}), flush=True)
    return row


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Per key (process, ``total``, ``errors``), the median over ``rounds`` (each round has every key)."""
    return {name: round(statistics.median(r[name] for r in rounds), 2) for name in rounds[0]}


async def probe(args: argparse.Namespace) -> int:
    """Run the probe; prints one JSON line per round and the medians; returns the exit code."""
    work = Path(tempfile.mkdtemp(prefix="maka-probe-", dir="/tmp"))
    out: Path = args.out
    env: dict[str, str] | None = None
    if args.profile != "none":
        env = profiling.profile_env(out)
        if args.profile in ("cprofile", "gc"):
            env["BENCH_PROFILER"] = args.profile
    async with example_server(work / "example_server.log") as server:
        config = work / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"examples": {"url": server.url}}}))
        async with contextlib.AsyncExitStack() as sides:
            stacks: dict[str, tuple[StackCaller, dict[str, int], dict[str, int]]] = {}
            if args.baseline is not None:
                stacks["base"] = await sides.enter_async_context(
                    _stack_at(
                        args.baseline.resolve(),
                        config,
                        Path(tempfile.mkdtemp(prefix="b", dir=work)),
                        args.log_level,
                        None,
                    )
                )
            stacks["this"] = await sides.enter_async_context(_stack_at(None, config, work, args.log_level, env))
            for label, (caller, pids, _) in stacks.items():
                pids["example_server"] = server.pid
                print("pids", label, json.dumps(pids), flush=True)
                await concurrent(caller, "deploy", DEPLOY_ARGS, concurrency=args.concurrency, calls=args.warmup)
            rounds: dict[str, list[dict[str, float]]] = {label: [] for label in stacks}
            anchor_pids = {BENCH_PROCESS: os.getpid(), "example_server": server.pid}
            if args.anchor:
                rounds["anchor"] = []
            for _ in range(args.rounds):
                if args.anchor:
                    async with AnchorCaller(server.url) as anchor:
                        rounds["anchor"].append(await _round(anchor, anchor_pids, args, "anchor"))
                for label, (caller, pids, _) in stacks.items():
                    rounds[label].append(await _round(caller, pids, args, label))
            by_label = {label: medians(rows) for label, rows in rounds.items()}
            for label, median in by_label.items():
                print("median", label, json.dumps(median), flush=True)
            if "base" in by_label:
                delta = {name: round(by_label["this"][name] - by_label["base"][name], 2) for name in by_label["this"]}
                print("delta this-base", json.dumps(delta), flush=True)
            if args.profile != "none":
                caller, _, services = stacks["this"]
                suffix = {"cprofile": ".pstats", "gc": ".gc.json"}.get(args.profile, ".txt")
                paths = [out / f"{name}{suffix}" for name in profiling.SERVICES if name in services]
                for path in paths:
                    path.unlink(missing_ok=True)
                for name in profiling.SERVICES:
                    if name in services:
                        os.kill(services[name], signal.SIGUSR1)
                point = await concurrent(caller, "deploy", DEPLOY_ARGS, concurrency=args.concurrency, calls=args.calls)
                for name in profiling.SERVICES:
                    if name in services:
                        os.kill(services[name], signal.SIGUSR2)
                await _wait_reports(paths)
                print(f"profiled {point.calls} calls: {', '.join(str(p) for p in paths)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    logging.basicConfig(level=logging.WARNING, force=True)  # as bench.run: no INFO line per answered form
    parser = argparse.ArgumentParser(prog="python -m bench.cpuprobe", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="deploy calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=40, help="untimed calls first")
    parser.add_argument("--concurrency", type=int, default=10, help="calls in flight")
    parser.add_argument("--profile", choices=("none", "pyinstrument", "cprofile", "gc"), default="none")
    parser.add_argument("--out", type=Path, default=Path("/tmp/maka-probe-profile"), help="profile reports")
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of the code before (git archive): run both stacks, rounds alternating"
    )
    parser.add_argument("--anchor", action="store_true", help="also rounds of the SDK's own loop (anchor)")
    parser.add_argument("--threads", action="store_true", help="also CPU per call of each thread")
    parser.add_argument("--log-level", default="WARNING", help="MAKA_LOG_LEVEL of the services")
    args = parser.parse_args(argv)
    if args.profile != "none":
        args.out.mkdir(parents=True, exist_ok=True)
    return asyncio.run(probe(args))


if __name__ == "__main__":
    sys.exit(main())
