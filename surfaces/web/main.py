"""Run the web surface: ``python -m surfaces.web.main`` (or ``maka web``).

Same shape as every service ``main``::

    settings = WebSettings()          # MAKA_INTERACTION_TARGET, MAKA_WEB_LISTEN, MAKA_SURFACE_TOKEN, ...
    app = await build(settings)       # Interaction-service client + Starlette app
    await serve(app, settings)        # uvicorn until SIGINT/SIGTERM

:func:`start_web` starts it in the running loop without signal handling (tests, ``maka up``) and
returns a :class:`RunningWeb` with the bound port; port 0 picks a free one, written to
``web_port_file`` when set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from services.core.logs import configure
from surfaces.common.interaction_client import InteractionClient
from surfaces.common.sign_in import SignInClient
from surfaces.web.app import create_app
from surfaces.web.settings import WebSettings

log = logging.getLogger("maka.web.main")

STARTUP_TIMEOUT_SECONDS = 10.0
SHUTDOWN_GRACE_SECONDS = 1
"""Open SSE streams are cut after this grace once shutdown starts."""


@dataclass
class WebApp:
    """A built web surface: its settings, its Interaction-service client and the ASGI app."""

    settings: WebSettings
    client: InteractionClient
    asgi: Starlette
    sign_ins: SignInClient | None = None

    async def close(self) -> None:
        """Close the clients' gRPC channels."""
        await self.client.close()
        if self.sign_ins is not None:
            await self.sign_ins.close()


async def build(settings: WebSettings) -> WebApp:
    """Connect the Interaction-service client (inside the running loop) and build the Starlette app.

    The surface token, when set, authenticates both the page's users and this surface to the service.
    """
    token = settings.surface_token.get_secret_value() or None
    client = InteractionClient.connect(
        settings.interaction_target, token=token, host_id=settings.host_id, surface_kind="web"
    )
    sign_ins = SignInClient.connect(settings.broker_target, token=token) if settings.broker_target else None
    return WebApp(settings=settings, client=client, asgi=create_app(settings, client, sign_ins), sign_ins=sign_ins)


class _Server(uvicorn.Server):
    """uvicorn without its own signal capture: :func:`serve` handles SIGINT/SIGTERM (exit code 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class RunningWeb:
    """A web surface serving in this loop."""

    server: uvicorn.Server
    task: asyncio.Task[None]
    host: str
    port: int

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8765``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def request_stop(self) -> None:
        """Ask the server to stop (safe from a signal handler); :meth:`stop` also waits for it."""
        self.server.should_exit = True

    async def stop(self) -> None:
        """Stop accepting, cut open streams after the grace, and wait for the server task."""
        self.server.should_exit = True
        await self.task


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise RuntimeError(f"cannot bind {host}:{port}: {error.strerror}") from None
    sock.set_inheritable(True)
    return sock


async def start_web(app: WebApp, settings: WebSettings) -> RunningWeb:
    """Bind ``settings.web_listen`` and serve ``app`` in the running loop; returns once accepting.

    Writes the bound port to ``settings.web_port_file`` when set. Raises ``RuntimeError`` when the
    address cannot be bound or the server does not start within 10 s.
    """
    host, port = settings.listen_host_port()
    sock = _bind(host, port)
    bound_port: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app.asgi,
        lifespan="off",
        access_log=False,
        log_config=None,
        proxy_headers=bool(settings.web_forwarded_allow_ips),
        forwarded_allow_ips=settings.web_forwarded_allow_ips or None,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="maka-web")
    try:
        async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("web server exited during startup")
                await asyncio.sleep(0.01)
    except TimeoutError:
        server.should_exit = True
        raise RuntimeError("web server did not start") from None
    if settings.web_port_file is not None:
        _write_atomically(settings.web_port_file, str(bound_port))
    running = RunningWeb(server=server, task=task, host=host, port=bound_port)
    log.info("web.serving", extra={"port": bound_port, "auth": bool(settings.surface_token.get_secret_value())})
    return running


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


async def serve(app: WebApp, settings: WebSettings) -> None:
    """Serve until SIGINT/SIGTERM, then stop gracefully (open SSE streams get a 1 s grace) and close the client."""
    running = await start_web(app, settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, running.request_stop)
    try:
        await running.task
    finally:
        await app.close()


async def main() -> None:
    """``settings = WebSettings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``."""
    settings = WebSettings()
    configure("web", settings.log_level)
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    asyncio.run(main())
