"""The ``mcpServers`` configuration format with Maka's optional ``era``: exact shapes, exact errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.mcp_provider.config import (
    ConfigError,
    Era,
    HttpServer,
    ServerConfig,
    StdioServer,
    load_config,
    parse_config,
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
        ({"mcpServers": {}, "extra": 1}, "extra"),
        ({"mcpServers": {"a": "python"}}, "mcpServers.a"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "mcpServers.a b"),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}, "mcpServers.a.env"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"command": "x", "headers": {}}}}, "mcpServers.a.headers"),
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
