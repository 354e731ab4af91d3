"""The Kubernetes topology of ``deploy/k8s`` as processes on one machine (``make scale``, and its small
variant in ``make test``): Hosts of broker + provider, a shared Interaction tier of several replicas,
one Redis, and web replicas behind a TLS-terminating nginx.

```text
caller ─▶ host-N broker ◀─ host-N provider (stdio example MCP server)      (one per Host)
               │ HostLink (round_robin over every replica)
               ▼
         interaction-0 … interaction-R-1  ◀── web-0 … web-W-1 ◀── nginx (https, round robin)
               │
             redis (AOF)
```

Every child runs under :class:`stack.supervisor.Supervisor` (a crashed child is restarted on
its port, as a Deployment or StatefulSet would). Faults: :meth:`Topology.kill` (SIGKILL),
:meth:`Topology.restart_host` (SIGTERM broker and provider together, drained, then start again), and its
halves :meth:`Topology.stop_host` / :meth:`Topology.start_host` (a scale-in stops a Host for good).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from bench.system import ROOT
from services.broker.settings import Settings as BrokerSettings
from services.core.key_file import generate_key_file
from stack.errors import StackError
from stack.ports import free_port
from stack.probes import grpc_serving, http_ok
from stack.supervisor import ChildSpec, Supervisor
from tests.helpers.certs import CertFiles, make_certs

EXAMPLES_CONFIG = ROOT / "examples" / "mcp.json"


@dataclass(frozen=True)
class TopologySpec:
    """How many of each process, and how a Host drains on a rolling restart: ``drain_seconds`` is the
    broker's ``MAKA_DRAIN_SECONDS`` (``auto``, as the Host manifest sets it: until every call is done)."""

    hosts: int = 3
    interaction_replicas: int = 2
    web_replicas: int = 2
    drain_seconds: float | Literal["auto"] = "auto"
    config: Path = EXAMPLES_CONFIG
    log_level: str = "WARNING"

    def host_ids(self) -> list[str]:
        return [f"host-{i}" for i in range(self.hosts)]

    def drain_budget_seconds(self) -> float:
        """The longest a Host drains: a number as given, ``auto`` from the broker's default settings (the
        longest form wait + one provider leg + grace; the provider's ``MAKA_DRAIN_SECONDS``, as in
        deploy/k8s)."""
        return BrokerSettings.model_construct(drain_seconds=self.drain_seconds).drain_budget_seconds()

    @property
    def web_host(self) -> str:
        """The Host whose forms the web replicas show (``MAKA_HOST_ID``), as one web Deployment does."""
        return self.host_ids()[0]


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKA_")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Topology:
    """A running topology; ``await start()``, use, ``await stop()``."""

    spec: TopologySpec
    state_dir: Path
    sink: Callable[[str, str], None]
    supervisor: Supervisor = field(init=False)
    ports: dict[str, int] = field(default_factory=dict)
    certs: CertFiles | None = None
    redis_socket: Path | None = None

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(sink=self.sink, ready_timeout=90, stop_grace=self.spec.drain_budget_seconds() + 20)

    # --- addresses -----------------------------------------------------------------------------

    @property
    def redis_url(self) -> str:
        assert self.redis_socket is not None
        return f"unix://{self.redis_socket}"

    def interaction_addresses(self) -> list[str]:
        return [f"127.0.0.1:{self.ports[f'interaction-{i}']}" for i in range(self.spec.interaction_replicas)]

    @property
    def interaction_target(self) -> str:
        """Every replica in one gRPC target, balanced by the clients' ``round_robin`` policy."""
        return "ipv4:" + ",".join(self.interaction_addresses())

    def broker(self, host_id: str) -> str:
        return f"127.0.0.1:{self.ports[f'{host_id}-broker']}"

    @property
    def proxy_url(self) -> str:
        """The public origin: nginx terminating TLS in front of the web replicas."""
        return f"https://127.0.0.1:{self._port('nginx')}"

    def pid(self, name: str) -> int | None:
        return self.supervisor.pid(name)

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Redis, the Interaction replicas, every Host (broker then provider) with the web replicas,
        then nginx; returns once every child is ready. Raises :class:`StackError` (after stopping)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            await self.supervisor.start(self._redis())
            for i in range(self.spec.interaction_replicas):
                await self.supervisor.start(self._interaction(i))
            async with asyncio.TaskGroup() as group:
                for host_id in self.spec.host_ids():
                    group.create_task(self._start_host(host_id))
                for i in range(self.spec.web_replicas):
                    group.create_task(self.supervisor.start(self._web(i)))
            await self.supervisor.start(self._nginx())
        except BaseException:
            await self.stop()
            raise

    async def _start_host(self, host_id: str) -> None:
        await self.supervisor.start(self._broker(host_id))
        await self.supervisor.start(self._provider(host_id))

    async def stop(self) -> None:
        """Stop nginx, web, Hosts (provider before broker), the tier, then Redis."""
        order = ["nginx"]
        order += [f"web-{i}" for i in range(self.spec.web_replicas)]
        for host_id in self.spec.host_ids():
            order += [f"{host_id}-provider", f"{host_id}-broker"]
        order += [f"interaction-{i}" for i in range(self.spec.interaction_replicas)]
        order.append("redis")
        await self.supervisor.stop(order=order)

    def kill(self, name: str) -> None:
        """SIGKILL child ``name`` (``host-1-broker``, ``interaction-0``, ...); the supervisor restarts it."""
        self.supervisor.kill(name)

    async def restart_host(self, host_id: str) -> None:
        """A rolling restart of one Host: broker and provider get SIGTERM together and drain."""
        await self.supervisor.restart_together(self._host_children(host_id))

    async def stop_host(self, host_id: str) -> None:
        """SIGTERM ``host_id``'s broker and provider together (as one pod's containers) and wait until
        both exited (drained); the Host stays stopped until :meth:`start_host` (a scale-in never calls it)."""
        await self.supervisor.stop_together(self._host_children(host_id))

    async def start_host(self, host_id: str) -> None:
        """Start a stopped Host again with the same id and ports (broker, then provider), ready."""
        await self.supervisor.start_again(self._host_children(host_id))

    @staticmethod
    def _host_children(host_id: str) -> tuple[str, str]:
        return (f"{host_id}-broker", f"{host_id}-provider")

    # --- child specs ---------------------------------------------------------------------------

    def _port(self, name: str) -> int:
        if name not in self.ports:
            self.ports[name] = free_port()
        return self.ports[name]

    def _grpc(self, name: str, module: str, env: Mapping[str, str]) -> ChildSpec:
        port = self._port(name)
        full_env = _env({"MAKA_LISTEN": f"127.0.0.1:{port}", "MAKA_LOG_LEVEL": self.spec.log_level, **env})

        async def ready() -> bool:
            return await grpc_serving(f"127.0.0.1:{port}")

        return ChildSpec(name, [sys.executable, "-m", module], env=full_env, ready=ready, cwd=ROOT)

    def _redis(self) -> ChildSpec:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError("redis-server is not installed (make setup)")
        data = self.state_dir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        self.redis_socket = Path(f"/tmp/maka-scale-{secrets.token_hex(4)}.sock")
        socket_path = self.redis_socket
        conf = data / "redis.conf"  # AUTH from a file, not argv (which any local user can read)
        conf.write_text(f"requirepass {self._redis_password().read_text()}\n")
        conf.chmod(0o600)
        argv = [
            binary, str(conf), "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700",
            "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--maxmemory", "512mb", "--maxmemory-policy", "noeviction", "--loglevel", "warning",
        ]  # fmt: skip

        async def ready() -> bool:
            return socket_path.exists()

        return ChildSpec("redis", argv, env=_env({}), ready=ready)

    def _interaction(self, i: int) -> ChildSpec:
        return self._grpc(
            f"interaction-{i}",
            "services.interaction.main",
            {
                "MAKA_REDIS_URL": self.redis_url,
                "MAKA_REDIS_PASSWORD_FILE": str(self._redis_password()),
                "MAKA_ANSWER_KEY_FILE": str(self._answer_key()),
                "MAKA_HOST_IDS": ",".join(self.spec.host_ids()),
            },
        )

    def _broker(self, host_id: str) -> ChildSpec:
        return self._grpc(
            f"{host_id}-broker",
            "services.broker.main",
            {
                "MAKA_HOST_ID": host_id,
                "MAKA_ADVERTISE_ADDRESS": f"127.0.0.1:{self._port(f'{host_id}-broker')}",  # pool reattach
                "MAKA_INTERACTION_TARGET": self.interaction_target,
                "MAKA_DRAIN_SECONDS": str(self.spec.drain_seconds),
            },
        )

    def _provider(self, host_id: str) -> ChildSpec:
        return self._grpc(
            f"{host_id}-provider",
            "services.mcp_provider.main",
            {
                "MAKA_BROKER_TARGET": self.broker(host_id),
                "MAKA_MCP_CONFIG": str(self.spec.config),
                "MAKA_DRAIN_SECONDS": str(self.spec.drain_budget_seconds()),  # a number: the broker's budget
            },
        )

    def _redis_password(self) -> Path:
        """Redis AUTH, as the Kubernetes Secret mounts it: a file only the Interaction tier reads."""
        path = self.state_dir / "redis-password"
        if not path.exists():
            path.write_text(secrets.token_hex(24))
            path.chmod(0o600)
        return path

    def _answer_key(self) -> Path:
        """The key sealing answer values in Redis, as the ``maka-answer-key`` Secret mounts it: one file
        shared by every Interaction replica (docs/security.md "Answer values at rest")."""
        path = self.state_dir / "answer.key"
        generate_key_file(path)
        return path

    def _web_secret(self) -> Path:
        path = self.state_dir / "web-secret"
        if not path.exists():
            path.write_text(secrets.token_hex(32))
        return path

    def _web(self, i: int) -> ChildSpec:
        name = f"web-{i}"
        port = self._port(name)
        env = _env(
            {
                "MAKA_INTERACTION_TARGET": self.interaction_target,
                "MAKA_HOST_ID": self.spec.web_host,
                "MAKA_WEB_LISTEN": f"127.0.0.1:{port}",
                "MAKA_WEB_SECRET_FILE": str(self._web_secret()),
                "MAKA_WEB_PUBLIC_ORIGIN": self.proxy_url,
                "MAKA_WEB_FORWARDED_ALLOW_IPS": "127.0.0.1",
                "MAKA_LOG_LEVEL": self.spec.log_level,
            }
        )

        async def ready() -> bool:
            return await http_ok(f"http://127.0.0.1:{port}/")

        return ChildSpec(name, [sys.executable, "-m", "surfaces.web.main"], env=env, ready=ready, cwd=ROOT)

    def _nginx(self) -> ChildSpec:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            raise StackError("nginx is not installed (make setup-node)")
        prefix = self.state_dir / "nginx"
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        certs_dir = self.state_dir / "certs"
        certs_dir.mkdir(exist_ok=True)
        self.certs = make_certs(certs_dir)
        port = self._port("nginx")
        upstreams = "\n".join(
            f"        server 127.0.0.1:{self.ports[f'web-{i}']};" for i in range(self.spec.web_replicas)
        )
        config = prefix / "nginx.conf"
        config.write_text(
            NGINX_CONF.format(
                prefix=prefix,
                port=port,
                upstreams=upstreams,
                cert=self.certs.server_cert,
                key=self.certs.server_key,
            )
        )
        ca = str(self.certs.ca)

        async def ready() -> bool:
            return await _https_ok(f"https://127.0.0.1:{port}/login", ca)

        argv = [binary, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")]
        return ChildSpec("nginx", argv, env=_env({}), ready=ready)

    def describe(self) -> dict[str, object]:
        """Counts and addresses, for the report."""
        return {
            "hosts": self.spec.hosts,
            "interaction_replicas": self.spec.interaction_replicas,
            "web_replicas": self.spec.web_replicas,
            "brokers": {h: self.broker(h) for h in self.spec.host_ids()},
            "interaction": self.interaction_addresses(),
            "proxy": self.proxy_url,
        }

    def endpoints_json(self) -> str:
        return json.dumps(self.describe(), indent=2)


async def _https_ok(url: str, ca: str) -> bool:
    context = ssl.create_default_context(cafile=ca)
    async with httpx.AsyncClient(timeout=2.0, verify=context) as client:
        try:
            response = await client.get(url)
        except httpx.HTTPError:
            return False
    return response.status_code < 500


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    upstream maka_web {{
{upstreams}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://maka_web;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""
