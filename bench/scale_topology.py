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

Writes ``bench/results/scale.json`` and ``scale.md``. ``python -m bench.scale_topology --small`` is the
variant ``make test`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc.aio
import httpx

from bench.system import ROOT, machine, process_tree_usage
from bench.topology import Topology, TopologySpec
from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from stack.probes import grpc_serving, list_tools
from surfaces.common.interactions import CloseReason, Interactions, InteractionView

RESULTS = ROOT / "bench" / "results"
SURFACES = ("web", "cli", "polyglot")
ENVIRONMENTS = ("staging", "production")
FORM_TIMEOUT = 60.0
ANSWER_ATTEMPTS = 4
SURFACE_PROCESSES = 4
CALL_TIMEOUT = 180.0


@dataclass
class Call:
    """One ``examples:deploy`` call and what became of it."""

    host: str
    phase: str
    index: int
    artifact: str = ""
    session: str = ""
    tool_use_id: str = ""
    outcome: str = ""
    text: str = ""
    interaction_id: str = ""
    answered_by: str = ""
    environment: str = ""
    invocation_id: str = ""
    answered_at: float = 0.0
    form_close_reason: CloseReason | None = None

    def __post_init__(self) -> None:
        self.artifact = f"{self.phase}-{self.host}-{self.index}"
        self.session = f"s-{self.phase}-{self.host}"
        self.tool_use_id = f"use-{self.index}"

    @property
    def delivered_right(self) -> bool:
        return self.text == f"Deployed {self.artifact} to {self.environment}."


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


def _surface_for(call: Call) -> str:
    if call.host != "host-0":  # the web replicas show host-0; the other Hosts are answered elsewhere
        return SURFACES[1 + int(hashlib.sha256(call.artifact.encode()).hexdigest(), 16) % 2]
    return SURFACES[int(hashlib.sha256(call.artifact.encode()).hexdigest(), 16) % 3]


def _environment_for(call: Call) -> str:
    return ENVIRONMENTS[call.index % 2]


class Driver:
    """Starts calls, finds their forms, answers each from its surface, collects the outcomes."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.node = shutil.which("node") or str(ROOT / ".tools" / "bin" / "node22")
        self.surface_counts: dict[str, int] = dict.fromkeys(SURFACES, 0)
        self.answer_failures: list[str] = []
        self.answer_retries = 0
        self.processes = asyncio.Semaphore(SURFACE_PROCESSES)
        """Bounds the CLI and Node.js answer processes running at once (in arrival order)."""

    async def call(self, call: Call) -> None:
        request = broker_pb2.CallToolRequest(
            session_id=call.session,
            turn_id="turn-1",
            tool_use_id=call.tool_use_id,
            tool_name="examples:deploy",
            arguments_json=json.dumps({"artifact": call.artifact}),
        )
        async with grpc.aio.insecure_channel(self.topology.broker(call.host)) as channel:
            stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            try:
                async with asyncio.timeout(CALL_TIMEOUT):
                    async for event in stub.CallTool(request):
                        kind = event.WhichOneof("event")
                        if kind == "accepted":
                            call.invocation_id = event.accepted.invocation_id
                        elif kind == "result":
                            payload = json.loads(event.result.call_tool_result_json)
                            call.text = "\n".join(b.get("text", "") for b in payload.get("content", []))
                            call.outcome = "completed"
                        elif kind in ("failure", "lost", "stopped"):
                            call.outcome = kind
            except grpc.aio.AioRpcError as error:
                call.outcome = f"rpc_{error.code().name.lower()}"
            except TimeoutError:
                call.outcome = "timed_out"

    async def reattach(self, call: Call) -> None:
        """After a broker was killed: ``WatchCall`` the invocation on the restarted broker of its Host. An
        invocation it does not know (NOT_FOUND) died with its broker: ``lost``, and it was not run again."""
        if call.outcome == "completed" or not call.invocation_id:
            return
        request = broker_pb2.WatchCallRequest(invocation_id=call.invocation_id)
        async with grpc.aio.insecure_channel(self.topology.broker(call.host)) as channel:
            stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
            try:
                async with asyncio.timeout(CALL_TIMEOUT):
                    async for response in stub.WatchCall(request):
                        kind = response.event.WhichOneof("event")
                        if kind in ("result", "failure", "lost", "stopped"):
                            call.outcome = "completed" if kind == "result" else kind
            except grpc.aio.AioRpcError as error:
                call.outcome = (
                    "lost" if error.code() == grpc.StatusCode.NOT_FOUND else f"rpc_{error.code().name.lower()}"
                )
            except TimeoutError:
                call.outcome = "timed_out"

    async def wait_closed(self, host: str, calls: Sequence[Call]) -> None:
        """Wait (bounded) until each call's form is closed, and record why it closed."""
        async with (
            asyncio.timeout(FORM_TIMEOUT),
            Interactions.connect(self.topology.interaction_target, host_id=host) as client,
        ):
            for call in calls:
                while True:
                    view = await client.get(call.interaction_id, session_id=call.session)
                    if not view.pending:
                        call.form_close_reason = view.close_reason
                        break
                    await asyncio.sleep(0.05)  # polling a remote record, bounded above

    async def pending_count(self, host: str, calls: Sequence[Call]) -> int:
        """Forms now pending in the sessions of ``calls``: a replayed call would open a new one."""
        async with Interactions.connect(self.topology.interaction_target, host_id=host) as client:
            return len(await client.pending(sorted({c.session for c in calls})))

    async def wait_forms(self, calls: Sequence[Call]) -> None:
        """Poll ``ListPending`` of each Host until every call has its form (bounded)."""
        by_host: dict[str, list[Call]] = {}
        for call in calls:
            by_host.setdefault(call.host, []).append(call)
        async with asyncio.timeout(FORM_TIMEOUT):
            for host, host_calls in by_host.items():
                async with Interactions.connect(self.topology.interaction_target, host_id=host) as client:
                    while True:
                        pending = await client.pending(sorted({c.session for c in host_calls}))
                        self._bind(host_calls, pending)
                        if all(c.interaction_id for c in host_calls):
                            break
                        await asyncio.sleep(0.05)  # polling a remote listing, bounded above

    @staticmethod
    def _bind(calls: Sequence[Call], pending: Sequence[InteractionView]) -> None:
        by_key = {(c.session, c.tool_use_id): c for c in calls}
        for view in pending:
            call = by_key.get((view.session_id, view.tool_use_id))
            if call is not None:
                call.interaction_id = view.interaction_id

    async def answer(self, call: Call) -> None:
        call.answered_by = _surface_for(call)
        call.environment = _environment_for(call)
        values = {"environment": call.environment, "confirm": True}
        for attempt in range(ANSWER_ATTEMPTS):
            try:
                await self._answer_once(call, values)
            except RuntimeError as error:
                if attempt == ANSWER_ATTEMPTS - 1 or "UNAVAILABLE" not in str(error):
                    self.answer_failures.append(f"{call.answered_by} {call.artifact}: {error}")
                    return
                self.answer_retries += 1
                await asyncio.sleep(0.2 * (attempt + 1))  # retry backoff (same submission id), not synchronisation
                continue
            self.surface_counts[call.answered_by] += 1
            call.answered_at = time.monotonic()
            return

    async def _answer_once(self, call: Call, values: dict[str, object]) -> None:
        if call.answered_by == "web":
            await self._answer_web(call, values)
        elif call.answered_by == "cli":
            await self._answer_process(
                [
                    *(sys.executable, "-m", "surfaces.cli.main", "answer", call.interaction_id, "accept"),
                    *("--values", json.dumps(values), "--session", call.session, "--host-id", call.host),
                    *("--submission-id", f"cli-{call.artifact}"),
                    *("--interaction", self.topology.interaction_target),
                ]
            )
        else:
            await self._answer_process(
                [
                    *(self.node, str(ROOT / "examples" / "polyglot" / "surface.mjs")),
                    *("--target", self.topology.interaction_target, "--host-id", call.host),
                    *("answer", call.interaction_id, "accept", json.dumps(values), "--session", call.session),
                    *("--submission-id", f"polyglot-{call.artifact}"),
                ]
            )

    async def _answer_web(self, call: Call, values: dict[str, object]) -> None:
        assert self.topology.certs is not None
        context = ssl.create_default_context(cafile=str(self.topology.certs.ca))
        base = self.topology.proxy_url
        async with httpx.AsyncClient(base_url=base, verify=context, timeout=20) as client:
            for attempt in range(5):
                csrf = (await client.get("/api/session")).json()["csrf"]
                response = await client.post(
                    f"/api/interactions/{call.interaction_id}/answer",
                    json={
                        "session_id": call.session,
                        "submission_id": f"web-{call.artifact}",
                        "action": "accept",
                        "values": values,
                    },
                    headers={"X-Maka-CSRF": csrf, "Origin": base},
                )
                if response.status_code == 200:
                    return
                if response.status_code != 503 or attempt == 4:
                    raise RuntimeError(f"web answer {response.status_code}: {response.text[:200]}")
                await asyncio.sleep(0.2 * (attempt + 1))  # retry backoff for UNAVAILABLE, not synchronisation

    async def _answer_process(self, argv: list[str]) -> None:
        async with self.processes:
            await self._run_process(argv)

    async def _run_process(self, argv: list[str]) -> None:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        if process.returncode != 0:
            raise RuntimeError(f"exit {process.returncode}: {(err or out).decode(errors='replace')[:300]}")


async def _wait_tools(topology: Topology) -> None:
    async with asyncio.timeout(90):
        for host in topology.spec.host_ids():
            while True:
                if "examples:deploy" in await _tools(topology.broker(host)):
                    break
                await asyncio.sleep(0.1)  # polling a remote listing, bounded above


async def _tools(broker: str) -> list[str]:
    try:
        return await list_tools(broker)
    except grpc.aio.AioRpcError:
        return []


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
        # From NOT_SERVING (the drain began) to the last of the draining Host's answers: it must stay below
        # the drain grace (TopologySpec.drain_seconds) for every call to finish.
        answered = [c.answered_at for c in calls if c.host == target and c.answered_at]
        detail["drain_answered_within_s"] = round(max(answered) - started, 1) if answered else None
        detail["drain_seconds"] = topology.spec.drain_seconds
    if restart is not None:
        await asyncio.wait_for(restart, 180)
    if fault in ("kill_broker", "rolling_restart"):
        await _wait_tools(topology)
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


async def run(spec: TopologySpec, per_host: int, state_dir: Path, echo: bool) -> dict[str, object]:
    lines: list[str] = []

    def sink(name: str, line: str) -> None:
        lines.append(f"[{name}] {line}")
        if echo:
            sys.stderr.write(f"[{name}] {line}\n")

    topology = Topology(spec, state_dir, sink)
    started = time.monotonic()
    await topology.start()
    try:
        await _wait_tools(topology)
        startup_seconds = round(time.monotonic() - started, 1)
        driver = Driver(topology)
        hosts = spec.host_ids()
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
    args = parser.parse_args(argv)
    per_host = args.per_host or (2 if args.small else 20)
    spec = TopologySpec(drain_seconds=30.0)
    with tempfile.TemporaryDirectory(prefix="maka-scale-") as tmp:
        report = asyncio.run(run(spec, per_host, Path(tmp), echo=not args.quiet))
    write_report(report, args.out)
    sys.stdout.write((args.out / "scale.md").read_text())
    faults = report["faults"]
    assert isinstance(faults, list)
    ok = all(f["outcome"] == "ok" for f in faults) and report["misdelivered"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
