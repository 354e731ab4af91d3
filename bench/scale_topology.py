"""``make scale``: the Kubernetes topology as processes (:mod:`bench.topology`), driven by concurrent
one-form calls answered from several surfaces, with faults injected.

Surfaces: the web page through nginx (TLS, two replicas; it shows ``host-0``), the ``maka answer`` CLI
and the Node.js polyglot surface (``examples/polyglot/surface.mjs``), each answering the forms a
stable hash assigns to it. Every call deploys its own artifact and every answer picks an
environment, so a result that names another call's artifact or another answer's environment is
counted ``misdelivered``.

Phases (each a batch of concurrent calls over every Host):

- ``steady``: no fault;
- ``kill_broker``: kill -9 one Host's broker while its forms wait. Its calls must end ``lost`` and its
  forms close (never replayed); every other Host's calls complete;
- ``kill_interaction``: kill -9 one Interaction replica while forms wait; nothing is lost;
- ``rolling_restart``: SIGTERM one Host's broker and provider together (drained) with calls in flight;
  their forms are answered during the drain and the calls complete.

Then the ``rollout`` phase (:mod:`bench.rollout`): a pool of every Host, forms pending and new calls
arriving while people answer at human speed, through a rolling update of every Host, a node drain and a
scale-in (last: the scale-in leaves the topology a Host short). Every Host drains with
``MAKA_DRAIN_SECONDS=auto``, as deploy/k8s sets it.

Writes ``bench/results/scale.json`` (with its ``rollout`` object) and ``scale.md``.
``python -m bench.scale_topology --small`` is the variant ``make test`` runs; ``--rollout-only`` skips the
fault phases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.rollout import FULL, SMALL, Rollout, RolloutPlan
from bench.rollout import markdown as rollout_markdown
from bench.rollout import report as rollout_report
from bench.scale_driver import SURFACES, Call, Driver, wait_tools
from bench.system import ROOT, machine, process_tree_usage
from bench.topology import Topology, TopologySpec
from stack.probes import grpc_serving
from surfaces.common.interactions import CloseReason

RESULTS = ROOT / "bench" / "results"


@dataclass
class Fault:
    name: str
    target: str
    calls: int
    completed: int
    lost: int
    misdelivered: int
    outcome: str
    detail: dict[str, object] = field(default_factory=dict)


def _phase(name: str, hosts: Sequence[str], per_host: int) -> list[Call]:
    return [Call(host=h, phase=name, index=i) for h in hosts for i in range(per_host)]


async def _run_batch(
    driver: Driver, calls: list[Call], fault: str, target: str, topology: Topology
) -> tuple[list[Call], dict[str, object]]:
    tasks = [asyncio.create_task(driver.call(c)) for c in calls]
    detail: dict[str, object] = {}
    await driver.wait_forms(calls)
    restart: asyncio.Task[None] | None = None
    answerable = calls
    if fault == "kill_broker":
        topology.kill(f"{target}-broker")
        answerable = [c for c in calls if c.host != target]
    elif fault == "kill_interaction":
        topology.kill(target)
    elif fault == "rolling_restart":
        restart = asyncio.create_task(topology.restart_host(target))
        await _draining(topology, target)
        # The draining Host's users answer first: its calls have the drain grace, the others all the time
        # they need (on 2 cores each CLI/Node answer is a process start, about a second of CPU).
        answerable = sorted(calls, key=lambda c: c.host != target)
    started = time.monotonic()
    await asyncio.gather(*(driver.answer(c) for c in answerable))
    await asyncio.gather(*tasks)
    detail["answer_to_last_result_s"] = round(time.monotonic() - started, 3)
    if fault == "rolling_restart":
        # From NOT_SERVING (the drain began) to the last of the draining Host's answers: the Host drains
        # until its calls are done, bounded by its budget (TopologySpec.drain_budget_seconds).
        answered = [c.answered_at for c in calls if c.host == target and c.answered_at]
        detail["drain_answered_within_s"] = round(max(answered) - started, 1) if answered else None
        detail["drain_seconds"] = topology.spec.drain_budget_seconds()
    if restart is not None:
        await asyncio.wait_for(restart, 180)
    if fault in ("kill_broker", "rolling_restart"):
        await wait_tools(topology)
    if fault == "kill_broker":
        killed = [c for c in calls if c.host == target]
        await asyncio.gather(*(driver.reattach(c) for c in killed))
        await driver.wait_closed(target, killed)
        detail["killed_host_form_close_reasons"] = sorted(
            {c.form_close_reason.value for c in killed if c.form_close_reason}
        )
        detail["killed_host_forms_pending_after_restart"] = await driver.pending_count(target, killed)
    return calls, detail


async def _draining(topology: Topology, host: str) -> None:
    async with asyncio.timeout(30):
        while True:
            # The new-calls health service: "" (liveness) stays SERVING while a broker drains.
            new_calls = "maka.broker.v1.CapabilityBrokerService"
            if not await grpc_serving(topology.broker(host), timeout=1, service=new_calls):
                return
            await asyncio.sleep(0.05)  # polling a remote health status, bounded above


def _fault_entry(name: str, target: str, calls: list[Call], *, expect_lost_host: str = "") -> Fault:
    completed = [c for c in calls if c.outcome == "completed"]
    misdelivered = [c for c in completed if not c.delivered_right]
    lost = [c for c in calls if c.outcome != "completed"]
    unexpected = [c for c in lost if c.host != expect_lost_host]
    expected_lost = [c for c in calls if c.host == expect_lost_host]
    if expect_lost_host:
        ok = (
            not unexpected
            and all(c.outcome == "lost" for c in expected_lost)
            and all(c.form_close_reason not in (None, CloseReason.ANSWERED) for c in expected_lost)
            and not misdelivered
        )
    else:
        ok = not lost and not misdelivered
    detail: dict[str, object] = {"outcomes": sorted({c.outcome for c in calls})}
    if unexpected:
        detail["unexpected"] = sorted({f"{c.host} {c.outcome}: {c.text}" for c in unexpected})
    if expect_lost_host:
        detail["killed_host_calls"] = len(expected_lost)
        detail["killed_host_outcomes"] = sorted({c.outcome for c in expected_lost})
    return Fault(
        name=name,
        target=target,
        calls=len(calls),
        completed=len(completed),
        lost=len(lost),
        misdelivered=len(misdelivered),
        outcome="ok" if ok else "FAILED",
        detail=detail,
    )


async def _fault_phases(driver: Driver, topology: Topology, per_host: int) -> tuple[list[Fault], list[Call]]:
    hosts = topology.spec.host_ids()
    faults: list[Fault] = []
    all_calls: list[Call] = []
    plan = [
        ("steady", "", ""),
        ("kill_broker", hosts[-1], hosts[-1]),
        ("kill_interaction", "interaction-0", ""),
        ("rolling_restart", hosts[0], ""),
    ]
    for name, target, lost_host in plan:
        calls = _phase(name, hosts, per_host)
        phase_started = time.monotonic()
        calls, detail = await _run_batch(driver, calls, name, target, topology)
        entry = _fault_entry(name, target or "-", calls, expect_lost_host=lost_host)
        entry.detail.update(detail)
        entry.detail["phase_seconds"] = round(time.monotonic() - phase_started, 1)
        faults.append(entry)
        all_calls.extend(calls)
    return faults, all_calls


def _sigkill(faults: Sequence[Fault]) -> dict[str, object] | None:
    """The ``kill_broker`` fault as the rollout report's ``sigkill`` (a crash, reported apart)."""
    for fault in faults:
        if fault.name == "kill_broker":
            pending = fault.detail.get("killed_host_forms_pending_after_restart")
            return {
                "fault": fault.name,
                "host": fault.target,
                "calls": fault.detail.get("killed_host_calls"),
                "outcomes": fault.detail.get("killed_host_outcomes"),
                "form_close_reasons": fault.detail.get("killed_host_form_close_reasons"),
                "pending_after_restart": pending,
                "replayed": pending != 0,
                "outcome": fault.outcome,
            }
    return None


async def run(
    spec: TopologySpec, per_host: int, state_dir: Path, echo: bool, plan: RolloutPlan, *, faults_too: bool = True
) -> dict[str, object]:
    lines: list[str] = []

    def sink(name: str, line: str) -> None:
        lines.append(f"[{name}] {line}")
        if echo:
            sys.stderr.write(f"[{name}] {line}\n")

    topology = Topology(spec, state_dir, sink)
    started = time.monotonic()
    await topology.start()
    try:
        await wait_tools(topology)
        startup_seconds = round(time.monotonic() - started, 1)
        driver = Driver(topology)
        hosts = spec.host_ids()
        faults, all_calls = await _fault_phases(driver, topology, per_host) if faults_too else ([], [])
        rollout = Rollout(topology, driver, plan, say=lambda line: sink("rollout", line))
        await rollout.run()  # last: its scale-in leaves the topology a Host short
        killed = [c for c in all_calls if c.phase == "kill_broker" and c.host == hosts[-1]]
        report: dict[str, object] = {
            "hosts": spec.hosts,
            "interaction_replicas": spec.interaction_replicas,
            "web_replicas": spec.web_replicas,
            "surfaces": {"kinds": list(SURFACES), "answers": driver.surface_counts},
            "calls": len(all_calls),
            "completed": sum(c.outcome == "completed" for c in all_calls),
            "lost": sum(c.outcome != "completed" for c in all_calls),
            "lost_apart_from_the_killed_host": sum(c.outcome != "completed" for c in all_calls if c not in killed),
            "misdelivered": sum(c.outcome == "completed" and not c.delivered_right for c in all_calls),
            "answer_failures": driver.answer_failures,
            "answer_retries": driver.answer_retries,
            "faults": [asdict(f) for f in faults],
            "rollout": rollout_report(rollout, _sigkill(faults)),
            "startup_seconds": startup_seconds,
            "wall_seconds": round(time.monotonic() - started, 1),
            "resources": _resources(topology),
            "machine": machine(),
            "topology": topology.describe(),
        }
        return report
    finally:
        with contextlib.suppress(Exception):
            await topology.stop()


def _role(name: str) -> str:
    """``host-1-broker`` -> ``broker``, ``interaction-0`` -> ``interaction``, ``nginx`` -> ``nginx``."""
    if name.startswith("host-"):
        return name.rsplit("-", 1)[1]
    return name.split("-", 1)[0]


def _resources(topology: Topology) -> dict[str, dict[str, float]]:
    """Per role, the largest peak RSS and CPU seconds of one process tree (a provider with its stdio MCP
    servers), for sizing requests and limits. Restarted processes count from their restart."""
    roles: dict[str, dict[str, float]] = {}
    for name, pid in topology.supervisor.pids().items():
        usage = process_tree_usage(pid)
        if usage is None:
            continue
        role = roles.setdefault(_role(name), {"processes": 0, "peak_rss_mib": 0.0, "cpu_seconds": 0.0})
        role["processes"] += 1
        role["peak_rss_mib"] = max(role["peak_rss_mib"], usage["peak_rss_mib"])
        role["cpu_seconds"] = max(role["cpu_seconds"], usage["cpu_seconds"])
    return roles


def _notes(fault: dict[str, object]) -> str:
    detail = fault["detail"]
    assert isinstance(detail, dict)
    notes = [f"{detail.get('phase_seconds', '?')} s"]
    if "killed_host_calls" in detail:
        notes.append(
            f"killed Host: {detail['killed_host_calls']} calls {'/'.join(detail['killed_host_outcomes'])},"
            f" forms closed {'/'.join(detail.get('killed_host_form_close_reasons', []))}, "
            f"{detail.get('killed_host_forms_pending_after_restart', '?')} pending after its restart"
        )
    if "drain_seconds" in detail:
        notes.append(
            f"the draining Host's forms answered within {detail['drain_answered_within_s']} s of its"
            f" {detail['drain_seconds']} s drain"
        )
    return "; ".join(notes)


def write_report(report: dict[str, object], out_dir: Path) -> None:
    """``scale.json`` (everything) and ``scale.md`` (the tables)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    surfaces = report["surfaces"]
    machine_info = report["machine"]
    assert isinstance(surfaces, dict)
    assert isinstance(machine_info, dict)
    rows = [
        "# make scale — the Kubernetes topology as processes on one machine",
        "",
        f"Hosts {report['hosts']} (broker + provider each), Interaction replicas {report['interaction_replicas']},"
        f" Redis (AUTH, AOF, noeviction), web replicas {report['web_replicas']} behind TLS nginx. Answers by"
        f" surface: {', '.join(f'{k} {v}' for k, v in surfaces['answers'].items())}"
        f" ({report['answer_retries']} retried after UNAVAILABLE, {len(report['answer_failures'])} failed).",  # type: ignore[arg-type]
        "",
        f"Calls {report['calls']}: completed {report['completed']}, lost {report['lost']} "
        f"(apart from the killed Host's own calls: {report['lost_apart_from_the_killed_host']}), "
        f"misdelivered {report['misdelivered']}. Start {report['startup_seconds']} s, whole run"
        f" {report['wall_seconds']} s on {machine_info.get('cpus')} CPUs ({machine_info.get('cpu')}),"
        f" load average at start {machine_info.get('loadavg_at_start')}.",
        "",
        "| phase / fault | target | calls | completed | lost | misdelivered | outcome | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    faults = report["faults"]
    assert isinstance(faults, list)
    for fault in faults:
        rows.append(
            f"| {fault['name']} | {fault['target']} | {fault['calls']} | {fault['completed']} | {fault['lost']} "
            f"| {fault['misdelivered']} | {fault['outcome']} | {_notes(fault)} |"
        )
    rollout = report["rollout"]
    assert isinstance(rollout, dict)
    rows += rollout_markdown(rollout)
    resources = report["resources"]
    assert isinstance(resources, dict)
    rows += [
        "",
        "Per process (tree) at the end of the run, the largest of each role: peak RSS and CPU seconds over the"
        " whole run (the basis of the requests and limits in deploy/k8s).",
        "",
        "| role | processes | peak RSS MiB | CPU s |",
        "| --- | --- | --- | --- |",
    ]
    for role, usage in sorted(resources.items()):
        rows.append(f"| {role} | {usage['processes']} | {usage['peak_rss_mib']} | {usage['cpu_seconds']} |")
    (out_dir / "scale.md").write_text("\n".join(rows) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_topology", description=__doc__)
    parser.add_argument("--small", action="store_true", help="the small variant (2 calls per Host per phase)")
    parser.add_argument("--per-host", type=int, default=0, help="calls per Host per phase (default 20; 2 --small)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="report directory (default bench/results)")
    parser.add_argument("--quiet", action="store_true", help="do not echo the children's logs")
    parser.add_argument("--rollout-only", action="store_true", help="skip the fault phases (to work on the rollout)")
    args = parser.parse_args(argv)
    per_host = args.per_host or (2 if args.small else 20)
    spec = TopologySpec()  # MAKA_DRAIN_SECONDS=auto on every Host, as deploy/k8s sets it
    plan = SMALL if args.small else FULL
    with tempfile.TemporaryDirectory(prefix="maka-scale-") as tmp:
        report = asyncio.run(
            run(spec, per_host, Path(tmp), echo=not args.quiet, plan=plan, faults_too=not args.rollout_only)
        )
    write_report(report, args.out)
    sys.stdout.write((args.out / "scale.md").read_text())
    faults = report["faults"]
    assert isinstance(faults, list)
    rollout = report["rollout"]
    assert isinstance(rollout, dict)
    ok = all(f["outcome"] == "ok" for f in faults) and report["misdelivered"] == 0 and rollout["outcome"] == "ok"
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
