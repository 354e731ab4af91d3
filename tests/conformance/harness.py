"""Paths of the Node tools installed by ``scripts/setup_node_tools.sh`` and a runner of the official
MCP conformance harness CLI (``conformance client --command ... --scenario ... --spec-version ...``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
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


EXPECTED_FAILURES = Path(__file__).with_name("expected-failures.yml")
"""The baseline passed to the harness: only scenarios that are deliberate non-goals."""

_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


@dataclass
class ScenarioResult:
    """One scenario's results folder of a suite run."""

    checks: list[dict[str, Any]]
    client_stdout: str
    client_stderr: str


@dataclass
class SuiteRun:
    """A finished ``--suite all`` run: exit code, the harness output, and every scenario's results."""

    returncode: int
    stdout: str
    stderr: str
    scenarios: dict[str, ScenarioResult]
    seconds: float


def client_scenarios(spec_version: str) -> list[str]:
    """The client scenarios the pinned harness runs at ``spec_version`` (``conformance list``)."""
    done = subprocess.run(
        [str(NODE22), str(HARNESS), "list", "--client", "--spec-version", spec_version],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [line.strip()[2:].split(" [")[0] for line in done.stdout.splitlines() if line.strip().startswith("- ")]


def run_suite(spec_version: str, output_dir: Path, *, timeout_ms: int = 150_000) -> SuiteRun:
    """Run every client scenario at ``spec_version`` concurrently (the harness's ``--suite all``) with
    :data:`EXPECTED_FAILURES` as the baseline, the client logging at INFO.

    Raises ``subprocess.TimeoutExpired`` when the harness hangs (bound: one client timeout + 120 s: the
    scenarios run in parallel).
    """
    client = f"{sys.executable} -m tests.conformance.client --log-level INFO --timeout {timeout_ms / 1000 - 10}"
    command = [
        str(NODE22),
        str(HARNESS),
        "client",
        "--command", client,
        "--suite", "all",
        "--spec-version", spec_version,
        "--timeout", str(timeout_ms),
        "--expected-failures", str(EXPECTED_FAILURES),
        "-o", str(output_dir),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_ms / 1000 + 120, check=False
    )
    seconds = time.monotonic() - started
    scenarios: dict[str, ScenarioResult] = {}
    for checks in sorted(output_dir.glob("**/checks.json")):
        folder = checks.parent
        name = _TIMESTAMP.sub("", folder.relative_to(output_dir).as_posix())
        scenarios[name] = ScenarioResult(
            checks=json.loads(checks.read_text()),
            client_stdout=(folder / "stdout.txt").read_text(),
            client_stderr=(folder / "stderr.txt").read_text(),
        )
    return SuiteRun(done.returncode, done.stdout, done.stderr, scenarios, seconds)
