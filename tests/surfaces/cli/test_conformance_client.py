"""``maka conformance-client`` usage errors: exit 2 with a clear message, before any stack starts."""

from __future__ import annotations

import pytest

from surfaces.cli.main import main


def test_without_a_scenario_the_client_exits_2_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MCP_CONFORMANCE_SCENARIO", raising=False)

    assert main(["conformance-client", "http://localhost:1/mcp"]) == 2
    assert "MCP_CONFORMANCE_SCENARIO" in capsys.readouterr().err


def test_an_unsupported_scenario_exits_2_listing_the_supported_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "auth/metadata-default")
    monkeypatch.setenv("MCP_CONFORMANCE_PROTOCOL_VERSION", "2026-07-28")

    assert main(["conformance-client", "http://localhost:1/mcp"]) == 2
    err = capsys.readouterr().err
    assert "unsupported scenario 'auth/metadata-default'" in err
    assert "sep-2322-client-request-state" in err


def test_a_scenario_at_a_version_it_does_not_run_at_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "sep-2322-client-request-state")
    monkeypatch.setenv("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")

    assert main(["conformance-client", "http://localhost:1/mcp"]) == 2
    assert "does not run at protocol version '2025-11-25'" in capsys.readouterr().err
