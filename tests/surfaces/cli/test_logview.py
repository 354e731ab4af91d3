"""``maka up``'s log view: human lines on a terminal, JSON otherwise, third-party output to files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from surfaces.cli.logview import LogView, human_line, resolve

ROOT = Path(__file__).resolve().parents[3]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_human_on_a_terminal_and_json_otherwise() -> None:
    assert resolve("auto", _Tty()) == "human"
    assert resolve("auto", io.StringIO()) == "json"
    assert resolve("json", _Tty()) == "json"


def test_json_lines_render_as_one_human_line_each() -> None:
    entry = {
        "ts": 0,
        "level": "warning",
        "logger": "x",
        "event": "mcp_connect_failed",
        "server": "a",
        "cause": "HTTP 401",
    }

    line = human_line("provider", entry)

    assert line.endswith('WARNING [provider] mcp_connect_failed server=a cause="HTTP 401"')


def test_redis_and_non_json_lines_go_to_files_under_the_state_dir(tmp_path: Path) -> None:
    out = _Tty()
    view = LogView(tmp_path, "auto", out)

    view("redis", "1234:M * Ready to accept connections")
    view("provider", "python: can't open file 'x.py'")
    view("provider", json.dumps({"ts": 0, "level": "info", "logger": "l", "event": "mcp_connected", "server": "a"}))
    view("stack", "MCP server 'a' is not connected yet")

    shown = out.getvalue().splitlines()
    assert "Ready to accept" not in out.getvalue()
    assert "can't open file" not in out.getvalue()
    assert (tmp_path / "logs" / "redis.log").read_text() == "1234:M * Ready to accept connections\n"
    assert (tmp_path / "logs" / "provider.log").read_text() == "python: can't open file 'x.py'\n"
    assert shown[0] == f"[stack] redis's other output goes to {tmp_path / 'logs' / 'redis.log'}"
    assert shown[2].endswith("[provider] mcp_connected server=a")
    assert shown[3] == "[stack] MCP server 'a' is not connected yet"


def test_json_format_keeps_the_objects_and_names_the_child(tmp_path: Path) -> None:
    out = io.StringIO()
    view = LogView(tmp_path, "json", out)

    view("broker", json.dumps({"ts": 1, "level": "info", "logger": "l", "event": "starting"}))

    assert json.loads(out.getvalue()) == {
        "child": "broker",
        "ts": 1,
        "level": "info",
        "logger": "l",
        "event": "starting",
    }


def test_maka_version_prints_the_package_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "surfaces.cli.main", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )

    assert done.returncode == 0
    assert done.stdout.strip() == "maka 0.1.0"


def test_a_quiet_view_shows_only_warnings_until_the_stack_started_then_every_line(tmp_path: Path) -> None:
    out = _Tty()
    view = LogView(tmp_path, "human", out, quiet=True)

    view("redis", "1234:M * Ready to accept connections")
    view("broker", json.dumps({"ts": 0, "level": "info", "logger": "l", "event": "serving"}))
    view("provider", json.dumps({"ts": 0, "level": "warning", "logger": "l", "event": "mcp_connect_failed"}))
    view("stack", "MCP server 'a' is not connected yet")
    view.started()
    view("broker", json.dumps({"ts": 0, "level": "info", "logger": "l", "event": "invocation_started"}))

    shown = out.getvalue().splitlines()
    assert len(shown) == 3, shown
    assert shown[0].endswith("WARNING [provider] mcp_connect_failed")
    assert shown[1] == "[stack] MCP server 'a' is not connected yet"
    assert shown[2].endswith("INFO    [broker] invocation_started")
    assert (tmp_path / "logs" / "redis.log").read_text() == "1234:M * Ready to accept connections\n"


def test_a_servers_control_and_bidi_characters_in_a_log_line_never_reach_the_terminal(tmp_path: Path) -> None:
    out = _Tty()
    view = LogView(tmp_path, "human", out)
    hostile = "boom\x1b[2J\x07\u202ereversed\u200b\x9b31m"

    view("provider", json.dumps({"ts": 0, "level": "warning", "logger": "l", "event": "mcp_stderr", "line": hostile}))
    view("stack", f"interaction exited: {hostile}")

    shown = out.getvalue()
    assert not any(ch in shown for ch in "\x1b\x07\u202e\u200b\x9b")
    assert shown.count("boom") == 2
    assert "reversed" in shown
