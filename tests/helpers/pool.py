"""A team's pool of Hosts as real processes for a test: one ``redis-server``, one Interaction service
serving every Host, and per Host a broker and its MCP provider (the bundled example server), each broker
behind a :class:`~tests.reliability.tcp_proxy.TcpProxy` so a test can drop a caller's stream.

Callers reach the pool through :attr:`HostPool.pool_target` (``ipv4:`` with every proxy, what a headless
Service of the ready Hosts resolves to) and one Host through :meth:`HostPool.proxied`; each broker advertises
its direct address (``MAKA_ADVERTISE_ADDRESS``, what the per-Host Service name is in Kubernetes), so a
reattach reaches the owning Host without the proxy. Every wait is bounded.

    async with host_pool(tmp_path, hosts=2) as pool:
        pool.pool_target                      # "ipv4:127.0.0.1:P0,127.0.0.1:P1"
        await pool.drain("host-0")            # SIGTERM broker and provider together (a pod's rollout)
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.key_file import generate_key_file
from stack.ports import free_port
from stack.probes import grpc_serving, list_tools, redis_ping
from stack.supervisor import ChildSpec, Supervisor
from stack.topology import child_env
from tests.helpers.stack import EXAMPLES_CONFIG, ROOT
from tests.helpers.waiting import eventually
from tests.reliability.tcp_proxy import TcpProxy

NEW_CALLS = "maka.broker.v1.CapabilityBrokerService"
"""The broker's named health service: SERVING while it takes new calls."""

DRAIN_ENV = {
    "MAKA_DRAIN_SECONDS": "auto",
    "MAKA_FORM_WAIT_SECONDS": "60",
    "MAKA_EXECUTION_TIMEOUT_SECONDS": "10",
    "MAKA_GRACE_SECONDS": "2",
}
"""The brokers drain until their calls are done (bounded by 60 + 10 + 2 s), as the Host manifest's ``auto``."""
PROVIDER_DRAIN_SECONDS = "72"


@dataclass
class HostPool:
    """A running pool; see the module docstring."""

    host_ids: list[str]
    supervisor: Supervisor
    interaction: str
    brokers: dict[str, str]
    """Host id → the broker's direct address (what it advertises)."""
    proxies: dict[str, TcpProxy]
    lines: dict[str, list[str]] = field(default_factory=dict)

    @property
    def pool_target(self) -> str:
        """Every Host of the pool as one gRPC target (through the proxies)."""
        return "ipv4:" + ",".join(self.proxied(host) for host in self.host_ids)

    def proxied(self, host_id: str) -> str:
        """One Host's address through its proxy (a caller that names one Host)."""
        return f"127.0.0.1:{self.proxies[host_id].port}"

    def log(self, name: str) -> str:
        return "\n".join(self.lines.get(name, []))

    async def drain(self, host_id: str) -> None:
        """A rollout of one Host: SIGTERM its broker and provider together, wait for both to exit (the broker
        drains until its calls are done), then start both again."""
        await self.supervisor.restart_together((f"{host_id}-broker", f"{host_id}-provider"))

    async def wait_not_taking_calls(self, host_id: str, timeout: float = 30.0) -> None:
        """Until the Host's new-calls health service is NOT_SERVING (it drains)."""

        async def draining() -> bool:
            return not await grpc_serving(self.brokers[host_id], service=NEW_CALLS, timeout=1.0)

        await eventually(draining, timeout=timeout, interval=0.05, what=f"{host_id} not taking new calls")

    async def pending(self, host_id: str, session: str = "default") -> list[interaction_pb2.Interaction]:
        """The pending forms of ``session`` on ``host_id`` (Interaction service ``ListPending``)."""
        async with grpc.aio.insecure_channel(self.interaction) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            request = interaction_service_pb2.ListPendingRequest(session_ids=[session], host_id=host_id)
            response = await stub.ListPending(request, timeout=10)
        return list(response.pending)

    async def answer(self, host_id: str, form: interaction_pb2.Interaction, values: dict[str, form_pb2.Value]) -> None:
        """Accept ``form`` of ``host_id`` with ``values`` (Interaction service ``Answer``)."""
        async with grpc.aio.insecure_channel(self.interaction) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            request = interaction_service_pb2.AnswerRequest(
                interaction_id=form.interaction_id,
                session_id=form.binding.session_id,
                host_id=host_id,
                submission_id=f"answer-{form.interaction_id}",
                answer=form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values=values),
            )
            await stub.Answer(request, timeout=10)


def _grpc_child(name: str, module: str, port: int, env: Mapping[str, str]) -> ChildSpec:
    full_env = child_env({"MAKA_LISTEN": f"127.0.0.1:{port}", "MAKA_LOG_LEVEL": "INFO", **env})

    async def ready() -> bool:
        return await grpc_serving(f"127.0.0.1:{port}")

    return ChildSpec(name, [sys.executable, "-m", module], env=full_env, ready=ready, cwd=ROOT)


def _redis(socket_path: Path, data: Path) -> ChildSpec:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is not installed (make setup)"
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        binary, "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700", "--dir", str(data),
        "--appendonly", "no", "--save", "", "--loglevel", "warning",
    ]  # fmt: skip

    async def ready() -> bool:
        return await redis_ping(f"unix://{socket_path}")

    return ChildSpec("redis", argv, env=child_env({}), ready=ready)


@asynccontextmanager
async def host_pool(tmp_path: Path, *, hosts: int = 2, echo: bool = True) -> AsyncIterator[HostPool]:
    """Start a pool of ``hosts`` Hosts (``host-0`` ...) with the example MCP server; stop it on exit."""
    lines: dict[str, list[str]] = {}

    def sink(name: str, line: str) -> None:
        lines.setdefault(name, []).append(line)
        if echo:
            sys.stderr.write(f"[{name}] {line}\n")

    host_ids = [f"host-{i}" for i in range(hosts)]
    supervisor = Supervisor(sink=sink, ready_timeout=90, stop_grace=90)
    socket_dir = Path(tempfile.mkdtemp(prefix="maka-pool-", dir="/tmp"))  # Unix socket paths are short
    key_file = tmp_path / "answer.key"
    generate_key_file(key_file)
    interaction_port = free_port()
    brokers = {host: f"127.0.0.1:{free_port()}" for host in host_ids}
    proxies = {host: TcpProxy(functools.partial(str, brokers[host])) for host in host_ids}
    try:
        for proxy in proxies.values():
            await proxy.start()
        await supervisor.start(_redis(socket_dir / "redis.sock", tmp_path / "redis"))
        interaction_env = {
            "MAKA_REDIS_URL": f"unix://{socket_dir / 'redis.sock'}",
            "MAKA_ANSWER_KEY_FILE": str(key_file),
            "MAKA_HOST_IDS": ",".join(host_ids),
        }
        await supervisor.start(
            _grpc_child("interaction", "services.interaction.main", interaction_port, interaction_env)
        )
        for host in host_ids:
            port = int(brokers[host].rpartition(":")[2])
            broker_env = {
                "MAKA_HOST_ID": host,
                "MAKA_INTERACTION_TARGET": f"127.0.0.1:{interaction_port}",
                "MAKA_ADVERTISE_ADDRESS": brokers[host],
                **DRAIN_ENV,
            }
            await supervisor.start(_grpc_child(f"{host}-broker", "services.broker.main", port, broker_env))
            provider_env = {
                "MAKA_HOST_ID": host,
                "MAKA_BROKER_TARGET": brokers[host],
                "MAKA_MCP_CONFIG": str(EXAMPLES_CONFIG),
                "MAKA_MCP_CONFIG_APPLIED": str(tmp_path / f"{host}-mcp-applied.json"),
                "MAKA_DRAIN_SECONDS": PROVIDER_DRAIN_SECONDS,
            }
            provider = _grpc_child(f"{host}-provider", "services.mcp_provider.main", free_port(), provider_env)
            await supervisor.start(provider)
        for host in host_ids:

            async def tools(broker: str = brokers[host]) -> bool:
                try:
                    return "examples:ping" in await list_tools(broker)
                except grpc.aio.AioRpcError:
                    return False  # the broker is up, its provider is still registering

            await eventually(tools, timeout=60, interval=0.1, what=f"{host}'s Tools listed")
        yield HostPool(host_ids, supervisor, f"127.0.0.1:{interaction_port}", brokers, proxies, lines)
    finally:
        async with asyncio.timeout(120):
            order = [name for host in host_ids for name in (f"{host}-provider", f"{host}-broker")]
            await supervisor.stop(order=[*order, "interaction", "redis"])
            for proxy in proxies.values():
                await proxy.close()
        shutil.rmtree(socket_dir, ignore_errors=True)
