"""``python -m tests.conformance.client`` usage errors: exit 2 with a clear message, before any stack starts."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conformance.client.__main__ import main
from tests.conformance.harness import ROOT


@pytest.fixture(autouse=True)
def _root_logging() -> Iterator[None]:
    """``main`` configures the root logger as a process would (a handler on this test's captured stderr);
    the test process gets its own handlers back, so later tests' log lines never hit a closed stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_without_a_scenario_the_client_exits_2_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MCP_CONFORMANCE_SCENARIO", raising=False)

    assert main(["http://localhost:1/mcp"]) == 2
    assert "MCP_CONFORMANCE_SCENARIO" in capsys.readouterr().err


def test_the_non_goal_scenario_exits_2_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "elicitation-sep1034-client-defaults")
    monkeypatch.setenv("MCP_CONFORMANCE_PROTOCOL_VERSION", "2026-07-28")

    assert main(["http://localhost:1/mcp"]) == 2
    err = capsys.readouterr().err
    assert "unsupported scenario 'elicitation-sep1034-client-defaults'" in err
    assert "RFC non-goal" in err


def test_a_scenario_at_a_version_it_does_not_run_at_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "sep-2322-client-request-state")
    monkeypatch.setenv("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")

    assert main(["http://localhost:1/mcp"]) == 2
    assert "does not run at protocol version '2025-11-25'" in capsys.readouterr().err


def test_an_unreachable_scenario_server_exits_3_with_a_stable_error_and_stops_the_stack() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "tests.conformance.client", "--scenario", "tools_call"]
    command += ["--protocol-version", "2026-07-28", "--connect-timeout", "2", f"http://127.0.0.1:{port}/mcp"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 3, done.stderr
    assert "conformance-client: stack_failed: the MCP provider did not connect to server 'conformance'" in done.stderr
    assert done.stdout == ""
