"""Failover outcomes of a replicated Interaction tier (docs/design.md#grpc-for-a-replicated-tier).

Real processes: one ``redis-server`` (AOF), two ``services.interaction.main`` replicas serving Hosts ``ha``,
``hb``, ``hc``, and per Host a ``services.broker.main`` (``MAKA_HOST_ID``) plus a
``services.mcp_provider.main`` running the example ``deploy`` server. Every client dials
``ipv4:127.0.0.1:A,127.0.0.1:B`` (what ``dns:///`` gives for a headless Service) with round_robin. Two
surfaces per Host follow its session; one answers each form with an environment derived from the call's
``tool_use_id``, so a misdelivered answer shows in the result text. Once about a quarter of the forms were
seen, one replica gets SIGKILL; :func:`run_replica_kill` counts what every call ended with.

``make bench`` reports the figures; ``tests/interaction_tier/test_two_replicas.py`` asserts them (0 lost,
0 misdelivered, both surfaces of each Host saw the same forms).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc.aio

from bench.processes import InteractionProcess, ServiceProcess
from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka_client import MakaError, Reattaching
from services.core.form import Action, Answer
from services.core.key_file import generate_key_file
from surfaces.common.interactions import FormOpened, FormSnapshot, Interactions

HOSTS = ("ha", "hb", "hc")
ROOT = Path(__file__).resolve().parents[1]


def environment_for(tool_use_id: str) -> str:
    """The environment the answering surface picks for a call (a stable hash of its ``tool_use_id``)."""
    return "production" if hashlib.sha256(tool_use_id.encode()).digest()[0] % 2 else "staging"


@dataclass
class ReplicaKillResult:
    """What :func:`run_replica_kill` observed."""

    calls: int
    hosts: int
    completed: int = 0
    lost: list[str] = field(default_factory=list)
    """Calls that did not end with their Tool's result (id: how they ended)."""
    misdelivered: list[str] = field(default_factory=list)
    """Calls whose result names another call's artifact or another answer's environment."""
    surfaces_agree: bool = False
    """Both surfaces of every Host saw the same set of forms."""
    every_form_seen: bool = False
    """Every surface saw at least one form per call of its Host (a form whose open was stored while its
    reply was lost with the killed replica, and which its broker then closed, is seen as well)."""
    surface_disconnects: int = 0
    killed_after_forms: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        """Plain JSON (for bench reports)."""
        return asdict(self)


@contextlib.asynccontextmanager
async def replicated_tier(
    redis_url: str, work: Path, hosts: Sequence[str] = HOSTS
) -> AsyncIterator[tuple[list[InteractionProcess], str, dict[str, str]]]:
    """Two Interaction replicas and a broker + provider per Host; yields ``(replicas, target, brokers)``."""
    generate_key_file(work / "answer.key")  # one answer key shared by both replicas (docs/security.md)
    env = {
        "MAKA_REDIS_URL": redis_url,
        "MAKA_HOST_IDS": ",".join(hosts),
        "MAKA_LOG_LEVEL": "WARNING",
        "MAKA_ANSWER_KEY_FILE": str(work / "answer.key"),
    }
    replicas = [InteractionProcess(work / f"replica-{n}", env) for n in range(2)]
    children: list[ServiceProcess] = []
    try:
        ports = [await r.start() for r in replicas]
        target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
        brokers: dict[str, str] = {}
        for host in hosts:
            broker = ServiceProcess(
                work / f"broker-{host}",
                "services.broker.main",
                {"MAKA_HOST_ID": host, "MAKA_INTERACTION_TARGET": target, "MAKA_LOG_LEVEL": "WARNING"},
            )
            children.append(broker)
            brokers[host] = f"127.0.0.1:{await broker.start()}"
            provider = ServiceProcess(
                work / f"provider-{host}",
                "services.mcp_provider.main",
                {
                    "MAKA_BROKER_TARGET": brokers[host],
                    "MAKA_MCP_CONFIG": str(ROOT / "examples" / "mcp.json"),
                    "MAKA_LOG_LEVEL": "WARNING",
                },
            )
            children.append(provider)
            await provider.start()
            await _wait_for_tool(brokers[host], "examples:deploy")
        yield replicas, target, brokers
    finally:
        for child in reversed(children):
            child.stop()
        for replica in replicas:
            replica.stop()


async def _wait_for_tool(broker: str, name: str, timeout: float = 60.0) -> None:
    """Until the broker lists ``name`` (its provider connected and registered the MCP server's Tools)."""
    async with asyncio.timeout(timeout), grpc.aio.insecure_channel(broker) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        while True:
            tools = await stub.ListTools(broker_pb2.ListToolsRequest(), timeout=10)
            if any(t.qualified_name == name for t in tools.tools):
                return
            await asyncio.sleep(0.1)


class _Surface:
    """Follows one Host's session through the round_robin target; optionally answers every form."""

    def __init__(self, target: str, host: str, *, answers: bool, quarter: int) -> None:
        self.client = Interactions.connect(target, host_id=host)
        self.host, self.answers, self._quarter_size = host, answers, quarter
        self.seen: set[str] = set()
        self.quarter = asyncio.Event()
        """Set once this surface saw about a quarter of its Host's forms."""
        self.subscribed = asyncio.Event()
        self.disconnects = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        async for event in self.client.attach([f"s-{self.host}"]):
            if isinstance(event, FormSnapshot):
                self.subscribed.set()
                views = list(event.pending)
            elif isinstance(event, FormOpened):
                views = [event.interaction]
            else:
                if isinstance(event, Reattaching):
                    self.disconnects += 1
                continue
            for view in views:
                if view.interaction_id in self.seen:
                    continue
                self.seen.add(view.interaction_id)
                if len(self.seen) >= self._quarter_size:
                    self.quarter.set()
                if self.answers:
                    task = asyncio.create_task(self._answer(view.interaction_id, view.tool_use_id))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)

    async def _answer(self, interaction_id: str, tool_use_id: str) -> None:
        answer = Answer(Action.ACCEPT, {"environment": environment_for(tool_use_id), "confirm": True})
        submission = f"sub-{interaction_id}"
        for _attempt in range(60):  # the service config retries UNAVAILABLE; this covers a replica's last gasp
            try:
                await self.client.answer(interaction_id, answer, submission_id=submission, session_id=f"s-{self.host}")
                return
            except MakaError:  # retried with the same submission id (idempotent)
                await asyncio.sleep(0.25)


async def _call(broker: str, n: int, host: str, timeout: float) -> broker_pb2.CallToolResponse | None:
    """One ``examples:deploy`` call; returns its last event."""
    request = broker_pb2.CallToolRequest(
        session_id=f"s-{host}",
        turn_id=f"t-{n}",
        tool_use_id=f"use-{n}",
        tool_name="examples:deploy",
        arguments_json=json.dumps({"artifact": f"art-{n}"}),
    )
    last: broker_pb2.CallToolResponse | None = None
    async with asyncio.timeout(timeout), grpc.aio.insecure_channel(broker) as channel:
        async for event in broker_pb2_grpc.CapabilityBrokerServiceStub(channel).CallTool(request):
            last = event
    return last


def _outcome(n: int, last: broker_pb2.CallToolResponse | BaseException | None) -> tuple[str, str]:
    """``("ok" | "lost" | "misdelivered", detail)`` for call ``n``."""
    if isinstance(last, BaseException) or last is None:
        return "lost", repr(last)
    kind = last.WhichOneof("event")
    if kind == "failure":
        code = broker_pb2.FailureCode.Name(last.failure.code).removeprefix("FAILURE_CODE_")
        return "lost", f"failure {code}: {last.failure.message[:120]}"
    if kind == "lost":
        return "lost", f"lost: {last.lost.reason[:120]}"
    if kind != "result":
        return "lost", kind or "none"
    payload = json.loads(last.result.call_tool_result_json)
    text = "\n".join(b["text"] for b in payload.get("content", []) if b.get("type") == "text")
    if not text.startswith("Deployed"):
        return "lost", text[:80]
    if text != f"Deployed art-{n} to {environment_for(f'use-{n}')}.":
        return "misdelivered", text[:80]
    return "ok", ""


async def run_replica_kill(
    redis_url: str, work: Path, *, calls: int, hosts: Sequence[str] = HOSTS
) -> ReplicaKillResult:
    """Run ``calls`` concurrent one-form calls over ``hosts`` and SIGKILL one of two replicas mid-load."""
    result = ReplicaKillResult(calls=calls, hosts=len(hosts))
    started = time.monotonic()
    async with replicated_tier(redis_url, work, hosts) as (replicas, target, brokers):
        per_host = [calls // len(hosts) + (1 if i < calls % len(hosts) else 0) for i in range(len(hosts))]
        surfaces = [
            _Surface(target, h, answers=n == 0, quarter=max(1, per_host[i] // 4))
            for i, h in enumerate(hosts)
            for n in range(2)
        ]
        runners = [asyncio.create_task(s.run()) for s in surfaces]
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(s.subscribed.wait() for s in surfaces))
            tasks = [
                asyncio.create_task(_call(brokers[hosts[n % len(hosts)]], n, hosts[n % len(hosts)], 240))
                for n in range(calls)
            ]
            async with asyncio.timeout(120):
                await asyncio.gather(*(s.quarter.wait() for s in surfaces if s.answers))
            result.killed_after_forms = sum(len(s.seen) for s in surfaces if s.answers)
            replicas[0].stop(kill=True)  # SIGKILL mid-load
            ends = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for runner in runners:
                runner.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            for surface in surfaces:
                await surface.client.close()
    for n, last in enumerate(ends):
        kind, detail = _outcome(n, last)
        if kind == "ok":
            result.completed += 1
        elif kind == "lost":
            result.lost.append(f"use-{n}: {detail}")
        else:
            result.misdelivered.append(f"use-{n}: {detail}")
    pairs = [[s for s in surfaces if s.host == h] for h in hosts]
    result.surfaces_agree = all(pair[0].seen == pair[1].seen for pair in pairs)
    result.every_form_seen = all(len(s.seen) >= per_host[i] for i, pair in enumerate(pairs) for s in pair)
    result.surface_disconnects = sum(s.disconnects for s in surfaces)
    result.wall_s = round(time.monotonic() - started, 2)
    return result
