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

from bench.system import ROOT
from bench.topology import Topology, TopologySpec
from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from surfaces.common.interaction_client import InteractionClient, InteractionView
from surfaces.stack.supervisor import grpc_serving, list_tools

RESULTS = ROOT / "bench" / "results"
SURFACES = ("web", "cli", "polyglot")
ENVIRONMENTS = ("staging", "production")
FORM_TIMEOUT = 60.0
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
                        if kind == "result":
                            payload = json.loads(event.result.call_tool_result_json)
                            call.text = "\n".join(b.get("text", "") for b in payload.get("content", []))
                            call.outcome = "completed"
                        elif kind in ("failure", "lost", "stopped"):
                            call.outcome = kind
            except grpc.aio.AioRpcError as error:
                call.outcome = f"rpc_{error.code().name.lower()}"
            except TimeoutError:
                call.outcome = "timed_out"

    async def wait_forms(self, calls: Sequence[Call]) -> None:
        """Poll ``ListPending`` of each Host until every call has its form (bounded)."""
        by_host: dict[str, list[Call]] = {}
        for call in calls:
            by_host.setdefault(call.host, []).append(call)
        async with asyncio.timeout(FORM_TIMEOUT):
            for host, host_calls in by_host.items():
                async with InteractionClient.connect(self.topology.interaction_target, host_id=host) as client:
                    while True:
                        pending = await client.list_pending(sorted({c.session for c in host_calls}))
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
        try:
            if call.answered_by == "web":
                await self._answer_web(call, values)
            elif call.answered_by == "cli":
                await self._answer_process(
                    [
                        *(sys.executable, "-m", "surfaces.cli.main", "answer", call.interaction_id, "accept"),
                        *("--values", json.dumps(values), "--session", call.session, "--host", call.host),
                        *("--interaction", self.topology.interaction_target),
                    ]
                )
            else:
                await self._answer_process(
                    [
                        *(self.node, str(ROOT / "examples" / "polyglot" / "surface.mjs")),
                        *("--target", self.topology.interaction_addresses()[0], "--host", call.host),
                        *("answer", call.interaction_id, "accept", json.dumps(values), "--session", call.session),
                    ]
                )
            self.surface_counts[call.answered_by] += 1
        except RuntimeError as error:
            self.answer_failures.append(f"{call.answered_by} {call.artifact}: {error}")

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
    started = time.monotonic()
    await asyncio.gather(*(driver.answer(c) for c in answerable))
    await asyncio.gather(*tasks)
    detail["answer_to_last_result_s"] = round(time.monotonic() - started, 3)
    if restart is not None:
        await asyncio.wait_for(restart, 180)
    if fault in ("kill_broker", "rolling_restart"):
        await _wait_tools(topology)
    return calls, detail


async def _draining(topology: Topology, host: str) -> None:
    async with asyncio.timeout(30):
        while True:
            if not await grpc_serving(topology.broker(host), timeout=1):
                return
            await asyncio.sleep(0.05)  # polling a remote health status, bounded above


def _fault_entry(name: str, target: str, calls: list[Call], *, expect_lost_host: str = "") -> Fault:
    completed = [c for c in calls if c.outcome == "completed"]
    misdelivered = [c for c in completed if not c.delivered_right]
    lost = [c for c in calls if c.outcome != "completed"]
    unexpected = [c for c in lost if c.host != expect_lost_host]
    expected_lost = [c for c in calls if c.host == expect_lost_host]
    if expect_lost_host:
        ok = not unexpected and all(c.outcome == "lost" for c in expected_lost) and not misdelivered
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
            calls, detail = await _run_batch(driver, calls, name, target, topology)
            entry = _fault_entry(name, target or "-", calls, expect_lost_host=lost_host)
            entry.detail.update(detail)
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
            "faults": [asdict(f) for f in faults],
            "wall_seconds": round(time.monotonic() - started, 1),
            "topology": topology.describe(),
        }
        return report
    finally:
        with contextlib.suppress(Exception):
            await topology.stop()


def write_report(report: dict[str, object], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    rows = [
        "# make scale — the Kubernetes topology as processes on one machine",
        "",
        f"Hosts {report['hosts']}, Interaction replicas {report['interaction_replicas']}, web replicas "
        f"{report['web_replicas']} behind TLS nginx; surfaces {report['surfaces']}.",
        "",
        f"Calls {report['calls']}: completed {report['completed']}, lost {report['lost']} "
        f"(apart from the killed Host's own calls: {report['lost_apart_from_the_killed_host']}), "
        f"misdelivered {report['misdelivered']}; {report['wall_seconds']} s.",
        "",
        "| phase / fault | target | calls | completed | lost | misdelivered | outcome |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    faults = report["faults"]
    assert isinstance(faults, list)
    for fault in faults:
        rows.append(
            f"| {fault['name']} | {fault['target']} | {fault['calls']} | {fault['completed']} | {fault['lost']} "
            f"| {fault['misdelivered']} | {fault['outcome']} |"
        )
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
