"""Write the benchmark's results: ``latest.json``, ``latest.md`` (summary tables) and ``latest.png`` (plots)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the Agg backend is chosen first

TARGETS: tuple[tuple[str, str], ...] = (
    ("one_form_p50_ratio", "one-form call p50, stack / anchor <= 1.5"),
    ("answer_to_result_p50_ms", "answer-to-result p50 (stack) < 5 ms"),
    ("delivery_p99_ms", "delivery p99 with the forms pending < 20 ms"),
    ("redis_bytes_per_form", "Redis per pending form < 4 KiB (4096 B)"),
)
LIMITS = {
    "one_form_p50_ratio": 1.5,
    "answer_to_result_p50_ms": 5.0,
    "delivery_p99_ms": 20.0,
    "redis_bytes_per_form": 4096.0,
}


def targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The four issue targets against what was measured (``met`` is None when the figure is missing)."""
    latency = results.get("latency", {})
    scale = results.get("scale") or {}
    measured: dict[str, float | None] = {
        "one_form_p50_ratio": latency.get("ratio", {}).get("deploy_p50"),
        "answer_to_result_p50_ms": latency.get("stack", {}).get("deploy", {}).get("answer_to_result_ms", {}).get("p50"),
        "delivery_p99_ms": scale.get("delivery_at_full_ms", {}).get("p99"),
        "redis_bytes_per_form": scale.get("redis_bytes_per_pending_form"),
    }
    out = []
    for key, text in TARGETS:
        value = measured[key]
        out.append({"key": key, "target": text, "limit": LIMITS[key], "measured": value,
                    "met": None if value is None else value <= LIMITS[key]})  # fmt: skip
    return out


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
        "## Concurrency sweep (one-form Tool `deploy`)",
        "",
        "| in flight | anchor calls/s | stack calls/s | ratio calls/s | anchor p50/p99 ms | stack p50/p99 ms |"
        " stack answer-to-result p50 ms | errors a/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for point in results["sweep"]:
        a, s = point["anchor"], point["stack"]
        lines.append(
            f"| {point['concurrency']} | {a['calls_per_s']} | {s['calls_per_s']} | {point['ratio_calls_per_s']} | "
            f"{_ms(a['latency_ms'], 'p50')}/{_ms(a['latency_ms'], 'p99')} | "
            f"{_ms(s['latency_ms'], 'p50')}/{_ms(s['latency_ms'], 'p99')} | "
            f"{_ms(s['answer_to_result_ms'], 'p50')} | {a['errors']}/{s['errors']} |"
        )
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
            f"(pool setting {team['pool_size']}, {team['followers']} followers); health NOT_SERVING samples: "
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
    """Four panels: latency p50/p99 bars, sweep calls/s, sequential latency CDFs, delivery at scale."""
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
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
    ax.set_xscale("log")
    ax.set_xlabel("calls in flight (deploy, one form)")
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
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
