"""``python -m bench.frontdoor``: only the MCP front door's added latency of a no-form call, in about a minute.

A quick A/B loop for a change to ``surfaces.mcp`` (not part of ``make bench``, which has no front-door-only mode;
the full figures are its "MCP front door" section). One example server, one ``maka up`` stack with the front door
(``Stack(mcp=True)``), and with ``--baseline DIR`` (the code before: ``git archive <commit> | tar -x -C DIR``) a
second stack running DIR's services on the same example server. Each of ``--rounds`` rounds makes ``--calls``
sequential ``ping`` calls (one in flight, as the target's row), interleaved call by call over every caller, so all
sample the same machine load (round 0, ``--warmup`` calls, is not counted):

- ``direct``: the SDK ``Client`` calling the example server (the anchor);
- ``stack``: the broker's ``CallTool`` of this checkout's stack (what the front door calls);
- ``front_door``: the SDK ``Client`` calling ``examples.ping`` on this checkout's front door;
- ``base_front_door`` (with ``--baseline``): the same on DIR's front door.

Each round prints the p50 of every caller, the added p50 (front door - direct), the front door's own share
(front door - stack), the CPU milliseconds per call of each front door process (``/proc/<pid>/stat``: only its
own calls reach it, so interleaving does not mix them) and of the example server per call (every caller's call
reaches it once: what the official SDK's own server spends on one call). The last lines
are the medians over the rounds and their spread (min-max). ``--tool deploy`` makes the calls one-form calls
(arguments, a form answered at once). ``--profile cprofile|pyinstrument`` then profiles this checkout's front door
over one more round of front door calls (:mod:`bench.profiling`, ``<out>/mcp.pstats`` or ``mcp.txt``).
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
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import profiling
from bench.callers import FRONT_DOOR_PREFIX, SESSION, AnchorCaller, Caller, StackCaller
from bench.cpu import CpuMeter
from bench.measure import sequential
from bench.run import FRONT_DOOR_SESSION_ENV, TOOLS, tree_stack
from bench.servers import example_server

REPORT_TIMEOUT = 120.0
EXAMPLE_SERVER = "example_server"
"""The example server's name in a round's CPU figures (``cpu_example_server``: the official SDK's own server,
over the same Streamable HTTP stack as the front door, per request)."""
FRONT_DOOR_SERVICE = "mcp"
"""The front door's name among a stack's children and in the profiling hook."""


@dataclass
class Side:
    """One stack with its front door: its ``CallTool`` caller, the front door's URL and process id."""

    caller: StackCaller
    front_door_url: str
    front_door_pid: int


@contextlib.asynccontextmanager
async def _stack_at(
    tree: Path | None, config: Path, work: Path, log_level: str, env: Mapping[str, str]
) -> AsyncIterator[Side]:
    """A stack (front door included) running the services of ``tree`` (None: this checkout)."""
    extra = {FRONT_DOOR_SESSION_ENV: SESSION, **env}
    async with tree_stack(tree, config, work, log_level, extra, mcp=True) as (stack, caller):
        assert stack.endpoints is not None
        yield Side(caller, stack.endpoints.mcp, stack.supervisor.pids()[FRONT_DOOR_SERVICE])


def round_row(p50_ms: Mapping[str, float], cpu_ms: Mapping[str, float]) -> dict[str, float]:
    """One round's figures: every caller's p50, the added p50 (``front_door`` - ``direct``, and for the
    baseline ``base_front_door`` - ``direct``), this front door's own share (``front_door`` - ``stack``) and the
    CPU per call of each front door process (``cpu_<caller>``)."""
    row = {f"p50_{name}": round(ms, 3) for name, ms in p50_ms.items()}
    row["added"] = round(p50_ms["front_door"] - p50_ms["direct"], 3)
    row["own_share"] = round(p50_ms["front_door"] - p50_ms["stack"], 3)
    if "base_front_door" in p50_ms:
        row["base_added"] = round(p50_ms["base_front_door"] - p50_ms["direct"], 3)
    row.update({f"cpu_{name}": round(ms, 3) for name, ms in cpu_ms.items()})
    return row


def spread(rounds: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, float, float]]:
    """Per key of the rounds (each round has every key): (median, min, max)."""
    return {
        key: (
            round(statistics.median(r[key] for r in rounds), 3),
            min(r[key] for r in rounds),
            max(r[key] for r in rounds),
        )
        for key in rounds[0]
    }


async def _round(
    callers: Sequence[Caller], meters: Mapping[str, int], tool: str, calls: int, label: str
) -> dict[str, float]:
    cpu = CpuMeter(dict(meters))
    cpu.start()
    results = await sequential(callers, tool, TOOLS[tool], calls=calls, warmup=0)
    errors = {caller.name: result.errors for caller, result in zip(callers, results, strict=True)}
    use = cpu.stop(calls)
    per_call = use.ms_per_call()
    if EXAMPLE_SERVER in per_call:  # every caller's call reaches it once: an SDK server's CPU per request
        per_call[EXAMPLE_SERVER] /= len(callers)
    row = round_row(
        {caller.name: result.latency.p50 for caller, result in zip(callers, results, strict=True)},
        per_call,
    )
    row["errors"] = sum(errors.values())
    print(label, json.dumps(row), flush=True)
    return row


async def probe(args: argparse.Namespace) -> int:
    """Run the probe; prints one JSON line per round, then the medians and spread; returns the exit code."""
    work = Path(tempfile.mkdtemp(prefix="maka-fd-", dir="/tmp"))
    out: Path = args.out
    env: dict[str, str] = {}
    if args.profile != "none":
        env = profiling.profile_env(out)
        if args.profile == "cprofile":
            env["BENCH_PROFILER"] = "cprofile"
    async with example_server(work / "example_server.log") as server:
        config = work / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"examples": {"url": server.url}}}))
        async with contextlib.AsyncExitStack() as sides:
            base: Side | None = None
            if args.baseline is not None:
                base_work = Path(tempfile.mkdtemp(prefix="b", dir=work))
                base = await sides.enter_async_context(
                    _stack_at(args.baseline.resolve(), config, base_work, args.log_level, {})
                )
            this = await sides.enter_async_context(_stack_at(None, config, work, args.log_level, env))
            meters = {"front_door": this.front_door_pid, EXAMPLE_SERVER: server.pid}
            if base is not None:
                meters["base_front_door"] = base.front_door_pid
            rows: list[dict[str, float]] = []
            for number in range(args.rounds + 1):  # round 0 warms every caller up and is not counted
                async with contextlib.AsyncExitStack() as clients:
                    direct = await clients.enter_async_context(AnchorCaller(server.url, name="direct"))
                    front = await clients.enter_async_context(
                        AnchorCaller(this.front_door_url, name="front_door", tool_prefix=FRONT_DOOR_PREFIX)
                    )
                    callers: list[Caller] = [direct, this.caller, front]
                    if base is not None:
                        callers.append(
                            await clients.enter_async_context(
                                AnchorCaller(base.front_door_url, name="base_front_door", tool_prefix=FRONT_DOOR_PREFIX)
                            )
                        )
                    calls = args.warmup if number == 0 else args.calls
                    label = "warmup" if number == 0 else f"round {number}"
                    row = await _round(callers, meters, args.tool, calls, label)
                    if number:
                        rows.append(row)
            for key, (median, low, high) in spread(rows).items():
                print(f"median {key}: {median} (min {low}, max {high})", flush=True)
            if args.profile != "none":
                suffix = ".pstats" if args.profile == "cprofile" else ".txt"
                path = out / f"{FRONT_DOOR_SERVICE}{suffix}"
                path.unlink(missing_ok=True)
                async with AnchorCaller(this.front_door_url, name="front_door", tool_prefix=FRONT_DOOR_PREFIX) as front:
                    os.kill(this.front_door_pid, signal.SIGUSR1)
                    await sequential([front], args.tool, TOOLS[args.tool], calls=args.calls, warmup=0)
                    os.kill(this.front_door_pid, signal.SIGUSR2)
                async with asyncio.timeout(REPORT_TIMEOUT):
                    while not path.exists():  # noqa: ASYNC110 - a file of another process
                        await asyncio.sleep(0.05)  # the front door writes after its next loop turn; bounded
                print(f"profiled {args.calls} front door {args.tool} calls: {path}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    logging.basicConfig(level=logging.WARNING, force=True)
    parser = argparse.ArgumentParser(prog="python -m bench.frontdoor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tool", choices=tuple(TOOLS), default="ping", help="ping (no form, no arguments) or deploy (one form)"
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per caller per round")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls per caller first")
    parser.add_argument("--profile", choices=("none", "pyinstrument", "cprofile"), default="none")
    parser.add_argument("--out", type=Path, default=Path("/tmp/maka-fd-profile"), help="profile reports")
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of the code before (git archive): its front door alongside"
    )
    parser.add_argument("--log-level", default="WARNING", help="MAKA_LOG_LEVEL of the services")
    args: Any = parser.parse_args(argv)
    if args.profile != "none":
        args.out.mkdir(parents=True, exist_ok=True)
    return asyncio.run(probe(args))


if __name__ == "__main__":
    sys.exit(main())
