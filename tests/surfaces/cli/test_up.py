"""``maka up``: usage and start-failure exit codes and the ready line (the running stack is in e2e tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surfaces.cli.commands import up
from surfaces.cli.endpoints import Endpoints
from surfaces.cli.main import build_parser


def _run(*argv: str) -> int:
    parser, _ = build_parser()
    return up.run(parser.parse_args(["up", *argv]))


def test_bad_ports_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--config", str(tmp_path / "mcp.json"), "--ports", "gui=80") == 2
    assert capsys.readouterr().err.startswith("USAGE: bad port spec 'gui=80'")


def test_a_missing_config_fails_start_with_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run("--config", str(tmp_path / "nope.json"), "--state-dir", str(tmp_path / "state"))

    assert code == 3
    assert "STACK_FAILED: MCP config" in capsys.readouterr().err
    assert not (tmp_path / "state" / "endpoints.json").exists()


def test_a_missing_redis_server_binary_says_how_to_fix_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    assert _run("--config", str(config), "--state-dir", str(tmp_path / "state")) == 3
    err = capsys.readouterr().err
    assert "STACK_FAILED: redis-server is not installed" in err
    assert "--redis-url" in err


def test_the_config_defaults_to_maka_mcp_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_MCP_CONFIG", "/etc/maka/mcp.json")
    parser, _ = build_parser()

    assert parser.parse_args(["up"]).config == Path("/etc/maka/mcp.json")


def test_the_ready_line_names_the_web_address_and_the_services() -> None:
    endpoints = Endpoints(interaction="127.0.0.1:1", broker="127.0.0.1:2", web="http://127.0.0.1:3")

    assert up.ready_line(endpoints, Path(".state")) == (
        "maka is ready: http://127.0.0.1:3 (interaction 127.0.0.1:1, broker 127.0.0.1:2, state .state)"
    )
