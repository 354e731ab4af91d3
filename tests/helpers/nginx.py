"""A real ``nginx`` for tests: private prefix directory, foreground process, one loopback port.

:class:`Nginx` takes the body of the ``http {}`` block (servers, upstreams) and adds the process-level
lines (pid, temp paths and logs inside the prefix), so several instances run side by side without the
machine's own configuration. :func:`grpc_proxy` is the h2c gRPC proxy of the client tests (what an
ingress does to a long ``CallTool``: ``grpc_read_timeout`` 20 s by default, tighter than nginx's 60 s);
the web-replica tests pass a TLS-terminating reverse proxy. :meth:`Nginx.restart` stops it fast (every
proxied connection is cut) and starts it again on the same port. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
from pathlib import Path

from tests.helpers.waiting import eventually

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START_TIMEOUT = 15.0

_MAIN = """\
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{body}
}}
"""


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Nginx:
    """One nginx master (``daemon off``) in ``directory`` serving ``http_body``, which listens on ``port``."""

    def __init__(self, directory: Path, http_body: str, port: int) -> None:
        self.directory = directory
        self.http_body = http_body
        self.port = port
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _config(self) -> Path:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)  # workers may run as nobody
        config = d / "nginx.conf"
        config.write_text(_MAIN.format(prefix=d, body=self.http_body))
        return config

    async def start(self) -> None:
        """Start nginx and wait (bounded) until its port accepts connections."""
        config = self._config()
        self.process = await asyncio.create_subprocess_exec(
            NGINX,
            "-p",
            str(self.directory),
            "-c",
            str(config),
            "-e",
            str(self.directory / "error.log"),
            "-g",
            "daemon off;",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.starts += 1
        process = self.process

        async def accepting() -> bool:
            if process.returncode is not None:
                raise RuntimeError(f"nginx exited {process.returncode}: {self.error_log()}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False  # the port is still coming up
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True

        await eventually(accepting, timeout=START_TIMEOUT, interval=0.05, what=f"nginx on port {self.port}")

    async def stop(self) -> None:
        """Fast shutdown (SIGTERM): every proxied stream is cut at once."""
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def error_log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def grpc_proxy(directory: Path, upstream: str, *, read_timeout: str = "20s") -> Nginx:
    """An h2c gRPC proxy on a free loopback port: ``grpc_pass`` to ``upstream`` with ``grpc_read_timeout``."""
    port = free_port()
    body = f"""
    server {{
        listen 127.0.0.1:{port} http2;
        location / {{
            grpc_pass grpc://{upstream};
            grpc_read_timeout {read_timeout};
            grpc_send_timeout {read_timeout};
        }}
    }}
"""
    return Nginx(directory, body, port)
