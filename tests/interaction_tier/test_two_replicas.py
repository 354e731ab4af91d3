"""Two Interaction replicas behind client-side round_robin; one is killed (SIGKILL) mid-load
(docs/design.md, "gRPC for a replicated tier").

Real processes: one ``redis-server``, two ``services.interaction.main`` replicas serving Hosts
``ha``, ``hb``, ``hc``, and per Host a ``services.broker.main`` (``MAKA_HOST_ID``) plus a
``services.mcp_provider.main`` running the example ``deploy`` server. Every client dials
``ipv4:127.0.0.1:A,127.0.0.1:B`` (what ``dns:///`` gives for a headless Service) with round_robin.
Two surfaces per Host follow its session; one answers each form with an environment derived from the
call's ``tool_use_id``, so a misdelivered answer shows in the result text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc.aio
import pytest

from bench.fanout import InteractionProcess
from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.form import Action, Answer
from surfaces.common.interaction_client import Disconnected, InteractionClient, InteractionError, Opened, Snapshot
from tests.helpers.redis_server import RedisServer
from tests.helpers.stack import call_tool, result_text

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.slow]

HOSTS = ("ha", "hb", "hc")
CALLS = 500
ROOT = Path(__file__).resolve().parents[2]


def _environment(tool_use_id: str) -> str:
    return "production" if hashlib.sha256(tool_use_id.encode()).digest()[0] % 2 else "staging"


class _Child:
    """A service process with a port file."""

    def __init__(self, directory: Path, module: str, env: dict[str, str]) -> None:
        self.directory, self.module = directory, module
        self.port_file = directory / f"{module}.port"
        directory.mkdir(parents=True, exist_ok=True)
        path = f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"
        full = {**os.environ, **env, "PATH": path, "MAKA_LISTEN": "127.0.0.1:0", "MAKA_PORT_FILE": str(self.port_file)}
        log = (directory / f"{module}.log").open("ab")
        self.process = subprocess.Popen([sys.executable, "-m", module], env=full, cwd=ROOT, stdout=log, stderr=log)

    async def port(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.directory / f"{self.module}.log").read_text()[-2000:]
            if self.port_file.exists() and self.port_file.read_text().strip():
                return int(self.port_file.read_text())
            await asyncio.sleep(0.05)
        raise TimeoutError(f"{self.module} did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def redis_server_module() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="maka-2rep-", dir="/tmp") as tmp:
        server = RedisServer(Path(tmp), appendonly=True)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.asynccontextmanager
async def _tier(redis: RedisServer, work: Path) -> AsyncIterator[tuple[list[InteractionProcess], str, dict[str, str]]]:
    env = {"MAKA_REDIS_URL": redis.url, "MAKA_HOST_IDS": ",".join(HOSTS), "MAKA_LOG_LEVEL": "WARNING"}
    replicas = [InteractionProcess(work / f"replica-{n}", env) for n in range(2)]
    children: list[_Child] = []
    try:
        ports = [await r.start() for r in replicas]
        target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
        brokers: dict[str, str] = {}
        for host in HOSTS:
            broker = _Child(
                work / f"broker-{host}",
                "services.broker.main",
                {"MAKA_HOST_ID": host, "MAKA_INTERACTION_TARGET": target, "MAKA_LOG_LEVEL": "WARNING"},
            )
            children.append(broker)
            port = await broker.port()
            brokers[host] = f"127.0.0.1:{port}"
            provider = _Child(
                work / f"provider-{host}",
                "services.mcp_provider.main",
                {
                    "MAKA_BROKER_TARGET": brokers[host],
                    "MAKA_MCP_CONFIG": str(ROOT / "examples" / "mcp.json"),
                    "MAKA_LOG_LEVEL": "WARNING",
                },
            )
            children.append(provider)
            await provider.port()
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

    def __init__(self, target: str, host: str, *, answers: bool) -> None:
        self.client = InteractionClient.connect(target, host_id=host)
        self.host, self.answers = host, answers
        self.seen: set[str] = set()
        self.quarter = asyncio.Event()
        """Set once this surface saw a quarter of all the calls' forms."""
        self.subscribed = asyncio.Event()
        self.disconnects = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        async for event in self.client.attach([f"s-{self.host}"]):
            if isinstance(event, Snapshot):
                self.subscribed.set()
                views = list(event.pending)
            elif isinstance(event, Opened):
                views = [event.interaction]
            else:
                if isinstance(event, Disconnected):
                    self.disconnects += 1
                continue
            for view in views:
                if view.interaction_id in self.seen:
                    continue
                self.seen.add(view.interaction_id)
                if len(self.seen) >= CALLS // 12:
                    self.quarter.set()
                if self.answers:
                    task = asyncio.create_task(self._answer(view.interaction_id, view.tool_use_id))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)

    async def _answer(self, interaction_id: str, tool_use_id: str) -> None:
        answer = Answer(Action.ACCEPT, {"environment": _environment(tool_use_id), "confirm": True})
        submission = f"sub-{interaction_id}"
        for _attempt in range(60):  # the service config retries UNAVAILABLE; this covers a replica's last gasp
            try:
                await self.client.answer(interaction_id, answer, submission_id=submission, session_id=f"s-{self.host}")
                return
            except InteractionError:  # retried with the same submission id (idempotent)
                await asyncio.sleep(0.25)


async def test_killing_one_of_two_replicas_mid_load_loses_no_call_and_misdelivers_no_answer(
    redis_server_module: RedisServer, tmp_path: Path
) -> None:
    async with _tier(redis_server_module, tmp_path) as (replicas, target, brokers):
        surfaces = [_Surface(target, h, answers=n == 0) for h in HOSTS for n in range(2)]
        runners = [asyncio.create_task(s.run()) for s in surfaces]
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(s.subscribed.wait() for s in surfaces))
            calls = {
                f"use-{n}": asyncio.create_task(
                    call_tool(
                        brokers[HOSTS[n % 3]],
                        "examples:deploy",
                        {"artifact": f"art-{n}"},
                        session=f"s-{HOSTS[n % 3]}",
                        turn=f"t-{n}",
                        tool_use_id=f"use-{n}",
                        timeout=240,
                    )
                )
                for n in range(CALLS)
            }
            async with asyncio.timeout(120):
                await asyncio.gather(*(s.quarter.wait() for s in surfaces if s.answers))  # ~a quarter of the forms
            replicas[0].stop(kill=True)  # SIGKILL mid-load
            results = await asyncio.gather(*calls.values(), return_exceptions=True)
        finally:
            for runner in runners:
                runner.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            for surface in surfaces:
                await surface.client.close()
    texts = {}
    for (use, _task), result in zip(calls.items(), results, strict=True):
        assert not isinstance(result, BaseException), f"{use}: {result!r}"
        texts[use] = result_text(result)
    lost = [u for u, t in texts.items() if not t.startswith("Deployed")]
    assert lost == [], f"calls lost: {lost[:5]}"
    wrong = [u for n, (u, t) in enumerate(texts.items()) if t != f"Deployed art-{n} to {_environment(u)}."]
    assert wrong == [], f"answers misdelivered: {wrong[:5]}"
    for host in HOSTS:
        pair = [s for s in surfaces if s.host == host]
        calls_of_host = CALLS // 3 + (1 if HOSTS.index(host) < CALLS % 3 else 0)
        # every call's form at least (a form whose open was stored while its reply was lost with the killed
        # replica, and which its broker then closed, is seen as well)
        assert len(pair[0].seen) >= calls_of_host
        assert pair[0].seen == pair[1].seen, "every surface saw every form of its Host"
