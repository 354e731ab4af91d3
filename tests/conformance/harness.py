"""Paths of the Node tools installed by ``scripts/setup_node_tools.sh`` and a runner of the official
MCP conformance harness CLI (``conformance client --command ... --scenario ... --spec-version ...``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
NODE22 = TOOLS / "bin" / "node22"
"""Node 22 (a symlink made by ``scripts/setup_node_tools.sh`` to the ``node-linux-<arch>`` npm binary)."""
HARNESS = TOOLS / "conformance" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SERVER_EVERYTHING = (
    TOOLS / "server-everything" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)


def require_tools() -> None:
    """Fail (never skip) with the fix when the Node tools are missing."""
    missing = [str(path) for path in (NODE22, HARNESS, SERVER_EVERYTHING) if not path.exists()]
    assert not missing, f"missing {missing}: run scripts/setup_node_tools.sh (make setup runs it)"


@dataclass
class HarnessRun:
    """One finished harness run: its exit code and output, the checks, and the client's stdout."""

    returncode: int
    stdout: str
    stderr: str
    checks: list[dict[str, Any]]
    client_stdout: str
    client_stderr: str

    def statuses(self) -> dict[str, str]:
        """Check id → status (the last one wins when an id repeats)."""
        return {check["id"]: check["status"] for check in self.checks}

    def client_lines(self) -> list[dict[str, Any]]:
        """The JSON lines ``python -m tests.conformance.client`` printed."""
        return [json.loads(line) for line in self.client_stdout.splitlines() if line.startswith("{")]


def run_harness(scenario: str, spec_version: str, output_dir: Path, *, timeout_ms: int = 100_000) -> HarnessRun:
    """Run the harness on ``python -m tests.conformance.client`` for one scenario at one spec version.

    The client logs at INFO (stderr.txt of the results) so that the secrecy checks see every log line.

    ``timeout_ms`` bounds the client (the harness kills it then); the client bounds itself at 90 s.
    Raises ``subprocess.TimeoutExpired`` when the harness itself hangs (bound: timeout + 30 s, below
    pytest-timeout's 180 s).
    """
    command = [
        str(NODE22),
        str(HARNESS),
        "client",
        "--command", f"{sys.executable} -m tests.conformance.client --log-level INFO",
        "--scenario", scenario,
        "--spec-version", spec_version,
        "--timeout", str(timeout_ms),
        "-o", str(output_dir),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_ms / 1000 + 30, check=False
    )
    results = sorted(output_dir.glob("*/checks.json"))
    assert len(results) == 1, f"expected one results folder, found {results}\n{done.stderr}"
    folder = results[0].parent
    return HarnessRun(
        returncode=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        checks=json.loads(results[0].read_text()),
        client_stdout=(folder / "stdout.txt").read_text(),
        client_stderr=(folder / "stderr.txt").read_text(),
    )
