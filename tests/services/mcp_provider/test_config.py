"""The ``mcpServers`` configuration format with Maka's optional ``era``: exact shapes, exact errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.mcp_provider.config import (
    ConfigError,
    Era,
    HttpServer,
    Problem,
    ServerConfig,
    StdioServer,
    check_config,
    load_config,
    parse_config,
    read_config,
)


def test_stdio_and_http_servers_parse_in_file_order_with_defaults() -> None:
    servers = parse_config(
        {
            "mcpServers": {
                "local": {"command": "python", "args": ["srv.py"], "env": {"K": "V"}, "cwd": "/tmp"},
                "remote": {"url": "https://example.com/mcp", "headers": {"X-Key": "v"}, "era": "modern"},
                "old": {"type": "stdio", "command": "node", "era": "legacy"},
            }
        }
    )

    assert servers == [
        ServerConfig("local", StdioServer("python", ("srv.py",), {"K": "V"}, "/tmp"), Era.AUTO),
        ServerConfig("remote", HttpServer("https://example.com/mcp", {"X-Key": "v"}), Era.MODERN),
        ServerConfig("old", StdioServer("node"), Era.LEGACY),
    ]


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ([], "$"),
        ({"mcpServers": []}, "mcpServers"),
        ({"mcpServers": {"a": "python"}}, "mcpServers.a"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "mcpServers.a b"),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}, "mcpServers.a.env"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"command": "x", "disabled": "no"}}}, "mcpServers.a.disabled"),
        ({"mcpServers": {"a": {"command": "x", "timeout": -1}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"url": "http://h", "type": "websocket"}}}, "mcpServers.a.type"),
        ({"mcpServers": {"a": {"url": "http://h/${MAKA_TEST_UNSET_VAR}"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"url": "http://h", "era": "new"}}}, "mcpServers.a.era"),
        ({"mcpServers": {"a": {"url": "http://h", "type": "stdio"}}}, "mcpServers.a.type"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a"),
    ],
)
def test_every_shape_error_names_its_json_path(document: object, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(document)

    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


def test_load_config_reads_a_file_and_reports_bad_json_as_a_config_error(tmp_path: Path) -> None:
    good = tmp_path / "mcp.json"
    good.write_text(json.dumps({"mcpServers": {"x": {"url": "http://127.0.0.1:1/mcp"}}}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")

    assert [s.name for s in load_config(good)] == ["x"]
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert caught.value.path == "$"


def test_keys_other_mcp_hosts_write_are_honoured_or_warned_about_and_ignored() -> None:
    config = read_config(
        {
            "mcpServers": {
                "cline": {
                    "command": "npx",
                    "args": ["-y", "pkg"],
                    "disabled": False,
                    "autoApprove": [],
                    "alwaysAllow": ["x"],
                    "timeout": 60,
                    "headers": {"X": "y"},
                },
                "remote": {"type": "sse", "url": "https://h/sse", "disabled": True},
                "vscode": {"type": "streamable-http", "url": "https://h/mcp", "comand": "typo"},
                "roo": {"transportType": "streamableHttp", "url": "https://h/mcp"},
                "gemini": {"command": "node", "timeout": 60000},
            },
            "inputs": [],
        }
    )

    by_name = {s.name: s for s in config.servers}
    assert by_name["cline"] == ServerConfig(
        "cline", StdioServer("npx", ("-y", "pkg")), Era.AUTO, disabled=False, timeout_seconds=60.0
    )
    assert by_name["remote"].transport == HttpServer("https://h/sse", sse=True)
    assert by_name["remote"].disabled
    assert by_name["remote"].transport_name == "sse"
    assert by_name["vscode"].transport_name == "http"
    assert by_name["roo"].transport == HttpServer("https://h/mcp")
    assert by_name["gemini"].timeout_seconds == 60.0
    assert [str(w) for w in config.warnings] == [
        "inputs: ignored (unknown key)",
        "mcpServers.cline.alwaysAllow: ignored (used by other MCP hosts, not by Maka)",
        "mcpServers.cline.autoApprove: ignored (used by other MCP hosts, not by Maka)",
        "mcpServers.cline.headers: ignored (only for url servers)",
        "mcpServers.vscode.comand: ignored (unknown key)",
        "mcpServers.gemini.timeout: read as milliseconds (60 s)",
    ]


def test_variables_expand_in_env_headers_url_and_args_with_defaults() -> None:
    environ = {"TOKEN": "s3cret-token", "HOST": "h.example", "EMPTY": ""}
    servers = parse_config(
        {
            "mcpServers": {
                "local": {
                    "command": "python",
                    "args": ["--host=${HOST}", "${MISSING:-fallback}", "$HOME-literal", "${EMPTY:-used}"],
                    "env": {"API_KEY": "${TOKEN}", "PLAIN": "x${EMPTY}y"},
                },
                "remote": {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            }
        },
        environ,
    )

    assert servers[0].transport == StdioServer(
        "python", ("--host=h.example", "fallback", "$HOME-literal", "used"), {"API_KEY": "s3cret-token", "PLAIN": "xy"}
    )
    assert servers[1].transport == HttpServer(
        "https://h.example/mcp", {"Authorization": "Bearer s3cret-token"}, oauth=False
    )
    assert "s3cret-token" in servers[1].secrets()


def test_every_problem_of_a_bad_file_is_one_line_naming_its_path_never_a_value(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": {"command": "x", "env": {"K": "${NOT_SET_ANYWHERE}"}},
                    "b": {"url": "ftp://secret-host"},
                    "c": {"command": "y", "url": "http://z"},
                }
            }
        )
    )

    with pytest.raises(ConfigError) as caught:
        check_config(path, environ={})

    assert caught.value.problems == (
        Problem(
            "mcpServers.a.env.K",
            "${NOT_SET_ANYWHERE} is not set in the environment (write ${NOT_SET_ANYWHERE:-default} for a default)",
        ),
        Problem("mcpServers.b.url", "must be an http:// or https:// URL"),
        Problem("mcpServers.c", "has both command and url"),
    )
    assert "secret-host" not in str(caught.value)
    assert len(str(caught.value).splitlines()) == 3


def test_bad_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {\n  "a": {"command" "x"}\n}}')  # a missing colon (trailing commas are read)

    with pytest.raises(ConfigError) as caught:
        check_config(path)

    assert str(caught.value).startswith("$: not valid JSON: ")
    assert "line 2 column" in str(caught.value)
