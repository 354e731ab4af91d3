"""``make bench`` = ``python -m bench.run``: the whole benchmark in one run, results in ``bench/results/``.

Phases (see ``bench/README.md``):

1. **Side by side** against one example MCP server (Streamable HTTP, loopback): the official SDK auto-loop
   (anchor) and ``maka up``'s processes with an automatic answering surface (stack), interleaved so both see
   the same machine state: sequential latency of ``ping`` (no input) and ``deploy`` (one form), answer-to-result,
   and a concurrency sweep of ``deploy`` (one form) and of ``ping`` (no form). Then Maka's MCP front door
   (``surfaces.mcp``) beside the SDK calling the example server directly: added latency and calls/s of
   ``ping`` and of ``deploy`` (form answered at once) at 1/10/50 in flight.
2. **Profile** (``--profile``): pyinstrument in the interaction, broker and provider processes during a
   ``deploy`` load; reports in ``<out>/profile/``.
3. **Scale** on a fresh stack: ``--pending`` forms pending at once (opened through HostLink, playing the
   broker), Redis bytes per form, RSS, delivery delay to a subscribed surface, Host epoch change.

Exit code 0 when every phase ran (targets are reported, not asserted); 1 when a phase failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench import profiling, report
from bench.callers import FRONT_DOOR_PREFIX, SESSION, AnchorCaller, Caller, StackCaller
from bench.cpu import BENCH_PROCESS, CpuMeter
from bench.failover import run_replica_kill
from bench.fanout import run_team_scale
from bench.measure import SweepPoint, concurrent, sequential
from bench.scale import ScaleResult, run_scale
from bench.servers import example_server
from bench.stats import ratio
from bench.system import ROOT, machine, rss_kib, versions
from stack.ports import Ports
from stack.topology import Stack

log = logging.getLogger("maka.bench.run")
T = TypeVar("T")

DEPLOY_ARGS = {"artifact": "bench-build"}
FRONT_DOOR_SESSION_ENV = "MAKA_MCP_SESSION"
"""The front door's setting of the Maka session its calls run in (surfaces/mcp/settings.py)."""
TOOLS: dict[str, dict[str, Any]] = {"ping": {}, "deploy": DEPLOY_ARGS}


@dataclass(frozen=True)
class Params:
    """Every knob of one run (recorded in ``latest.json``)."""

    calls: int
    warmup: int
    concurrency: tuple[int, ...]
    sweep_calls: int
    pending: int
    sessions: int
    window: int
    probes: int
    profile: bool
    profile_calls: int
    log_level: str
    quick: bool
    fanout_hosts: int = 50
    fanout_sessions: int = 40
    fanout_links: int = 4
    failover_calls: int = 300
    front_door_concurrency: tuple[int, ...] = (1, 10, 50)
    front_door_calls: int = 300

    def sweep_calls_for(self, concurrency: int) -> int:
        """Calls at one sweep level: ``sweep_calls``, at least 5 rounds of ``concurrency``."""
        return max(self.sweep_calls, 5 * concurrency)


def parse_args(argv: list[str] | None = None) -> tuple[Params, Path, str]:
    """CLI flags → (:class:`Params`, output directory, file stem). ``--quick`` shrinks every size (smoke test)."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--calls", type=int, default=300, help="timed sequential calls per Tool and side")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls before each sequential run")
    parser.add_argument("--concurrency", default="1,10,50,200", help="comma-separated calls in flight")
    parser.add_argument("--sweep-calls", type=int, default=400, help="calls per sweep level (at least 5 x level)")
    parser.add_argument("--pending", type=int, default=10_000, help="forms pending at once in the scale phase")
    parser.add_argument("--sessions", type=int, default=100, help="sessions the pending forms are spread over")
    parser.add_argument("--window", type=int, default=64, help="opens in flight while filling")
    parser.add_argument("--probes", type=int, default=200, help="forms opened one at a time at full scale")
    parser.add_argument("--profile", action="store_true", help="profile the services during a deploy load")
    parser.add_argument("--profile-calls", type=int, default=600, help="deploy calls (10 in flight) profiled")
    parser.add_argument("--log-level", default="WARNING", help="MAKA_LOG_LEVEL of the stack's services")
    parser.add_argument("--fanout-hosts", type=int, default=50, help="Hosts of the team-scale phase (one replica)")
    parser.add_argument("--fanout-sessions", type=int, default=40, help="Attach streams per Host (one session each)")
    parser.add_argument("--fanout-links", type=int, default=4, help="HostLinks per Host")
    parser.add_argument(
        "--failover-calls", type=int, default=300, help="one-form calls over 3 Hosts while one of 2 replicas is killed"
    )
    parser.add_argument(
        "--front-door-concurrency", default="1,10,50", help="comma-separated calls in flight of the front door phase"
    )
    parser.add_argument(
        "--front-door-calls", type=int, default=300, help="calls per Tool, side and level of the front door phase"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke test")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results directory")
    parser.add_argument("--stem", default="latest", help="results file name stem (latest -> latest.json ...)")
    args = parser.parse_args(argv)
    concurrency = tuple(int(part) for part in str(args.concurrency).split(",") if part.strip())
    front_door = tuple(int(part) for part in str(args.front_door_concurrency).split(",") if part.strip())
    if args.quick:
        params = Params(
            8, 2, (1, 4), 8, 50, 5, 16, 10, args.profile, 40, args.log_level, True, 3, 5, 2, 12, (1, 4), 8
        )  # fmt: skip
    else:
        params = Params(
            args.calls,
            args.warmup,
            concurrency,
            args.sweep_calls,
            args.pending,
            args.sessions,
            args.window,
            args.probes,
            args.profile,
            args.profile_calls,
            args.log_level,
            False,
            args.fanout_hosts,
            args.fanout_sessions,
            args.fanout_links,
            args.failover_calls,
            front_door,
            args.front_door_calls,
        )
    if (
        min(params.concurrency, default=0) < 1
        or min(params.front_door_concurrency, default=0) < 1
        or params.calls < 1
        or params.pending < 1
        or params.sessions < 1
    ):
        parser.error("calls, pending, sessions and every concurrency level must be >= 1")
    if params.front_door_calls < 1:
        parser.error("--front-door-calls must be >= 1")
    return params, Path(args.out), str(args.stem)


def _progress(text: str) -> None:
    print(f"[bench {datetime.now(UTC).strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def running_stack(
    config: Path,
    state_dir: Path,
    log_path: Path,
    log_level: str,
    extra_env: dict[str, str] | None = None,
    *,
    mcp: bool = False,
) -> AsyncIterator[Stack]:
    """A started :class:`Stack` (ephemeral ports, web included, the MCP front door with ``mcp``, children's
    output appended to ``log_path``)."""
    log_file = log_path.open("a")

    def sink(name: str, line: str) -> None:
        log_file.write(f"[{name}] {line}\n")

    stack = Stack(
        config,
        state_dir,
        ports=Ports.ephemeral(),
        log_level=log_level,
        sink=sink,
        extra_env=extra_env,
        stop_grace=10,
        mcp=mcp,
    )
    try:
        await stack.start()
        yield stack
    finally:
        await stack.stop()
        log_file.close()


@contextlib.asynccontextmanager
async def tree_stack(
    tree: Path | None,
    config: Path,
    work: Path,
    log_level: str,
    extra_env: Mapping[str, str] | None = None,
    *,
    mcp: bool = False,
) -> AsyncIterator[tuple[Stack, StackCaller]]:
    """:func:`running_stack` running the services of ``tree`` (another checkout, None: this one) in ``work``, and
    a caller of it: the A/B probes' one side (``bench.cpuprobe``, ``bench.frontdoor``)."""
    extra = dict(extra_env or {})
    if tree is not None:
        # ``python -m`` puts the working directory first on sys.path, PYTHONPATH before the editable install
        path = [str(tree / "gen"), str(tree), *([extra["PYTHONPATH"]] if "PYTHONPATH" in extra else [])]
        extra["PYTHONPATH"] = os.pathsep.join(path)
    here = Path.cwd()
    if tree is not None:
        os.chdir(tree)  # the children inherit it at start (the probes never restart one)
    try:
        stack_cm = running_stack(config, work / "stack", work / "stack.log", log_level, extra, mcp=mcp)
        stack = await stack_cm.__aenter__()
    finally:
        os.chdir(here)
    try:
        endpoints = stack.endpoints
        assert endpoints is not None
        async with StackCaller(endpoints.broker, endpoints.interaction) as caller:
            yield stack, caller
    finally:
        await stack_cm.__aexit__(None, None, None)


async def _measure_anchor_then_stack(
    url: str, stack: Caller, measure: Callable[[Caller], Awaitable[T]]
) -> tuple[T, str, T]:
    """``measure`` a fresh anchor client, then the stack.

    Returns (anchor result, anchor transport error or "", stack result).
    """
    async with AnchorCaller(url) as anchor:
        anchor_result = await measure(anchor)
    return anchor_result, anchor.transport_error, await measure(stack)


def side_pids(example_server_pid: int, stack_pids: dict[str, int] | None = None) -> dict[str, int]:
    """The processes one side runs on: this process (the SDK client, or the caller and the answering
    surface), the shared example server, and for the stack every ``maka up`` child."""
    return {BENCH_PROCESS: os.getpid(), "example_server": example_server_pid, **(stack_pids or {})}


def cpu_json(anchor: dict[str, Any], stack: dict[str, Any]) -> dict[str, Any]:
    """One sweep level's CPU figures (:meth:`bench.cpu.CpuUse.to_json` per side) and the ratio of the totals."""
    return {
        "anchor": anchor,
        "stack": stack,
        "ratio_total": ratio(stack["total_ms_per_call"], anchor["total_ms_per_call"]),
    }


async def side_by_side(
    params: Params, url: str, stack: Caller, pids: dict[str, dict[str, int]]
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list[float]]]:
    """Sequential runs interleaved call by call (anchor, stack, anchor, ...) and the sweep (per level: anchor,
    then stack), a fresh anchor client per measurement; returns (latency json, sweep json, CDF samples).

    Each sweep level also measures the CPU time of each side's processes (``pids[side]``, see
    :func:`side_pids`) per call; the sequential runs interleave the sides, so they cannot."""
    latency: dict[str, Any] = {"anchor": {}, "stack": {}, "ratio": {}}
    cdfs: dict[str, list[float]] = {}
    for tool, arguments in TOOLS.items():
        _progress(f"sequential {tool}: {params.calls} calls per side, interleaved call by call")
        async with AnchorCaller(url) as anchor:
            a_run, s_run = await sequential([anchor, stack], tool, arguments, calls=params.calls, warmup=params.warmup)
        a_error = anchor.transport_error
        for name, run in (("anchor", a_run), ("stack", s_run)):
            latency[name][tool] = run.to_json()
            cdfs[f"{name} {tool}"] = run.samples_ms
        latency["anchor"][tool]["transport_error"] = a_error
        a, s = latency["anchor"][tool]["latency_ms"], latency["stack"][tool]["latency_ms"]
        latency["ratio"][f"{tool}_p50"] = ratio(s["p50"], a["p50"])
        latency["ratio"][f"{tool}_p99"] = ratio(s["p99"], a["p99"])
    a, s = latency["anchor"]["deploy"]["answer_to_result_ms"], latency["stack"]["deploy"]["answer_to_result_ms"]
    latency["ratio"]["answer_to_result_p50"] = ratio(s["p50"], a["p50"])
    latency["ratio"]["answer_to_result_p99"] = ratio(s["p99"], a["p99"])
    sweep = await concurrency_sweep(params, url, stack, pids, "deploy")
    return latency, sweep, cdfs


async def concurrency_sweep(
    params: Params, url: str, stack: Caller, pids: dict[str, dict[str, int]], tool: str
) -> list[dict[str, Any]]:
    """Per level of ``params.concurrency``: ``tool`` calls on a fresh anchor, then on the stack; calls/s,
    latency and the CPU per call of each side's processes (``pids[side]``)."""
    sweep: list[dict[str, Any]] = []
    for level in params.concurrency:
        calls = params.sweep_calls_for(level)
        _progress(f"sweep: {calls} {tool} calls per side, {level} in flight")

        cpu: dict[str, dict[str, Any]] = {}

        async def run_level(
            caller: Caller, level: int = level, calls: int = calls, cpu: dict[str, dict[str, Any]] = cpu
        ) -> SweepPoint:
            meter = CpuMeter(pids[caller.name])
            meter.start()
            point = await concurrent(caller, tool, TOOLS[tool], concurrency=level, calls=calls)
            cpu[caller.name] = meter.stop(point.calls).to_json()
            return point

        a_point, a_error, s_point = await _measure_anchor_then_stack(url, stack, run_level)
        sweep.append(
            {
                "concurrency": level,
                "tool": tool,
                "anchor": {**a_point.to_json(), "transport_error": a_error},
                "stack": s_point.to_json(),
                "ratio_calls_per_s": ratio(s_point.calls_per_s, a_point.calls_per_s),
                "ratio_p50": ratio(s_point.latency.p50, a_point.latency.p50),
                "cpu": cpu_json(cpu["anchor"], cpu["stack"]),
            }
        )
    return sweep


async def _metered(
    caller: Caller, tool: str, level: int, calls: int, pids: dict[str, dict[str, int]]
) -> tuple[SweepPoint, dict[str, Any]]:
    """``calls`` ``tool`` calls with ``level`` in flight and the CPU per call of ``pids[caller.name]``."""
    meter = CpuMeter(pids[caller.name])
    meter.start()
    point = await concurrent(caller, tool, TOOLS[tool], concurrency=level, calls=calls)
    return point, meter.stop(point.calls).to_json()


async def front_door_phase(
    params: Params, url: str, front_door_url: str, stack: Caller, pids: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """Per Tool (``ping``, ``deploy``) and level of ``params.front_door_concurrency``: the same calls through
    the SDK ``Client`` straight to the example server (``direct``), through the broker's ``CallTool``
    (``stack``) and through the SDK ``Client`` to Maka's MCP front door (``front_door``; its forms answered at
    once by the stack's answering surface). The front door's added latency is front_door - direct; it splits
    into the broker path (stack - direct) and the front door's own share (front_door - stack)."""
    rows: list[dict[str, Any]] = []
    for tool in TOOLS:
        for level in params.front_door_concurrency:
            calls = max(params.front_door_calls, 5 * level)
            _progress(f"front door: {calls} {tool} calls per side, {level} in flight")
            points: dict[str, SweepPoint] = {}
            cpu: dict[str, dict[str, Any]] = {}
            errors: dict[str, str] = {}
            async with AnchorCaller(url, name="direct") as direct:
                points["direct"], cpu["direct"] = await _metered(direct, tool, level, calls, pids)
            errors["direct"] = direct.transport_error
            points["stack"], cpu["stack"] = await _metered(stack, tool, level, calls, pids)
            async with AnchorCaller(front_door_url, name="front_door", tool_prefix=FRONT_DOOR_PREFIX) as front:
                points["front_door"], cpu["front_door"] = await _metered(front, tool, level, calls, pids)
            errors["front_door"] = front.transport_error
            d, s, f = (points[name].latency for name in ("direct", "stack", "front_door"))
            rows.append(
                {
                    "tool": tool,
                    "concurrency": level,
                    **{
                        name: {**point.to_json(), "transport_error": errors.get(name, ""), "cpu": cpu[name]}
                        for name, point in points.items()
                    },
                    "added_ms": {"p50": round(f.p50 - d.p50, 3), "p99": round(f.p99 - d.p99, 3)},
                    "added_p50_split_ms": {
                        "broker_path": round(s.p50 - d.p50, 3),
                        "front_door": round(f.p50 - s.p50, 3),
                    },
                    "ratio_calls_per_s": ratio(points["front_door"].calls_per_s, points["direct"].calls_per_s),
                }
            )
    return rows


def profile_dir(out_dir: Path, stem: str) -> Path:
    """Where the profiled services of run ``stem`` write their reports."""
    return out_dir / "profile" / stem


async def profile_phase(params: Params, stack: Stack, caller: Caller, out_dir: Path, stem: str) -> dict[str, Any]:
    """Profile the three services while ``caller`` makes ``profile_calls`` deploy calls, 10 in flight."""
    directory = profile_dir(out_dir, stem)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.txt"):
        stale.unlink()
    pids = stack.supervisor.pids()
    _progress(f"profiling {', '.join(profiling.SERVICES)} during {params.profile_calls} deploy calls")
    profiling.start(pids)
    point = await concurrent(caller, "deploy", DEPLOY_ARGS, concurrency=10, calls=params.profile_calls)
    reports = await profiling.stop(pids, directory)
    cpu_s = {name: profiling.cpu_seconds(path.read_text()) for name, path in reports.items()}
    cpu_ms = {
        name: round(seconds * 1000 / point.calls, 2) if seconds is not None and point.calls else None
        for name, seconds in cpu_s.items()
    }
    return {
        "cpu_s": cpu_s,
        "cpu_ms_per_call": cpu_ms,
        "summary": f"pyinstrument reports in {directory.relative_to(out_dir)}/ (see bench/README.md); "
        "CPU per call while profiled (profiler overhead included): "
        + ", ".join(f"{name} {ms} ms" for name, ms in cpu_ms.items()),
        "calls": point.calls,
        "calls_per_s": round(point.calls_per_s, 1),
        "latency_ms": point.latency.to_json(),
        "reports": {name: str(path.relative_to(out_dir)) for name, path in reports.items()},
    }


async def main_async(params: Params, out_dir: Path, stem: str) -> int:
    """Run every phase and write the results; returns the exit code."""
    started = time.time()
    results: dict[str, Any] = {
        "meta": {
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions(),
            "parameters": {
                **{k: v for k, v in params.__dict__.items() if k != "concurrency"},
                "concurrency": list(params.concurrency),
                "sweep_calls_per_level": {str(c): params.sweep_calls_for(c) for c in params.concurrency},
                "transport": "Streamable HTTP on 127.0.0.1 (one example server process for both sides)",
                "stack_log_level": params.log_level,
            },
        }
    }
    cdfs: dict[str, list[float]] = {}
    scale: ScaleResult | None = None
    code = 0
    work = Path(tempfile.mkdtemp(prefix="maka-bench-", dir="/tmp"))  # short: the Redis unix socket lives here
    try:
        async with example_server(work / "example_server.log") as server:
            config = work / "mcp.json"
            config.write_text(json.dumps({"mcpServers": {"examples": {"url": server.url}}}))
            # the front door's calls run in sessions under this prefix (bench.<client>, one per MCP client:
            # docs/mcp-front-door.md "Sessions"); its SDK clients answer their forms themselves (elicitation)
            env = {FRONT_DOOR_SESSION_ENV: SESSION}
            if params.profile:
                env.update(profiling.profile_env(profile_dir(out_dir, stem)))
            _progress("starting maka up (side-by-side stack, MCP front door included)")
            async with running_stack(
                config, work / "stack", work / "stack.log", params.log_level, env, mcp=True
            ) as stack:
                endpoints = stack.endpoints
                assert endpoints is not None
                async with StackCaller(endpoints.broker, endpoints.interaction) as st:
                    children = stack.supervisor.pids()
                    # the front door idles through the side-by-side runs: not a process of the stack side there
                    stack_children = {name: pid for name, pid in children.items() if name != Stack.MCP}
                    pids = {
                        "anchor": side_pids(server.pid),
                        "stack": side_pids(server.pid, stack_children),
                    }
                    latency, sweep, cdfs = await side_by_side(params, server.url, st, pids)
                    results["latency"], results["sweep"] = latency, sweep
                    results["sweep_ping"] = await concurrency_sweep(params, server.url, st, pids, "ping")
                    front_pids = {
                        "direct": pids["anchor"],
                        "stack": pids["stack"],
                        "front_door": side_pids(server.pid, children),
                    }
                    results["front_door"] = await front_door_phase(params, server.url, endpoints.mcp, st, front_pids)
                    results["stack_rss_kib"] = {
                        name: kib for name, pid in stack.supervisor.pids().items() if (kib := rss_kib(pid)) is not None
                    }
                    if server.pid:
                        results["stack_rss_kib"]["example_server"] = rss_kib(server.pid) or 0
                    if params.profile:
                        results["profile"] = await profile_phase(params, stack, st, out_dir, stem)
            _progress(f"starting maka up (scale stack): {params.pending} pending forms")
            async with running_stack(config, work / "scale", work / "scale.log", params.log_level) as stack:
                endpoints = stack.endpoints
                assert endpoints is not None
                scale = await run_scale(
                    interaction=endpoints.interaction,
                    redis_url=endpoints.redis_url,
                    host_id=endpoints.host_id,
                    pids=stack.supervisor.pids(),
                    pending=params.pending,
                    sessions=params.sessions,
                    window=params.window,
                    probes=params.probes,
                )
                results["scale"] = scale.to_json()
                _progress(
                    f"team scale: {params.fanout_hosts * params.fanout_sessions} Attach streams over "
                    f"{params.fanout_hosts} Hosts + {params.fanout_hosts * params.fanout_links} HostLinks, one replica"
                )
                fanout = await run_team_scale(
                    endpoints.redis_url,
                    work,
                    hosts=params.fanout_hosts,
                    sessions_per_host=params.fanout_sessions,
                    links_per_host=params.fanout_links,
                )
                results["team_scale"] = fanout.to_json()
                _progress(f"failover: {params.failover_calls} one-form calls over 3 Hosts, SIGKILL 1 of 2 replicas")
                failover = await run_replica_kill(endpoints.redis_url, work / "failover", calls=params.failover_calls)
                results["failover"] = failover.to_json()
    except Exception as error:
        log.exception("bench_failed")
        _progress(f"FAILED: {type(error).__name__}: {error} (logs in {work})")
        code = 1
    results["meta"]["duration_s"] = round(time.time() - started, 1)
    results["meta"]["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if "latency" in results:
        report.write(results, cdfs, scale.delivery_at_full_ms if scale else [], out_dir, stem)
        _progress(f"wrote {out_dir / (stem + '.json')}, .md, .png")
    if code == 0:
        shutil.rmtree(work, ignore_errors=True)
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse flags, run, print the Markdown summary."""
    # force: importing the example server (for its schema) lets MCPServer install a Rich INFO handler
    logging.basicConfig(level=logging.WARNING, force=True)
    params, out_dir, stem = parse_args(argv)
    code = asyncio.run(main_async(params, out_dir, stem))
    summary = out_dir / f"{stem}.md"
    if summary.exists():
        print(summary.read_text())
    return code


if __name__ == "__main__":
    sys.exit(main())
