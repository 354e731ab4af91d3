"""A real nginx as an h2c gRPC proxy on an ephemeral loopback port, for the client tests.

``grpc_pass`` to one upstream with ``grpc_read_timeout`` (default 20 s, tighter than nginx's 60 s
default, so a silent stream is cut within a test): what an ingress does to a long ``CallTool``.
:meth:`Nginx.restart` stops it fast (every proxied connection is cut) and starts it again on the
same port. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
from pathlib import Path

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START_TIMEOUT = 15.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Nginx:
    """One nginx master (``daemon off``) proxying gRPC from ``address`` to ``upstream``."""

    def __init__(self, directory: Path, upstream: str, *, read_timeout: str = "20s") -> None:
        self.directory = directory
        self.upstream = upstream
        self.read_timeout = read_timeout
        self.port = _free_port()
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
        config.write_text(
            f"""
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{self.port} http2;
        location / {{
            grpc_pass grpc://{self.upstream};
            grpc_read_timeout {self.read_timeout};
            grpc_send_timeout {self.read_timeout};
        }}
    }}
}}
"""
        )
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
        async with asyncio.timeout(START_TIMEOUT):
            while True:
                if self.process.returncode is not None:
                    raise RuntimeError(f"nginx exited {self.process.returncode}: {self.error_log()}")
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except OSError:
                    await asyncio.sleep(0.05)  # polling a port that is coming up, bounded above
                    continue
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return

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
        return path.read_text() if path.exists() else ""
