"""Maka services as child processes for the benchmarks and the tier tests: ``python -m <module>`` on an
ephemeral loopback port (``MAKA_LISTEN=127.0.0.1:0``), found through its ``MAKA_PORT_FILE``, logs in a file.

The full stack as ``maka up`` runs it is :class:`stack.topology.Stack`; these are single services wired by hand
(two Interaction replicas on one Redis, a broker and a provider per Host).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class ServiceProcess:
    """One service: :meth:`start` spawns it and waits (bounded) for its port; :meth:`stop` ends it."""

    def __init__(self, directory: Path, module: str, env: dict[str, str], *, name: str | None = None) -> None:
        self.directory = directory
        self.module = module
        self.env = env
        self.name = name or module.split(".")[1]
        self.port_file = directory / f"{self.name}.port"
        self.log_path = directory / f"{self.name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self, timeout: float = 60.0) -> int:
        """Start and wait (bounded) for the port file; returns the port."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port_file.unlink(missing_ok=True)
        # the venv's bin first: a provider spawns stdio MCP servers as `python ...`
        path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
        env = {
            **os.environ,
            **self.env,
            "PATH": path,
            "MAKA_LISTEN": "127.0.0.1:0",
            "MAKA_PORT_FILE": str(self.port_file),
        }
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: ASYNC220 - starting a child, not waiting on it
                [sys.executable, "-m", self.module], env=env, cwd=ROOT, stdout=log, stderr=log
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.module} exited: {self.log_path.read_text()[-2000:]}")
            if self.port_file.exists() and self.port_file.read_text().strip():
                return int(self.port_file.read_text())
            await asyncio.sleep(0.05)  # polling a file another process writes, bounded above
        raise TimeoutError(f"{self.module} did not start")

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL) and wait."""
        if self.process is None or self.process.poll() is not None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


class InteractionProcess(ServiceProcess):
    """``python -m services.interaction.main``."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        super().__init__(directory, "services.interaction.main", env)
