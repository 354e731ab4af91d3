"""Write the benchmark's results: ``latest.json``, ``latest.md`` (summary tables) and ``latest.png`` (plots)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the Agg backend is chosen first

from bench.cpu import BENCH_PROCESS

TARGETS: tuple[tuple[str, str], ...] = (
    ("one_form_p50_ratio", "one-form call p50, stack / anchor <= 1.5"),
    ("ping_p50_ratio", "no-form call (`ping`) p50, stack / anchor <= 1.3"),
    ("answer_to_result_p50_ratio", "answer-to-result p50, stack / anchor <= 1.5"),
    ("answer_to_result_p50_ms", "answer-to-result p50 (stack) < 5 ms"),
    ("calls_per_s_ratio_10", "calls/s at 10 in flight, stack / anchor >= 0.6"),
    ("calls_per_s_ratio_50", "calls/s at 50 in flight, stack / anchor >= 0.6"),
    ("calls_per_s_ratio_200", "calls/s at 200 in flight, stack / anchor >= 0.6"),
    ("ping_calls_per_s_ratio_10", "no-form calls/s at 10 in flight, stack / anchor >= 0.6"),
    ("ping_calls_per_s_ratio_50", "no-form calls/s at 50 in flight, stack / anchor >= 0.6"),
    ("ping_calls_per_s_ratio_200", "no-form calls/s at 200 in flight, stack / anchor >= 0.6"),
    ("cpu_per_call_ratio", "CPU per one-form call (all processes, 10 in flight), stack / anchor <= 2.5"),
    ("delivery_p99_ms", "delivery p99 with the forms pending < 20 ms"),
    ("redis_bytes_per_form", "Redis per pending form < 4 KiB (4096 B)"),
    ("front_door_added_p50_ms", "front door added p50, no-form <= 2 ms"),
)
LIMITS = {
    "one_form_p50_ratio": 1.5,
    "ping_p50_ratio": 1.3,
    "answer_to_result_p50_ratio": 1.5,
    "answer_to_result_p50_ms": 5.0,
    "calls_per_s_ratio_10": 0.6,
    "calls_per_s_ratio_50": 0.6,
    "calls_per_s_ratio_200": 0.6,
    "ping_calls_per_s_ratio_10": 0.6,
    "ping_calls_per_s_ratio_50": 0.6,
    "ping_calls_per_s_ratio_200": 0.6,
    "cpu_per_call_ratio": 2.5,
    "delivery_p99_ms": 20.0,
    "redis_bytes_per_form": 4096.0,
    "front_door_added_p50_ms": 2.0,
}
AT_LEAST = frozenset(f"{prefix}calls_per_s_ratio_{n}" for prefix in ("", "ping_") for n in (10, 50, 200))
"""Targets that are lower bounds (met when measured >= limit); every other one is an upper bound."""
CPU_TARGET_LEVEL = 10
"""The sweep level whose CPU ratio is judged (the other levels are reported)."""
FRONT_DOOR_TARGET_LEVEL = 1
"""The front door level whose added no-form p50 is judged (one call at a time: latency, not queueing)."""
FRONT_DOOR_SIDES = ("direct", "stack", "front_door")
FRONT_DOOR_PROCESS = "mcp"
"""The front door's process name among the stack's children (``stack.topology.Stack.MCP``)."""

PROFILE_NOTES = "profile-notes.md"
"""The written analysis of the profiles, kept in bench/results/ beside the report."""


def _sweep_level(results: Mapping[str, Any], level: int, key: str = "sweep") -> Mapping[str, Any]:
    return next((point for point in results.get(key) or [] if point.get("concurrency") == level), {})


def _front_door_row(results: Mapping[str, Any], tool: str, level: int) -> Mapping[str, Any]:
    rows = results.get("front_door") or []
    return next((row for row in rows if row.get("tool") == tool and row.get("concurrency") == level), {})


def targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The performance targets against what was measured (``met`` is None when the figure is missing)."""
    latency = results.get("latency", {})
    scale = results.get("scale") or {}
    ratios = latency.get("ratio", {})
    measured: dict[str, float | None] = {
        "one_form_p50_ratio": ratios.get("deploy_p50"),
        "ping_p50_ratio": ratios.get("ping_p50"),
        "answer_to_result_p50_ratio": ratios.get("answer_to_result_p50"),
        "answer_to_result_p50_ms": latency.get("stack", {}).get("deploy", {}).get("answer_to_result_ms", {}).get("p50"),
        **{f"calls_per_s_ratio_{n}": _sweep_level(results, n).get("ratio_calls_per_s") for n in (10, 50, 200)},
        **{
            f"ping_calls_per_s_ratio_{n}": _sweep_level(results, n, "sweep_ping").get("ratio_calls_per_s")
            for n in (10, 50, 200)
        },
        "cpu_per_call_ratio": _sweep_level(results, CPU_TARGET_LEVEL).get("cpu", {}).get("ratio_total"),
        "delivery_p99_ms": scale.get("delivery_at_full_ms", {}).get("p99"),
        "redis_bytes_per_form": scale.get("redis_bytes_per_pending_form"),
        "front_door_added_p50_ms": _front_door_row(results, "ping", FRONT_DOOR_TARGET_LEVEL)
        .get("added_ms", {})
        .get("p50"),
    }
    out = []
    for key, text in TARGETS:
        value, limit = measured[key], LIMITS[key]
        met = None if value is None else (value >= limit if key in AT_LEAST else value <= limit)
        out.append({"key": key, "target": text, "limit": limit, "measured": value, "met": met})
    return out


SIDES = ("anchor", "stack")


def _ms(summary: Mapping[str, Any], key: str) -> str:
    return f"{summary.get(key, 0):.2f}" if summary.get("n") else "-"


def _phase_lines(phases: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if not phases:
        return []
    lines = [
        "Where a stack one-form call spends its time (sequential, ms):",
        "",
        "| phase | p50 | p99 |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {_ms(summary, 'p50')} | {_ms(summary, 'p99')} |" for name, summary in phases.items()]
    return [*lines, ""]


def _sweep_lines(sweep: Sequence[Mapping[str, Any]], what: str) -> list[str]:
    """The concurrency sweep table of one Tool (``what`` names it)."""
    lines = [
        f"## Concurrency sweep ({what})",
        "",
        "| in flight | anchor calls/s | stack calls/s | ratio calls/s | anchor p50/p99 ms | stack p50/p99 ms |"
        " stack answer-to-result p50 ms | errors a/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for point in sweep:
        a, s = point["anchor"], point["stack"]
        lines.append(
            f"| {point['concurrency']} | {a['calls_per_s']} | {s['calls_per_s']} | {point['ratio_calls_per_s']} | "
            f"{_ms(a['latency_ms'], 'p50')}/{_ms(a['latency_ms'], 'p99')} | "
            f"{_ms(s['latency_ms'], 'p50')}/{_ms(s['latency_ms'], 'p99')} | "
            f"{_ms(s['answer_to_result_ms'], 'p50')} | {a['errors']}/{s['errors']} |"
        )
    return lines


def _front_door_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The front door beside the SDK calling the example server directly, and where its added time goes."""
    if not rows:
        return []
    lines = [
        "",
        "## MCP front door (SDK `Client` -> `surfaces.mcp` -> broker -> provider -> example server)",
        "",
        "**direct** = the SDK `Client` calling the example server; **stack** = the broker's `CallTool` (what the "
        "front door calls); **front door** = the same SDK `Client` code calling `examples.<tool>` on the front "
        "door, a form answered at once by the `Attach` surface. Added = front door - direct; it splits into the "
        "broker path (stack - direct) and the front door's own share (front door - stack).",
        "",
        "| Tool | in flight | direct calls/s | front door calls/s | ratio calls/s | direct p50/p99 ms | "
        "front door p50/p99 ms | added p50/p99 ms | of which broker path / front door p50 ms | errors d/s/f |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        d, f = row["direct"], row["front_door"]
        split = row["added_p50_split_ms"]
        errors = "/".join(str(row[side]["errors"]) for side in FRONT_DOOR_SIDES)
        lines.append(
            f"| {row['tool']} | {row['concurrency']} | {d['calls_per_s']} | {f['calls_per_s']} | "
            f"{row['ratio_calls_per_s']} | {_ms(d['latency_ms'], 'p50')}/{_ms(d['latency_ms'], 'p99')} | "
            f"{_ms(f['latency_ms'], 'p50')}/{_ms(f['latency_ms'], 'p99')} | "
            f"{row['added_ms']['p50']:.2f}/{row['added_ms']['p99']:.2f} | "
            f"{split['broker_path']:.2f} / {split['front_door']:.2f} | {errors} |"
        )
    names = list(dict.fromkeys(n for row in rows for n in row["front_door"]["cpu"]["ms_per_call"]))
    lines += [
        "",
        "CPU per front door call by process (ms of user + system CPU per call, every thread; `bench` = the SDK "
        "`Client` and the answering surface), beside the direct call's total:",
        "",
        "| Tool | in flight | " + " | ".join(names) + " | front door total | direct total |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- | --- |",
    ]
    for row in rows:
        per = row["front_door"]["cpu"]["ms_per_call"]
        cells = [f"{per[name]:.2f}" if name in per else "-" for name in names]
        lines.append(
            f"| {row['tool']} | {row['concurrency']} | "
            + " | ".join(cells)
            + f" | {row['front_door']['cpu']['total_ms_per_call']:.2f}"
            + f" | {row['direct']['cpu']['total_ms_per_call']:.2f} |"
        )
    judged = next((r for r in rows if r["tool"] == "ping" and r["concurrency"] == FRONT_DOOR_TARGET_LEVEL), None)
    if judged is not None and judged["added_ms"]["p50"] > LIMITS["front_door_added_p50_ms"]:
        split = judged["added_p50_split_ms"]
        per = judged["front_door"]["cpu"]["ms_per_call"]
        top = sorted(per.items(), key=lambda item: -item[1])[:3]
        lines += [
            "",
            f"Where the excess goes (no-form, {FRONT_DOOR_TARGET_LEVEL} in flight): added p50 "
            f"{judged['added_ms']['p50']:.2f} ms = broker path {split['broker_path']:.2f} ms (the `CallTool` "
            f"stream, broker and provider hops) + front door {split['front_door']:.2f} ms (its MCP server, the "
            "SDK's Streamable HTTP request and its broker client); most CPU per call: "
            + ", ".join(f"{name} {ms:.2f} ms" for name, ms in top)
            + ".",
        ]
        share = front_door_share(judged)
        if share is not None:
            lines[-1] += (
                f" The front door's share ({split['front_door']:.2f} ms) is not all its own process: its process "
                f"spends {share['door_cpu']:.2f} ms of CPU per call; the calling process {share['caller_cpu']:+.2f} "
                "ms against the stack row (the SDK `Client` over HTTP instead of the `CallTool` caller); the "
                f"other processes {share['others_cpu']:+.2f} ms; {share['rest']:+.2f} ms of wall time is left "
                "(waiting and scheduling when positive; CPU off the call's path or overlapping when negative)."
            )
    return lines


def front_door_share(row: Mapping[str, Any]) -> dict[str, float] | None:
    """Where a front door row's own share of the added p50 (front door - stack) goes, in ms per call: the CPU of
    the front door's process (``door_cpu``), the calling process's CPU beyond the stack row's (``caller_cpu``: the
    front door row's caller is the SDK ``Client`` over HTTP, the stack row's the broker's ``CallTool`` client), the
    other processes' CPU beyond the stack row's (``others_cpu``) and the wall time none of that covers (``rest``).
    None when a CPU figure is missing."""
    door = row["front_door"].get("cpu", {}).get("ms_per_call", {})
    stack = row["stack"].get("cpu", {}).get("ms_per_call", {})
    if FRONT_DOOR_PROCESS not in door or BENCH_PROCESS not in door or BENCH_PROCESS not in stack:
        return None
    door_cpu = float(door[FRONT_DOOR_PROCESS])
    caller_cpu = float(door[BENCH_PROCESS]) - float(stack[BENCH_PROCESS])
    others = [name for name in door if name not in (FRONT_DOOR_PROCESS, BENCH_PROCESS)]
    others_cpu = sum(float(door[name]) - float(stack.get(name, 0.0)) for name in others)
    rest = float(row["added_p50_split_ms"]["front_door"]) - door_cpu - caller_cpu - others_cpu
    return {
        "door_cpu": round(door_cpu, 3),
        "caller_cpu": round(caller_cpu, 3),
        "others_cpu": round(others_cpu, 3),
        "rest": round(rest, 3),
    }


def _cpu_lines(sweep: Sequence[Mapping[str, Any]], tool: str = "deploy") -> list[str]:
    """Per sweep level and process, CPU ms per call (user + system, every thread), each side's total, ratio."""
    points = [point for point in sweep if point.get("cpu")]
    if not points:
        return []
    names = {side: list(dict.fromkeys(n for p in points for n in p["cpu"][side]["ms_per_call"])) for side in SIDES}
    header = [f"{side} {name}" for side in SIDES for name in [*names[side], "total"]]
    lines = [
        "",
        f"## CPU per call (the sweep's `{tool}` calls; ms of user + system CPU per call, every thread)",
        "",
        "anchor: `bench` = the SDK `Client` (this process), `example_server` = the MCP server. stack: `bench` = "
        "the `CallTool` caller and the answering surface, then the example server and every `maka up` process.",
        "",
        "| in flight | " + " | ".join(header) + " | ratio total |",
        "| --- | " + " | ".join("---" for _ in header) + " | --- |",
    ]
    for point in points:
        cells = []
        for side in SIDES:
            per = point["cpu"][side]["ms_per_call"]
            cells += [f"{per[name]:.2f}" if name in per else "-" for name in names[side]]
            cells.append(f"{point['cpu'][side]['total_ms_per_call']:.2f}")
        lines.append(f"| {point['concurrency']} | " + " | ".join(cells) + f" | {point['cpu']['ratio_total']} |")
    return lines


def markdown(results: Mapping[str, Any]) -> str:
    """A human summary of ``results`` (the same dict as ``latest.json``)."""
    meta = results["meta"]
    lines = [
        "# Maka benchmark",
        "",
        f"Run {meta['started_at']} ({meta['duration_s']:.0f} s) on {meta['machine']['cpu']}, "
        f"{meta['machine']['cpus']} CPUs, {meta['machine']['mem_total_mib']} MiB, load average "
        f"{meta['machine'].get('loadavg_at_start')} -> {meta['machine'].get('loadavg_at_end')}; "
        f"git {meta['versions']['git']}; "
        f"Python {meta['versions']['python']}, mcp {meta['versions']['mcp']}, grpcio {meta['versions']['grpcio']}, "
        f"{meta['versions']['redis-server'].split(' sha=')[0]}.",
        "",
        f"Parameters: `{json.dumps(meta['parameters'], sort_keys=True)}`",
        "",
        "**anchor** = official SDK `Client` auto-loop (`call_tool`, elicitation callback accepts at once); "
        "**stack** = `maka up` processes (broker `CallTool`) + an `Attach` surface answering each form at once. "
        "Same example server over Streamable HTTP on loopback.",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
    ]
    for row in results["targets"]:
        value = "-" if row["measured"] is None else f"{row['measured']:.3f}"
        met = "-" if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(f"| {row['target']} | {value} | {met} |")
    if any(row["met"] is False for row in results["targets"]):
        lines += [
            "",
            f"Where the time of the targets not met goes, per process, and why each remaining cost is needed: "
            f"[{PROFILE_NOTES}]({PROFILE_NOTES}) beside this report (the CPU profile of every service, measured "
            "side by side with `python -m bench.cpuprobe`).",
        ]
    latency = results["latency"]
    lines += [
        "",
        "## Latency per call (sequential, ms)",
        "",
        "| Tool | anchor p50 | anchor p99 | stack p50 | stack p99 | ratio p50 | ratio p99 | errors a/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tool in ("ping", "deploy"):
        a, s = latency["anchor"][tool], latency["stack"][tool]
        lines.append(
            f"| {tool} | {_ms(a['latency_ms'], 'p50')} | {_ms(a['latency_ms'], 'p99')} | "
            f"{_ms(s['latency_ms'], 'p50')} | {_ms(s['latency_ms'], 'p99')} | {latency['ratio'][tool + '_p50']} | "
            f"{latency['ratio'][tool + '_p99']} | {a['errors']}/{s['errors']} |"
        )
    a, s = latency["anchor"]["deploy"]["answer_to_result_ms"], latency["stack"]["deploy"]["answer_to_result_ms"]
    lines += [
        "",
        f"Answer-to-result (the answer leaves the answering side -> final result at the caller), deploy: "
        f"anchor p50 {_ms(a, 'p50')} / p99 {_ms(a, 'p99')} ms; stack p50 {_ms(s, 'p50')} / p99 {_ms(s, 'p99')} ms "
        f"(ratio p50 {latency['ratio']['answer_to_result_p50']}).",
        "",
        *_phase_lines(latency["stack"]["deploy"].get("phases_ms", {})),
    ]
    lines += _sweep_lines(results["sweep"], "one-form Tool `deploy`")
    lines += _cpu_lines(results["sweep"])
    if results.get("sweep_ping"):
        lines += ["", *_sweep_lines(results["sweep_ping"], "no-form Tool `ping`")]
        lines += _cpu_lines(results["sweep_ping"], "ping")
    lines += _front_door_lines(results.get("front_door") or [])
    team = results.get("team_scale")
    if team:
        lines += [
            "",
            f"## Team scale: {team['subscribers']} Attach streams over {team['hosts']} Hosts + {team['links']} "
            "HostLinks on one Interaction replica",
            "",
            f"- Snapshots {team['snapshots']}/{team['subscribers']}, live deliveries {team['deliveries']}, "
            f"settlements at the brokers {team['settlements_received']}/{team['settlements_expected']}",
            f"- Delivery (form created -> subscriber): p50 {team['delivery_ms'].get('p50', 0):.1f} / "
            f"p99 {team['delivery_ms'].get('p99', 0):.1f} ms",
            f"- Redis connections of the replica (CLIENT LIST, max): {team['max_redis_connections']} "
            f"(pool setting {team['pool_size']}, {team['followers']} followers; "
            f"{team.get('other_redis_connections', 0)} connections of the stack's own service not counted); "
            "health NOT_SERVING samples: "
            f"{team['health_not_serving']}/{team['health_samples']}",
            f"- Attach streams resumed after a transport-level end: {team['subscriber_reconnects']}; "
            f"replica RSS {team['rss_kib']} KiB",
        ]
    failover = results.get("failover")
    if failover:
        lines += [
            "",
            f"## Failover: SIGKILL one of two Interaction replicas during {failover['calls']} one-form calls over "
            f"{failover['hosts']} Hosts (client-side round_robin)",
            "",
            f"- Completed {failover['completed']}/{failover['calls']}; lost {len(failover['lost'])}; "
            f"misdelivered {len(failover['misdelivered'])}; killed after {failover['killed_after_forms']} forms",
            *[f"- not completed: {entry}" for entry in failover["lost"][:5]],
            f"- Every surface saw every form of its Host: {failover['every_form_seen']}; both surfaces of each Host "
            f"saw the same forms: {failover['surfaces_agree']}; surface stream resumes: "
            f"{failover['surface_disconnects']}; wall {failover['wall_s']} s",
            "- Redis failover (Sentinel and Cluster, mid-form): asserted by tests/interaction_tier/test_redis_modes.py "
            "(the committed answer survives, a second answer is refused ALREADY_SETTLED, the other form settles)",
        ]
    scale = results.get("scale")
    if scale:
        before = scale["rss_kib_before"]
        lines += [
            "",
            f"## Scale: {scale['pending']} forms pending ({scale['sessions']} sessions)",
            "",
            f"- Redis per pending form: **{scale['redis_bytes_per_pending_form']:.0f} B** "
            f"(used_memory {scale['redis_used_memory_before']} -> {scale['redis_used_memory_after']} B)",
            f"- Fill: {scale['fill_s']:.2f} s ({scale['fill_opens_per_s']:.0f} opens/s)",
            f"- Delivery open -> subscribed surface with all pending: p50 {_ms(scale['delivery_at_full_ms'], 'p50')} "
            f"/ p99 {_ms(scale['delivery_at_full_ms'], 'p99')} ms (n={scale['delivery_at_full_ms']['n']}); "
            f"during the fill: p50 {_ms(scale['delivery_during_fill_ms'], 'p50')} / "
            f"p99 {_ms(scale['delivery_during_fill_ms'], 'p99')} ms",
            f"- Host epoch change: {scale['epoch_change_closed']} closed as host_restarted; hello answered in "
            f"{scale['epoch_change_reply_s']:.2f} s; the surface had seen every closure after "
            f"{scale['epoch_change_surface_s']:.2f} s",
            "- RSS (KiB) before -> after the fill: "
            + ", ".join(f"{name} {before.get(name, '-')} -> {kib}" for name, kib in scale["rss_kib_after"].items()),
            "",
            *[f"Note: {note}" for note in scale["notes"]],
        ]
    rss = results.get("stack_rss_kib")
    if rss:
        lines += ["", "RSS after the latency runs (KiB): " + ", ".join(f"{k} {v}" for k, v in rss.items())]
    profile = results.get("profile")
    if profile:
        lines += ["", "## Profile", "", str(profile.get("summary", ""))]
    return "\n".join(lines) + "\n"


def plot(
    results: Mapping[str, Any], cdfs: Mapping[str, Sequence[float]], delivery: Sequence[float], path: Path
) -> None:
    """Five panels: latency p50/p99 bars, sweep calls/s, sequential latency CDFs, delivery at scale, and CPU
    per call by process (stacked, per sweep level and side)."""
    fig, axes = plt.subplots(3, 2, figsize=(13, 13))
    latency = results["latency"]
    ax = axes[0][0]
    labels, p50s, p99s = [], [], []
    for tool in ("ping", "deploy"):
        for side in ("anchor", "stack"):
            summary = latency[side][tool]["latency_ms"]
            labels.append(f"{side}\n{tool}")
            p50s.append(summary["p50"])
            p99s.append(summary["p99"])
    for side in ("anchor", "stack"):
        summary = latency[side]["deploy"]["answer_to_result_ms"]
        labels.append(f"{side}\nanswer->result")
        p50s.append(summary["p50"])
        p99s.append(summary["p99"])
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], p50s, width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], p99s, width=0.4, label="p99")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("ms")
    ax.set_title("Sequential latency per call")
    ax.legend()

    ax = axes[0][1]
    sweep = results["sweep"]
    conc = [p["concurrency"] for p in sweep]
    ax.plot(conc, [p["anchor"]["calls_per_s"] for p in sweep], "o-", label="anchor calls/s")
    ax.plot(conc, [p["stack"]["calls_per_s"] for p in sweep], "s-", label="stack calls/s")
    ping_sweep = results.get("sweep_ping") or []
    if ping_sweep:
        ping_conc = [p["concurrency"] for p in ping_sweep]
        ax.plot(ping_conc, [p["anchor"]["calls_per_s"] for p in ping_sweep], "o--", label="anchor calls/s (ping)")
        ax.plot(ping_conc, [p["stack"]["calls_per_s"] for p in ping_sweep], "s--", label="stack calls/s (ping)")
    ax.set_xscale("log")
    ax.set_xlabel("calls in flight (deploy, one form; ping, no form)")
    ax.set_ylabel("calls/s")
    ax.set_title("Concurrency sweep")
    ax.legend()

    ax = axes[1][0]
    for name, values in cdfs.items():
        if values:
            ordered = sorted(values)
            ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("ms")
    ax.set_ylabel("fraction of calls")
    ax.set_title("Sequential latency CDF")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    scale = results.get("scale")
    if scale and delivery:
        ax.hist(delivery, bins=40)
        ax.axvline(scale["delivery_at_full_ms"]["p99"], color="red", linestyle="--", label="p99")
        ax.set_xlabel("ms")
        ax.set_title(f"Delivery to a subscribed surface, {scale['pending']} pending")
        ax.legend()
    else:
        ax.set_axis_off()

    _plot_cpu(axes[2][0], [point for point in sweep if point.get("cpu")])
    _plot_front_door(axes[2][1], results.get("front_door") or [])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_front_door(ax: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Added p50 and p99 (front door - direct) per Tool against calls in flight."""
    if not rows:
        ax.set_axis_off()
        return
    for tool in dict.fromkeys(row["tool"] for row in rows):
        mine = [row for row in rows if row["tool"] == tool]
        levels = [row["concurrency"] for row in mine]
        ax.plot(levels, [row["added_ms"]["p50"] for row in mine], "o-", label=f"{tool} added p50")
        ax.plot(levels, [row["added_ms"]["p99"] for row in mine], "s--", label=f"{tool} added p99")
    ax.axhline(LIMITS["front_door_added_p50_ms"], color="red", linestyle=":", label="target (no-form p50)")
    ax.set_xscale("log")
    ax.set_xlabel("calls in flight")
    ax.set_ylabel("ms")
    ax.set_title("MCP front door: added latency over the SDK calling the server directly")
    ax.legend(fontsize=7)


def _plot_cpu(ax: Any, points: Sequence[Mapping[str, Any]]) -> None:
    """Stacked bars: CPU ms per call of each process, one bar per (sweep level, side)."""
    if not points:
        ax.set_axis_off()
        return
    labels = [f"{side}\n{point['concurrency']}" for point in points for side in SIDES]
    per_bar = [point["cpu"][side]["ms_per_call"] for point in points for side in SIDES]
    names = list(dict.fromkeys(name for bar in per_bar for name in bar))
    bottoms = [0.0] * len(per_bar)
    xs = list(range(len(per_bar)))
    for name in names:
        heights = [bar.get(name, 0.0) for bar in per_bar]
        ax.bar(xs, heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_xticks(xs, labels, fontsize=8)
    ax.set_ylabel("CPU ms per call")
    ax.set_title("CPU per deploy call by process (side, calls in flight)")
    ax.legend(fontsize=7)


def write(
    results: dict[str, Any],
    cdfs: Mapping[str, Sequence[float]],
    delivery: Sequence[float],
    out_dir: Path,
    stem: str = "latest",
) -> None:
    """Write ``<stem>.json``, ``<stem>.md`` and ``<stem>.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    (out_dir / f"{stem}.md").write_text(markdown(results))
    plot(results, cdfs, delivery, out_dir / f"{stem}.png")
