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
import logging
import signal
from dataclasses import dataclass

import uvicorn
from pydantic import ValidationError
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette

from services.core import runner
from services.core.logs import configure
from surfaces.common.asgi_server import QuietSignalsServer, bind_socket, wait_started, write_atomically
from surfaces.common.interactions import Interactions
from surfaces.common.sign_in import SignIns
from surfaces.common.target import parse_pool
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
    client: Interactions
    asgi: Starlette
    sign_ins: SignIns | None = None

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
    client = Interactions.connect(
        settings.interaction_target,
        token=token,
        host_id=settings.host_id,
        pool=parse_pool(settings.host_ids),
        surface_kind="web",
    )
    sign_ins = SignIns.connect(settings.broker_target, token=token) if settings.broker_target else None
    return WebApp(settings=settings, client=client, asgi=create_app(settings, client, sign_ins), sign_ins=sign_ins)


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


async def start_web(app: WebApp, settings: WebSettings) -> RunningWeb:
    """Bind ``settings.web_listen`` and serve ``app`` in the running loop; returns once accepting.

    Writes the bound port to ``settings.web_port_file`` when set. Raises ``RuntimeError`` when the
    address cannot be bound or the server does not start within 10 s.
    """
    host, port = settings.listen_host_port()
    sock = bind_socket(host, port)
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
    server = QuietSignalsServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="maka-web")
    try:
        await wait_started(server, task, "web server", STARTUP_TIMEOUT_SECONDS)
    except TimeoutError:
        server.should_exit = True
        raise RuntimeError("web server did not start") from None
    if settings.web_port_file is not None:
        write_atomically(settings.web_port_file, str(bound_port))
    running = RunningWeb(server=server, task=task, host=host, port=bound_port)
    log.info("web.serving", extra={"port": bound_port, "auth": bool(settings.surface_token.get_secret_value())})
    return running


async def serve(app: WebApp, settings: WebSettings) -> None:
    """Serve until SIGINT/SIGTERM, then stop gracefully (open SSE streams get a 1 s grace) and close the client."""
    running = await start_web(app, settings)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        # This process serves one surface: its open event streams end now (sse-starlette's process-wide
        # flag), so the page reconnects instead of the stream being cancelled at the grace's end.
        AppStatus.should_exit = True
        running.request_stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        await running.task
    finally:
        await app.close()


async def main() -> None:
    """``settings = WebSettings()`` → ``app = await build(settings)`` → ``await serve(app, settings)``."""
    settings = WebSettings()
    configure("web", settings.log_level)
    try:
        settings.listen_host_port()
    except ValueError as error:
        raise SystemExit(f"maka web: {error}") from None
    app = await build(settings)
    await serve(app, settings)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ValidationError as refused:
        runner.settings_refused(refused)
