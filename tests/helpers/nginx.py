"""A real ``nginx`` for tests: private prefix directory, foreground process, loopback ports only.

The caller passes the body of the ``http {}`` block (servers, upstreams); this module adds the
process-level lines (foreground, pid and temp paths inside the prefix, errors to a file) so several
nginx instances run side by side without touching the machine's own configuration.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

_MAIN = """\
daemon off;
master_process on;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
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
    """One nginx master (+1 worker) in ``directory`` serving ``http_body`` on ``ports``."""

    def __init__(self, directory: Path, http_body: str, ports: list[int]) -> None:
        self.directory = directory
        self.http_body = http_body
        self.ports = ports
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def error_log(self) -> str:
        """What nginx wrote to its error log so far (for failure messages)."""
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout: float = 10.0) -> None:
        """Write the configuration, start nginx and wait (bounded) until every port accepts."""
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if binary is None:
            raise RuntimeError("nginx is not installed: run `make setup-node` (apt-get install nginx-light)")
        (self.directory / "tmp").mkdir(parents=True, exist_ok=True)
        config = self.directory / "nginx.conf"
        config.write_text(_MAIN.format(prefix=self.directory, body=self.http_body))
        self.process = subprocess.Popen(
            [binary, "-p", str(self.directory), "-c", str(config), "-e", str(self.directory / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        pending = list(self.ports)
        while pending and time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {self.error_log}")
            try:
                with socket.create_connection(("127.0.0.1", pending[0]), timeout=0.5):
                    pending.pop(0)
            except OSError:
                time.sleep(0.02)
        if pending:
            self.stop()
            raise TimeoutError(f"nginx did not listen on {pending}: {self.error_log}")

    def stop(self) -> None:
        """Stop nginx (fast shutdown) and wait for it to exit."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
