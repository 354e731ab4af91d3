"""The callers and the people of ``make scale``: :class:`Call` (one ``examples:deploy`` call and what
became of it) and :class:`Driver`, which starts calls on a Host, finds their forms and answers each from
its surface — the web page through nginx (TLS; it shows ``host-0``), the ``maka answer`` CLI or the
Node.js polyglot surface (``examples/polyglot/surface.mjs``), a stable hash choosing. Every call deploys
its own artifact and every answer picks an environment, so a result naming another call's artifact or
another answer's environment is ``misdelivered`` (:attr:`Call.delivered_right`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc.aio
import httpx

from bench.system import ROOT
from bench.topology import Topology
from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka_client import MakaError
from services.core.form import Action, Answer
from stack.probes import list_tools
from surfaces.common.interactions import CloseReason, Interactions, InteractionView

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
        self.library_answers = 0
        """Answers given with the TUI's surface library (:meth:`answer_light`)."""
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
                            call.text = _why(event)
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

    async def answer_light(self, call: Call) -> None:
        """Answer without a process per answer (the rollout's many people on a shared machine): through
        the web page when the hash gives it ``call``, else with the surface library the TUI answers with
        (:class:`surfaces.common.interactions.Interactions`, in this process)."""
        if _surface_for(call) == "web":
            await self.answer(call)
            return
        call.answered_by = "tui"
        call.environment = _environment_for(call)
        answer = Answer(Action.ACCEPT, {"environment": call.environment, "confirm": True})
        try:
            async with Interactions.connect(self.topology.interaction_target, host_id=call.host) as client:
                await client.answer(
                    call.interaction_id, answer, submission_id=f"tui-{call.artifact}", session_id=call.session
                )
        except MakaError as error:
            self.answer_failures.append(f"tui {call.artifact}: {error}")
            return
        self.library_answers += 1
        call.answered_at = time.monotonic()

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


async def wait_tools(topology: Topology, hosts: Sequence[str] = ()) -> None:
    """Wait (bounded) until each of ``hosts`` (default: every Host) lists ``examples:deploy``: its
    provider registered, so the Host serves calls."""
    async with asyncio.timeout(90):
        for host in hosts or topology.spec.host_ids():
            while True:
                if "examples:deploy" in await _tools(topology.broker(host)):
                    break
                await asyncio.sleep(0.1)  # polling a remote listing, bounded above


async def _tools(broker: str) -> list[str]:
    try:
        return await list_tools(broker)
    except grpc.aio.AioRpcError:
        return []


def _why(event: broker_pb2.CallToolResponse) -> str:
    """Why a call did not complete, as the broker said (a failure's code and message, a loss's reason)."""
    if event.HasField("failure"):
        return f"{broker_pb2.FailureCode.Name(event.failure.code)}: {event.failure.message[:120]}"
    if event.HasField("lost"):
        return event.lost.reason[:120]
    return ""
