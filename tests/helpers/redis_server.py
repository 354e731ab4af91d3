"""A real ``redis-server`` for tests: private, on a unix socket, started and stopped by fixtures."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path


class RedisServer:
    """One ``redis-server`` process listening on a unix socket (and, optionally, AOF in ``directory``)."""

    def __init__(self, directory: Path, *, appendonly: bool = False, port: int = 0) -> None:
        self.directory = directory
        self.appendonly = appendonly
        self.port = port
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``unix://`` URL of the server."""
        return f"unix://{self.socket}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait (bounded) until its socket accepts connections."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make setup` (apt-get install redis-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port", str(self.port),
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always" if self.appendonly else "everysec",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        import redis

        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.socket.exists():
                try:
                    redis.Redis(unix_socket_path=str(self.socket)).ping()
                    return
                except redis.exceptions.ConnectionError:
                    pass
            time.sleep(0.01)
        raise TimeoutError("redis-server did not start")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server (SIGKILL when ``kill``), waiting for it to exit."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=10)
        self.process = None
        self.socket.unlink(missing_ok=True)
