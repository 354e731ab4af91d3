"""The Maka topology: which children :class:`Stack` runs under a :class:`~stack.supervisor.Supervisor`.

An embedded ``redis-server`` (unless a Redis URL is given), the Interaction service, the Capability
broker, the web surface, the MCP provider and (``mcp=True``) the MCP front door, each with its ``MAKA_*``
environment and arguments, its port (pinned across restarts), its readiness probe (:mod:`stack.probes`: gRPC
health, HTTP, Redis PING) and ``<state dir>/endpoints.json`` (:mod:`stack.state_dir`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import grpc.aio

from services.broker.main import SUPERSEDED_EXIT_CODE
from services.core.key_file import generate_key_file
from services.mcp_provider.config import ConfigError, ServerConfig, load_config
from stack.access import Access, make_private, write_owner_token
from stack.errors import StackError
from stack.ports import METRICS_ENV, Ports, free_port
from stack.probes import (
    grpc_serving,
    http_ok,
    list_tools,
    redis_ping,
    servers_not_connecting,
    servers_waiting_for_sign_in,
)
from stack.state_dir import WEB_PUBLIC_URL_ENV, Endpoints, notify_status_path, write_endpoints
from stack.supervisor import ChildSpec, LogSink, StackEvent, Supervisor, stderr_sink

SUPERSEDED = "HOST_SUPERSEDED"
"""The stable code ``maka up`` prints (and the ``gave_up`` detail starts with) for a superseded broker."""
SHORT_SOCKET_CHARS = 100
"""Unix socket paths must stay under ~107 bytes; longer state dirs get a socket under /tmp."""


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a child: this one without an inherited metrics port, this interpreter first on
    ``PATH``, unbuffered output, plus ``extra``."""
    env = dict(os.environ)
    env.pop(METRICS_ENV, None)  # one inherited metrics port would make every child bind the same port
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")  # `python` in mcp.json = this interpreter
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _read_port(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


class ConfigInvalid(StackError):
    """The ``mcpServers`` file has problems: ``problems`` holds one line each (no values)."""

    def __init__(self, config_path: Path, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(f"{config_path}: {problem}" for problem in self.problems))


def _check_config(config_path: Path) -> list[ServerConfig]:
    """The file's servers, or :class:`ConfigInvalid` (checked before anything starts: one line per
    problem instead of a provider that exits before it is ready)."""
    if not config_path.is_file():
        raise StackError(f"MCP config {config_path} not found (an mcpServers JSON file, e.g. examples/mcp.json)")
    try:
        return load_config(config_path)
    except ConfigError as error:
        raise ConfigInvalid(config_path, [str(problem) for problem in error.problems]) from None


class Stack:
    """The Maka stack as processes: ``await start()`` → :class:`Endpoints`; ``await stop()``.

    ``config_path`` is the ``mcpServers`` JSON for the MCP provider; ``state_dir`` holds
    ``endpoints.json``, port files, and the embedded Redis's data and socket. With ``redis_url``
    (or ``MAKA_REDIS_URL`` given by the caller) no Redis is started. ``web=False`` skips the web
    surface. Children are run with ``python`` (this interpreter) ``-m services.<x>.main``. ``access``
    (:mod:`stack.access`) says who may reach them: ``OPEN`` (loopback TCP, no tokens: tests, benchmarks), ``UNIX``
    (``maka up``: gRPC on unix sockets in the ``0700`` state dir, the web page and the MCP front door needing the
    owner's per-run token) or ``TOKENS`` (``maka up --ports``: loopback TCP, every service needing that token).

    Fault tests use :meth:`kill` (SIGKILL, then supervised restart) and :meth:`restart`; events
    are observable through :meth:`subscribe` / :attr:`history`.
    """

    INTERACTION = "interaction"
    BROKER = "broker"
    PROVIDER = "provider"
    WEB = "web"
    MCP = "mcp"
    REDIS = "redis"

    def __init__(
        self,
        config_path: Path,
        state_dir: Path,
        *,
        ports: Ports | None = None,
        redis_url: str | None = None,
        redis_mode: str = "standalone",
        host_id: str = "local",
        web: bool = True,
        mcp: bool = False,
        log_level: str = "INFO",
        sink: LogSink = stderr_sink,
        ready_timeout: float = 60.0,
        stop_grace: float = 10.0,
        tools_timeout: float = 30.0,
        extra_env: Mapping[str, str] | None = None,
        child_env: Mapping[str, Mapping[str, str]] | None = None,
        metrics: Mapping[str, int] | None = None,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        restart_backoff: float = 0.2,
        access: Access = Access.OPEN,
    ) -> None:
        self.config_path = config_path.resolve()
        self.state_dir = state_dir.resolve()
        self.ports = ports if ports is not None else Ports()
        self.host_id = host_id
        self.web_enabled = web
        self.mcp_enabled = mcp
        """Whether the MCP front door runs (``surfaces.mcp``; ``maka up`` turns it on)."""
        self.log_level = log_level
        self.redis_url = redis_url or ""
        self.redis_mode = redis_mode if redis_url else "standalone"
        """How the Interaction service reads ``redis_url`` (``MAKA_REDIS_MODE``); the private Redis is standalone."""
        self._embedded_redis = not redis_url
        self._extra_env = {k: v for k, v in (extra_env or {}).items() if k != METRICS_ENV}
        self._child_env = {name: dict(env) for name, env in (child_env or {}).items()}
        """Environment of one gRPC child over ``extra_env`` (e.g. the broker's own drain), by child name."""
        self.metrics = dict(metrics) if metrics is not None else None
        """``{service: port}`` (0 = ephemeral) of the ``/metrics`` endpoints to serve; None = none."""
        self.metrics_bound: dict[str, int] = {}
        """The metrics port given to each service (kept across restarts)."""
        self._sink = sink
        self.tools_timeout = tools_timeout
        """Seconds ``start()`` waits for every configured MCP server's Tools to be registered."""
        self._signing_in: set[str] = set()
        """Configured MCP servers last seen waiting for an OAuth sign-in (ready without their Tools)."""
        self._socket_dir: Path | None = None
        self.access = access
        """Who may reach the services (:mod:`stack.access`): ``maka up`` runs ``UNIX`` (``TOKENS`` with ports)."""
        self._token = ""
        """The owner's token (``access`` other than ``OPEN``), generated at :meth:`start`."""
        self._tokens_file: Path | None = None
        self._grpc_socket_dir: Path | None = None
        """Where the gRPC children's unix sockets are (``Access.UNIX``)."""
        self._grpc_socket_tmp = False
        self.supervisor = Supervisor(
            sink=sink,
            ready_timeout=ready_timeout,
            stop_grace=stop_grace,
            max_restarts=max_restarts,
            restart_window=restart_window,
            restart_backoff=restart_backoff,
        )
        self.supervisor.on_change = self._write_endpoints
        self.bound: dict[str, int] = {}
        """The port each child bound (by child name), known once it is ready."""
        self._web_port_chosen = 0
        """The web port picked before the first start when none is configured (:meth:`_web_port`)."""
        self.endpoints: Endpoints | None = None

    # --- public API --------------------------------------------------------------------------

    async def start(self) -> Endpoints:
        """Start Redis (embedded default), interaction, broker, web, then the provider (OAuth redirect: the web port).

        Returns the endpoints (also written to ``<state_dir>/endpoints.json``) once every child is
        ready: gRPC health SERVING, web answering HTTP, Redis answering PING. Raises
        :class:`StackError` (after stopping what did start) on a missing ``redis-server`` or
        config, or when a child exits or is not ready in time.
        """
        _check_config(self.config_path)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.access is not Access.OPEN:
            make_private(self.state_dir)
            # a tokens file of the person's own (MAKA_AUTH_TOKENS_FILE + their token variables) replaces ours
            if not (self._extra_env.get("MAKA_AUTH_TOKENS_FILE") or os.environ.get("MAKA_AUTH_TOKENS_FILE")):
                self._tokens_file, self._token = write_owner_token(self.state_dir)
        (self.state_dir / "run").mkdir(exist_ok=True)
        self._applied_config.unlink(missing_ok=True)  # an earlier run's: this run's first provider writes its own
        notify_status_path(self.state_dir).unlink(missing_ok=True)  # an earlier run's counters
        try:
            if self._embedded_redis:
                await self.supervisor.start(self.redis_spec())
            await self.supervisor.start(self._interaction_spec())
            await self.supervisor.start(self._broker_spec())
            # The web surface reads sign-ins and the server status from the broker, and its bound port is
            # the provider's OAuth redirect URI (kept across restarts): broker, then web, then the provider.
            if self.web_enabled:
                await self.supervisor.start(self._web_spec())
            await self.supervisor.start(self._provider_spec())
            if self.mcp_enabled:
                await self.supervisor.start(self._mcp_spec())
        except BaseException:
            await self.stop()
            raise
        for name in sorted(await self.wait_for_tools()):
            if name in self._signing_in:
                self._sink(
                    "stack", f"MCP server {name!r} needs a sign-in: open the web page or `maka auth login {name}`"
                )
            else:
                self._sink("stack", f"MCP server {name!r} is not connected yet; `maka status` shows why")
        return await self._write_endpoints()

    async def wait_for_tools(self) -> set[str]:
        """Wait (at most ``tools_timeout`` s) until the broker lists Tools of every enabled MCP server
        (after start, or after a broker/provider restart), or the provider reports that server as failed
        or waiting for sign-in (waiting longer would only delay the ready line). Returns the servers
        without registered Tools (empty = all registered); never raises for an unreachable broker (it
        counts as nothing listed)."""
        try:
            servers = {s.name for s in load_config(self.config_path) if not s.disabled}
        except (ConfigError, OSError):
            servers = set()
        missing = set(servers)
        deadline = time.monotonic() + self.tools_timeout
        while missing and time.monotonic() < deadline:
            stuck: set[str] = set()
            token = self._token or None
            try:
                tools = await list_tools(self.address(self.BROKER), token=token)
                stuck = await servers_not_connecting(self.address(self.BROKER), token=token)
            except grpc.aio.AioRpcError:
                tools = []
            missing = servers - {name.partition(":")[0] for name in tools}
            with contextlib.suppress(grpc.aio.AioRpcError):
                broker = self.address(self.BROKER)
                self._signing_in = await servers_waiting_for_sign_in(broker, token=token) if missing else set()
            stuck |= self._signing_in  # a sign-in needs a person: the stack is ready without those Tools
            if missing and not missing <= stuck:
                await asyncio.sleep(0.1)  # polling a remote listing, bounded by the deadline
            elif missing:
                break
        return missing

    @property
    def owner_token(self) -> str:
        """The owner's token (:mod:`stack.access`; empty with ``Access.OPEN`` or before :meth:`start`)."""
        return self._token

    @property
    def oauth_redirect_uri(self) -> str:
        """The web surface's ``/oauth/callback`` (``maka auth login`` listens there when there is no web)."""
        return f"http://127.0.0.1:{self.bound.get(self.WEB) or self.ports.web or self._callback_port()}/oauth/callback"

    def _callback_port(self) -> int:
        """A loopback port for the OAuth redirect when the web port is ephemeral and no web runs: chosen
        free once and kept in the state dir, so the URI registered with authorization servers stays valid
        across restarts (never a fixed port another process may hold)."""
        path = self.state_dir / "oauth-callback.port"
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().strip())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{port}\n")
        return port

    def _oauth_env(self) -> dict[str, str]:
        key_file = self.state_dir / "oauth.key"
        generate_key_file(key_file)
        return {
            "MAKA_OAUTH_REDIRECT_URI": self.oauth_redirect_uri,
            "MAKA_OAUTH_KEY_FILE": str(key_file),
            "MAKA_OAUTH_TOKEN_DIR": str(self.state_dir / "oauth"),
        }

    def _answer_env(self) -> dict[str, str]:
        """The key that seals answer values at rest in Redis (docs/security.md "Answer values at rest"):
        ``STATE/answer.key``, written once (mode 0600) and kept across launches, so records survive restarts."""
        key_file = self.state_dir / "answer.key"
        generate_key_file(key_file)
        return {"MAKA_ANSWER_KEY_FILE": str(key_file)}

    def reload_config(self) -> bool:
        """Send SIGHUP to the MCP provider (it re-reads and applies its config; ``maka reload``).
        False when no provider process runs."""
        pid = self.supervisor.pid(self.PROVIDER)
        if pid is None:
            return False
        os.kill(pid, signal.SIGHUP)
        return True

    async def stop(self) -> None:
        """Drain and stop every child: MCP front door, web, broker, provider, interaction, redis. The broker
        stops before the provider so its own shutdown settles what is live (calls ``lost``, forms
        ``host_restarted``, docs/design.md#restart-and-reconnect) instead of seeing the provider go
        (``provider_lost``)."""
        await self.supervisor.stop(order=(self.MCP, self.WEB, self.BROKER, self.PROVIDER, self.INTERACTION, self.REDIS))
        (self.state_dir / "endpoints.json").unlink(missing_ok=True)
        if self._tokens_file is not None:
            self._tokens_file.unlink(missing_ok=True)  # this stack's token opens nothing any more
        if self._grpc_socket_dir is not None and self._grpc_socket_tmp:
            shutil.rmtree(self._grpc_socket_dir, ignore_errors=True)
            self._grpc_socket_dir = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def kill(self, name: str) -> None:
        """SIGKILL child ``name`` (``interaction``, ``broker``, ``provider``, ``web``, ``redis``)."""
        self.supervisor.kill(name)

    async def restart(self, name: str) -> None:
        """Gracefully restart child ``name`` on the same port and wait until it is ready."""
        await self.supervisor.restart(name)

    async def restart_host(self) -> None:
        """A rolling restart of the Host: SIGTERM broker and provider together (one pod's containers),
        let them drain (``MAKA_DRAIN_SECONDS``), then start them again and wait until both are ready."""
        await self.supervisor.restart_together((self.BROKER, self.PROVIDER))

    def subscribe(self) -> asyncio.Queue[StackEvent]:
        """A queue of every later :class:`StackEvent` (exits, restarts, readiness)."""
        return self.supervisor.subscribe()

    @property
    def history(self) -> list[StackEvent]:
        """Every event so far."""
        return self.supervisor.history

    def address(self, name: str) -> str:
        """``127.0.0.1:<port>`` of a gRPC child (``unix:///abs/<name>.sock`` with ``Access.UNIX``), the web base
        URL for ``web``, the endpoint URL for ``mcp``."""
        port = self.bound[name]
        if self.access is Access.UNIX and name in (self.INTERACTION, self.BROKER, self.PROVIDER):
            return self._unix_target(name)
        if name == self.MCP:
            return f"http://127.0.0.1:{port}/mcp"
        return f"http://127.0.0.1:{port}" if name == self.WEB else f"127.0.0.1:{port}"

    # --- child specs -------------------------------------------------------------------------

    def _port_file(self, name: str) -> Path:
        return self.state_dir / "run" / f"{name}.port"

    def _pinned_port(self, name: str, configured: int) -> int:
        """The configured port, or after a first launch the port that launch bound (restarts keep it)."""
        return self.bound.get(name, configured)

    def _sockets(self) -> Path:
        """The ``0700`` folder of the gRPC children's unix sockets: ``<state dir>/sock``, or a private folder under
        ``/tmp`` when that path is too long for a socket (removed at :meth:`stop`)."""
        if self._grpc_socket_dir is None:
            folder = self.state_dir / "sock"
            if len(str(folder / "interaction.sock")) > SHORT_SOCKET_CHARS:
                folder, self._grpc_socket_tmp = Path(tempfile.mkdtemp(prefix="maka-sock-", dir="/tmp")), True
            folder.mkdir(mode=0o700, exist_ok=True)
            folder.chmod(0o700)
            self._grpc_socket_dir = folder
        return self._grpc_socket_dir

    def _unix_target(self, name: str) -> str:
        return f"unix://{self._sockets() / f'{name}.sock'}"

    def _auth_env(self, name: str) -> dict[str, str]:
        """The token variables of child ``name`` (:mod:`stack.access`): with ``Access.TOKENS`` every gRPC service
        checks the owner's tokens file and every child presents the owner's token; the web page and the MCP front
        door need it whenever the access is not ``OPEN``."""
        if self.access is Access.OPEN or self._tokens_file is None:
            return {}
        tokens = {"MAKA_AUTH_TOKENS_FILE": str(self._tokens_file)}
        if name == self.WEB:
            return {"MAKA_SURFACE_TOKEN": self._token, **self._web_session_env()}
        if name == self.MCP:
            # its callers' bearer tokens; its own: caller (Tool listing), surface (answers of eliciting clients)
            return {**tokens, "MAKA_CALLER_TOKEN": self._token, "MAKA_SURFACE_TOKEN": self._token}
        if self.access is not Access.TOKENS:
            return {}
        own = {self.BROKER: "MAKA_INTERACTION_TOKEN", self.PROVIDER: "MAKA_BROKER_TOKEN"}
        return {**tokens, **({own[name]: self._token} if name in own else {})}

    def _web_session_env(self) -> dict[str, str]:
        """What keeps the owner's browser signed in across restarts of this state dir (docs/security.md "Other local
        users"): ``STATE/web-session.key`` (written once, mode 0600, kept) signs the page's login cookie and derives
        its CSRF token, so neither changes with the per-run owner token; the tokens file is named on the sign-in
        page. A key file the person set (``MAKA_WEB_SESSION_KEY_FILE`` / ``MAKA_WEB_SECRET_FILE``) is kept."""
        assert self._tokens_file is not None
        key_file = self.state_dir / "web-session.key"
        generate_key_file(key_file)
        env = {"MAKA_WEB_OWNER_TOKENS_FILE": str(self._tokens_file)}
        for variable in ("MAKA_WEB_SESSION_KEY_FILE", "MAKA_WEB_SECRET_FILE"):
            if not (self._extra_env.get(variable) or os.environ.get(variable)):
                env[variable] = str(key_file)
        return env

    def _grpc_spec(self, name: str, module: str, configured: int, env: Callable[[], dict[str, str]]) -> ChildSpec:
        port_file = self._port_file(name)
        unix = self.access is Access.UNIX
        socket_path = self._sockets() / f"{name}.sock" if unix else None

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            port_file.unlink(missing_ok=True)
            port = self._pinned_port(name, configured)
            if socket_path is not None:
                socket_path.unlink(missing_ok=True)
            spec.env = child_env(
                {
                    "MAKA_LISTEN": self._unix_target(name) if unix else f"127.0.0.1:{port}",
                    "MAKA_PORT_FILE": str(port_file),
                    "MAKA_HOST_ID": self.host_id,
                    # the stack's tier serves its one Host: a shell's MAKA_HOST_IDS (a surface's pool, e.g. "*")
                    # never reaches it
                    "MAKA_HOST_IDS": "",
                    "MAKA_LOG_LEVEL": self.log_level,
                    **env(),
                    **self._auth_env(name),
                    **self._extra_env,
                    **self._child_env.get(name, {}),
                    **self._metrics_env(name),
                }
            )

        async def ready() -> bool:
            port = _read_port(port_file)
            if port is None or not await grpc_serving(self._unix_target(name) if unix else f"127.0.0.1:{port}"):
                return False
            self.bound[name] = port
            return True

        return ChildSpec(name, [sys.executable, "-m", module], ready=ready, prepare=prepare)

    def _metrics_env(self, name: str) -> dict[str, str]:
        if self.metrics is None or name not in self.metrics:
            return {}
        port = self.metrics_bound.get(name) or self.metrics[name] or free_port()
        self.metrics_bound[name] = port
        return {METRICS_ENV: f"127.0.0.1:{port}"}

    def metrics_urls(self) -> dict[str, str]:
        """``{service: "http://127.0.0.1:P/metrics"}`` of every service serving metrics (empty when off)."""
        return {name: f"http://127.0.0.1:{port}/metrics" for name, port in self.metrics_bound.items()}

    def _interaction_spec(self) -> ChildSpec:
        return self._grpc_spec(
            self.INTERACTION,
            "services.interaction.main",
            self.ports.interaction,
            lambda: {
                "MAKA_REDIS_URL": self.redis_url,
                "MAKA_REDIS_MODE": self.redis_mode,
                **self._answer_env(),
                **self._notify_env(),
            },
        )

    def _web_port(self) -> int:
        """The web surface's port, chosen before the Interaction service starts (its notifications link to the
        page): the configured one, else a free one kept for the whole run."""
        if self.WEB not in self.bound and not self.ports.web and not self._web_port_chosen:
            self._web_port_chosen = free_port()
        return self.bound.get(self.WEB) or self.ports.web or self._web_port_chosen

    def _notify_env(self) -> dict[str, str]:
        """The notifications' status file ``maka status`` reads (docs/operations.md#notifications), and the web
        page their links open (unless the person set ``MAKA_WEB_PUBLIC_URL``)."""
        env = {"MAKA_NOTIFY_STATUS_FILE": str(notify_status_path(self.state_dir))}
        if self.web_enabled and not (self._extra_env.get(WEB_PUBLIC_URL_ENV) or os.environ.get(WEB_PUBLIC_URL_ENV)):
            env[WEB_PUBLIC_URL_ENV] = f"http://127.0.0.1:{self._web_port()}"
        return env

    def _broker_spec(self) -> ChildSpec:
        spec = self._grpc_spec(
            self.BROKER,
            "services.broker.main",
            self.ports.broker,
            lambda: {"MAKA_INTERACTION_TARGET": self.address(self.INTERACTION)},
        )
        spec.final_exits = {
            SUPERSEDED_EXIT_CODE: f"{SUPERSEDED}: the broker exited {SUPERSEDED_EXIT_CODE}: another broker began a"
            f" newer epoch of Host {self.host_id!r} on the same Redis (a second `maka up` or pod with this host"
            " id); it is not restarted, which would fence that one back"
        }
        return spec

    @property
    def _applied_config(self) -> Path:
        return self.state_dir / "run" / "mcp-applied.json"

    def _provider_spec(self) -> ChildSpec:
        return self._grpc_spec(
            self.PROVIDER,
            "services.mcp_provider.main",
            self.ports.provider,
            lambda: {
                "MAKA_BROKER_TARGET": self.address(self.BROKER),
                "MAKA_MCP_CONFIG": str(self.config_path),
                # a provider restarted while the file is invalid (a rejected reload) runs the last applied copy
                "MAKA_MCP_CONFIG_APPLIED": str(self._applied_config),
                **self._oauth_env(),
            },
        )

    def _web_spec(self) -> ChildSpec:
        port_file = self._port_file(self.WEB)

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            port_file.unlink(missing_ok=True)
            port = self._web_port()
            spec.env = child_env(
                {
                    "MAKA_INTERACTION_TARGET": self.address(self.INTERACTION),
                    "MAKA_BROKER_TARGET": self.address(self.BROKER) if self.BROKER in self.bound else "",
                    "MAKA_WEB_LISTEN": f"127.0.0.1:{port}",
                    "MAKA_WEB_PORT_FILE": str(port_file),
                    "MAKA_LOG_LEVEL": self.log_level,
                    **self._auth_env(self.WEB),
                    **self._extra_env,
                }
            )

        async def ready() -> bool:
            port = _read_port(port_file)
            if port is None or not await http_ok(f"http://127.0.0.1:{port}/"):
                return False
            self.bound[self.WEB] = port
            return True

        return ChildSpec(self.WEB, [sys.executable, "-m", "surfaces.web.main"], ready=ready, prepare=prepare)

    def _mcp_spec(self) -> ChildSpec:
        """The MCP front door (``surfaces.mcp.main``): a caller of the broker, naming the web page as where to
        answer forms."""
        port_file = self._port_file(self.MCP)

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            port_file.unlink(missing_ok=True)
            port = self._pinned_port(self.MCP, self.ports.mcp)
            spec.env = child_env(
                {
                    "MAKA_BROKER_TARGET": self.address(self.BROKER),
                    "MAKA_INTERACTION_TARGET": self.address(self.INTERACTION),
                    "MAKA_WEB_URL": self.address(self.WEB) if self.WEB in self.bound else "",
                    "MAKA_MCP_LISTEN": f"127.0.0.1:{port}",
                    "MAKA_MCP_PORT_FILE": str(port_file),
                    "MAKA_LOG_LEVEL": self.log_level,
                    **self._auth_env(self.MCP),
                    **self._extra_env,
                }
            )

        async def ready() -> bool:
            port = _read_port(port_file)
            if port is None or not await http_ok(f"http://127.0.0.1:{port}/healthz"):
                return False
            self.bound[self.MCP] = port
            return True

        return ChildSpec(self.MCP, [sys.executable, "-m", "surfaces.mcp.main"], ready=ready, prepare=prepare)

    def redis_spec(self) -> ChildSpec:
        """The embedded ``redis-server``: append-only file in the state dir, a Unix socket (moved to a short
        ``/tmp`` path when the state dir's is too long for one)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError(
                "redis-server is not installed: install it (apt-get install redis-server, or `make setup`) "
                "or point at a running Redis with --redis-url / MAKA_REDIS_URL"
            )
        data_dir = self.state_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        socket_path = self.state_dir / "redis.sock"
        if len(str(socket_path)) > SHORT_SOCKET_CHARS:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="maka-", dir="/tmp"))
            socket_path = self._socket_dir / "redis.sock"
        self.redis_url = f"unix://{socket_path}"
        argv = [
            binary,
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--loglevel", "warning",
        ]  # fmt: skip

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            socket_path.unlink(missing_ok=True)

        async def ready() -> bool:
            return socket_path.exists() and await redis_ping(self.redis_url)

        return ChildSpec(self.REDIS, argv, ready=ready, prepare=prepare)

    async def _write_endpoints(self) -> Endpoints:
        endpoints = Endpoints(
            interaction=self.address(self.INTERACTION),
            broker=self.address(self.BROKER),
            web=self.address(self.WEB) if self.WEB in self.bound else "",
            redis_url=self.redis_url,
            host_id=self.host_id,
            pids=self.supervisor.pids(),
            metrics=self.metrics_urls(),
            provider=self.address(self.PROVIDER) if self.PROVIDER in self.bound else "",
            config=str(self.config_path),
            mcp=self.address(self.MCP) if self.MCP in self.bound else "",
            tokens=str(self._tokens_file) if self._tokens_file is not None else "",
        )
        write_endpoints(self.state_dir, endpoints)
        self.endpoints = endpoints
        return endpoints
