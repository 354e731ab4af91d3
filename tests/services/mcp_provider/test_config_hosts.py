"""Other MCP hosts' config files read as they are: VS Code, Cursor, Windsurf, Cline, Claude, Gemini CLI.

Each host's format is detected by shape and file name, each variable form is expanded or refused with one
line naming it, and the example file of every host in ``examples/hosts/`` loads through the provider's loader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from services.mcp_provider.config import (
    Config,
    ConfigError,
    HostFormat,
    HttpServer,
    OAuthClient,
    Problem,
    StdioServer,
    check_config,
    detect_format,
    input_variable,
    missing_commands,
    read_config,
    workspace_folder,
)

ROOT = Path(__file__).resolve().parents[3]
HOSTS = ROOT / "examples" / "hosts"
ENVIRON = {
    "HOME": "/home/me",
    "LOG_LEVEL": "",
    "REMOTE_TOKEN": "canary-remote-7f3a",
    "LOCAL_API_KEY": "canary-local-1c9e",
    "MAKA_INPUT_GITHUB_TOKEN": "canary-input-55d0",
    "LINEAR_API_KEY": "canary-linear-0b2e",
    "TIME_ZONE": "Europe/Paris",
    "GITHUB_TOKEN": "canary-github-9a41",
}
"""What the example files need; every secret is a canary that must never appear in a recorded expansion."""


def _write(path: Path, document: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def _transports(config: Config) -> list[tuple[str, str]]:
    return [(server.name, server.transport_name) for server in config.servers]


@pytest.mark.parametrize(
    ("file", "host", "transports"),
    [
        ("claude-desktop.json", HostFormat.MCP_SERVERS, [("examples", "stdio"), ("filesystem", "stdio")]),
        ("claude-code.json", HostFormat.MCP_SERVERS, [("examples", "stdio"), ("remote", "http"), ("events", "sse")]),
        ("vscode-mcp.json", HostFormat.VSCODE, [("local", "stdio"), ("github", "http"), ("events", "sse")]),
        ("cursor-mcp.json", HostFormat.MCP_SERVERS, [("filesystem", "stdio"), ("linear", "http")]),
        ("windsurf.json", HostFormat.MCP_SERVERS, [("time", "stdio"), ("remote", "http")]),
        ("cline_mcp_settings.json", HostFormat.CLINE, [("time", "stdio"), ("docs", "http"), ("events", "sse")]),
        ("gemini-settings.json", HostFormat.GEMINI, [("github", "http"), ("events", "sse"), ("time", "stdio")]),
    ],
)
def test_every_hosts_example_file_loads_as_that_host_wrote_it(
    file: str, host: HostFormat, transports: list[tuple[str, str]]
) -> None:
    config = check_config(HOSTS / file, ENVIRON)

    assert config.format is host
    assert _transports(config) == transports
    recorded = "\n".join(str(variable) for variable in config.variables)
    assert not any(value in recorded for name, value in ENVIRON.items() if value.startswith("canary"))


def test_the_example_files_expand_each_hosts_variables() -> None:
    vscode = {s.name: s.transport for s in check_config(HOSTS / "vscode-mcp.json", ENVIRON).servers}
    cursor = {s.name: s.transport for s in check_config(HOSTS / "cursor-mcp.json", ENVIRON).servers}
    gemini = {s.name: s for s in check_config(HOSTS / "gemini-settings.json", ENVIRON).servers}
    windsurf = {s.name: s.transport for s in check_config(HOSTS / "windsurf.json", ENVIRON).servers}

    assert vscode["local"] == StdioServer("python", (f"{HOSTS}/server.py",), {"API_KEY": "canary-local-1c9e"})
    assert vscode["github"] == HttpServer(
        "https://api.githubcopilot.com/mcp/", {"Authorization": "Bearer canary-input-55d0"}, oauth=False
    )
    assert cursor["filesystem"] == StdioServer(
        "npx", ("-y", "@modelcontextprotocol/server-filesystem", str(HOSTS), "/home/me/notes")
    )
    assert gemini["github"].transport == HttpServer(
        "https://api.githubcopilot.com/mcp/", {"Authorization": "Bearer canary-github-9a41"}, oauth=False
    )
    assert gemini["github"].timeout_seconds == 30.0
    assert gemini["events"].transport == HttpServer("http://127.0.0.1:9001/sse", sse=True)
    assert gemini["events"].timeout_seconds == 5.0
    assert windsurf["remote"] == HttpServer(
        "https://mcp.example.com/mcp", {"Authorization": "Bearer canary-remote-7f3a"}, oauth=False
    )


def test_a_vscode_file_names_its_problems_under_servers_and_refuses_an_input_it_cannot_prompt_for(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / ".vscode" / "mcp.json",
        {
            "inputs": [{"type": "promptString", "id": "api-key", "description": "Key", "password": True}],
            "servers": {"api": {"type": "http", "url": "https://h/mcp", "headers": {"X-Key": "${input:api-key}"}}},
        },
    )

    with pytest.raises(ConfigError) as caught:
        check_config(path, environ={})

    assert str(caught.value) == (
        "servers.api.headers.X-Key: ${input:api-key} is a VS Code prompt Maka cannot show at start-up:"
        " set MAKA_INPUT_API_KEY in the environment (or write ${env:NAME})"
    )
    assert check_config(path, {"MAKA_INPUT_API_KEY": "k"}).servers[0].transport == HttpServer(
        "https://h/mcp", {"X-Key": "k"}
    )


def test_a_vscode_file_is_no_longer_refused_for_lacking_mcp_servers() -> None:
    config = read_config({"servers": {"t": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}, {})

    assert config.format is HostFormat.VSCODE
    assert config.servers_key == "servers"
    assert config.servers[0].transport == StdioServer("uvx", ("mcp-server-time",))


def test_a_file_with_both_servers_and_mcp_servers_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        read_config({"servers": {}, "mcpServers": {"a": {"command": "x"}}}, {})

    assert str(caught.value) == "$: has both servers (VS Code) and mcpServers: keep one"


def test_a_file_with_neither_key_points_at_both_spellings() -> None:
    with pytest.raises(ConfigError) as caught:
        read_config({"inputs": []}, {})

    assert caught.value.problems == (Problem("mcpServers", "must be an object (or servers, as VS Code writes)"),)


@pytest.mark.parametrize(
    ("folder", "expected"),
    [(".vscode", "project"), (".cursor", "project"), (".gemini", "project"), ("config", "config")],
)
def test_workspace_folder_is_the_project_above_a_hosts_folder_else_the_files_own_folder(
    tmp_path: Path, folder: str, expected: str
) -> None:
    path = _write(
        tmp_path / "project" / folder / "mcp.json",
        {"servers": {"s": {"command": "node", "args": ["${workspaceFolder}/s.js", "${workspaceFolderBasename}"]}}},
    )
    base = tmp_path.resolve() / "project" if expected == "project" else tmp_path.resolve() / "project" / "config"

    [server] = check_config(path, {}).servers

    assert workspace_folder(path) == base
    assert server.transport == StdioServer("node", (f"{base}/s.js", base.name))


def test_env_user_home_and_path_separator_expand_in_command_args_cwd_env_url_and_headers() -> None:
    config = read_config(
        {
            "mcpServers": {
                "local": {
                    "command": "${userHome}/bin/srv",
                    "args": ["--x=${env:X}", "${env:MISSING:-d}", "a${/}b", "${pathSeparator}"],
                    "cwd": "${env:X}",
                    "env": {"K": "${env:X}"},
                },
                "remote": {"url": "https://${env:X}/mcp", "headers": {"H": "${X}"}},
            }
        },
        {"HOME": "/home/u", "X": "val"},
    )

    assert config.servers[0].transport == StdioServer(
        "/home/u/bin/srv", ("--x=val", "d", f"a{os.sep}b", os.sep), {"K": "val"}, "val"
    )
    assert config.servers[1].transport == HttpServer("https://val/mcp", {"H": "val"})
    assert [str(v) for v in config.variables] == [
        "mcpServers.local.command: ${userHome} → /home/u",
        "mcpServers.local.args[0]: ${env:X} → set",
        "mcpServers.local.args[1]: ${env:MISSING:-…} → unset, default used",
        f"mcpServers.local.args[2]: ${{/}} → {os.sep}",
        f"mcpServers.local.args[3]: ${{pathSeparator}} → {os.sep}",
        "mcpServers.local.cwd: ${env:X} → set",
        "mcpServers.local.env.K: ${env:X} → set",
        "mcpServers.remote.url: ${env:X} → set",
        "mcpServers.remote.headers.H: ${X} → set",
    ]


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("${command:pickFile}", "${command:pickFile} is not expanded by Maka"),
        ("${file:/run/secrets/token}", "${file:/run/secrets/token} is not expanded by Maka"),
        ("${config:editor.fontSize}", "${config:editor.fontSize} is not expanded by Maka"),
        (
            "${env:UNSET_X}",
            "${env:UNSET_X} is not set in the environment (write ${env:UNSET_X:-default} for a default)",
        ),
        ("${workspaceFolder}", "${workspaceFolder} needs the config file's location (read it from a file)"),
    ],
)
def test_every_variable_form_maka_cannot_expand_is_one_problem_naming_it(value: str, line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_config({"mcpServers": {"s": {"command": "node", "args": [value]}}}, {})

    assert len(caught.value.problems) == 1
    assert str(caught.value).startswith(f"mcpServers.s.args[0]: {line}")


def test_bare_dollar_variables_expand_in_gemini_files_and_are_warned_about_elsewhere() -> None:
    environ = {"HOME": "/home/g", "TOKEN": "t0k"}
    gemini = read_config(
        {"ui": {}, "mcpServers": {"s": {"command": "node", "args": ["$HOME/x", "${HOME}"], "env": {"T": "$TOKEN"}}}},
        environ,
    )
    other = read_config({"mcpServers": {"s": {"command": "node", "args": ["$HOME/x", "$NOT_SET_Z"]}}}, environ)

    assert gemini.servers[0].transport == StdioServer("node", ("/home/g/x", "/home/g"), {"T": "t0k"})
    assert gemini.warnings == []
    assert other.servers[0].transport == StdioServer("node", ("$HOME/x", "$NOT_SET_Z"))
    assert [str(w) for w in other.warnings] == [
        "mcpServers.s.args[0]: $HOME is not expanded (only Gemini CLI settings expand $VAR): write ${HOME}"
    ]
    with pytest.raises(ConfigError) as caught:
        read_config({"ui": {}, "mcpServers": {"s": {"command": "node", "args": ["$NOT_SET_Z"]}}}, environ)
    assert str(caught.value) == "mcpServers.s.args[0]: $NOT_SET_Z is not set in the environment"


@pytest.mark.parametrize(
    ("document", "source", "host"),
    [
        ({"servers": {}}, None, HostFormat.VSCODE),
        ({"mcpServers": {"a": {"httpUrl": "https://h/mcp"}}}, None, HostFormat.GEMINI),
        ({"theme": "Dracula", "mcpServers": {}}, None, HostFormat.GEMINI),
        ({"mcpServers": {}}, Path("/p/.gemini/settings.json"), HostFormat.GEMINI),
        ({"mcpServers": {}}, Path("/p/settings.json"), HostFormat.MCP_SERVERS),
        ({"mcpServers": {}}, Path("/x/cline_mcp_settings.json"), HostFormat.CLINE),
        ({"mcpServers": {"a": {"url": "https://h/sse"}}}, Path("/p/.cursor/mcp.json"), HostFormat.MCP_SERVERS),
    ],
)
def test_the_format_is_detected_by_shape_then_file_name(
    document: dict[str, object], source: Path | None, host: HostFormat
) -> None:
    assert detect_format(document, source) is host


def test_gemini_url_is_sse_http_url_is_streamable_http_and_every_timeout_is_milliseconds() -> None:
    config = read_config(
        {
            "mcpServers": {
                "h": {"httpUrl": "https://h/mcp", "timeout": 2000},
                "s": {"url": "https://h/sse", "timeout": 600000},
                "t": {"type": "http", "url": "https://h/mcp"},
                "o": {"httpUrl": "https://h/mcp", "oauth": {"enabled": True, "clientId": "c", "scopes": ["a", "b"]}},
                "off": {"httpUrl": "https://h/mcp", "oauth": {"enabled": False, "tokenUrl": "https://h/token"}},
            }
        },
        {},
    )

    by_name = {s.name: s for s in config.servers}
    assert by_name["h"].transport == HttpServer("https://h/mcp")
    assert by_name["h"].timeout_seconds == 2.0
    assert by_name["s"].transport == HttpServer("https://h/sse", sse=True)
    assert by_name["s"].timeout_seconds == 600.0
    assert by_name["t"].transport_name == "http"
    assert by_name["o"].transport == HttpServer("https://h/mcp", oauth_client=OAuthClient("c", None, "a b"))
    assert by_name["off"].transport == HttpServer("https://h/mcp", oauth=False)
    assert [str(w) for w in config.warnings] == ["mcpServers.off.oauth.tokenUrl: ignored (unknown key)"]


def test_a_gemini_entry_with_both_urls_is_one_line_naming_them() -> None:
    with pytest.raises(ConfigError) as caught:
        read_config({"mcpServers": {"a": {"url": "https://h/sse", "httpUrl": "https://h/mcp"}}}, {})

    assert str(caught.value) == "mcpServers.a: has both url and httpUrl"


def test_windsurf_server_url_is_streamable_http_and_clines_url_without_type_is_sse(tmp_path: Path) -> None:
    windsurf = read_config({"mcpServers": {"w": {"serverUrl": "https://h/mcp"}}}, {})
    cline = check_config(_write(tmp_path / "cline_mcp_settings.json", {"mcpServers": {"c": {"url": "https://h/e"}}}))
    elsewhere = check_config(_write(tmp_path / "mcp.json", {"mcpServers": {"c": {"url": "https://h/e"}}}))

    assert windsurf.servers[0].transport == HttpServer("https://h/mcp")
    assert cline.servers[0].transport == HttpServer("https://h/e", sse=True)
    assert elsewhere.servers[0].transport == HttpServer("https://h/e")
    assert elsewhere.warnings == []
    renamed = read_config(
        {"mcpServers": {"c": {"url": "https://h/sse"}, "t": {"type": "http", "url": "https://h/sse"}}}
    )
    assert renamed.servers[0].transport == HttpServer("https://h/sse")
    assert [str(w) for w in renamed.warnings] == [
        'mcpServers.c.url: read as Streamable HTTP: write "type": "sse" for an SSE server'
    ]
    with pytest.raises(ConfigError) as caught:
        read_config({"mcpServers": {"w": {"serverUrl": "ftp://h"}}}, {})
    assert str(caught.value) == "mcpServers.w.serverUrl: must be an http:// or https:// URL"


def test_a_copys_origin_decides_its_format_and_workspace_folder(tmp_path: Path) -> None:
    origin = _write(
        tmp_path / "p" / ".gemini" / "settings.json",
        {"mcpServers": {"e": {"url": "https://h/sse"}, "s": {"command": "n", "args": ["${workspaceFolder}"]}}},
    )
    copy = tmp_path / "state" / "mcp.applied.json"
    copy.parent.mkdir()
    copy.write_text(origin.read_text())

    config = check_config(copy, {}, origin=origin)

    assert config.format is HostFormat.GEMINI
    assert _transports(config) == [("e", "sse"), ("s", "stdio")]
    assert config.servers[1].transport == StdioServer("n", (str(tmp_path.resolve() / "p"),))


def test_env_file_values_are_read_from_the_workspace_folder_and_env_overrides_them(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text('# keys\nexport A=1\nB="two words"\nC=3\n\n')
    path = _write(
        tmp_path / ".vscode" / "mcp.json",
        {"servers": {"s": {"command": "node", "envFile": "${workspaceFolder}/.env", "env": {"C": "env"}}}},
    )
    relative = _write(tmp_path / ".cursor" / "mcp.json", {"mcpServers": {"s": {"command": "n", "envFile": ".env"}}})
    missing = _write(tmp_path / "mcp.json", {"mcpServers": {"s": {"command": "n", "envFile": "nope.env"}}})

    config = check_config(path, {})

    assert config.servers[0].transport == StdioServer("node", env={"A": "1", "B": "two words", "C": "env"})
    assert "1" in config.servers[0].secrets()
    assert check_config(relative, {}).servers[0].transport == StdioServer(
        "n", env={"A": "1", "B": "two words", "C": "3"}
    )
    with pytest.raises(ConfigError) as caught:
        check_config(missing, {})
    assert str(caught.value) == (
        f"mcpServers.s.envFile: cannot read {tmp_path.resolve() / 'nope.env'}: No such file or directory"
    )


def test_input_ids_map_to_maka_input_variables_in_capitals() -> None:
    assert input_variable("api-key") == "MAKA_INPUT_API_KEY"
    assert input_variable("githubToken") == "MAKA_INPUT_GITHUBTOKEN"


def test_a_stdio_command_not_on_path_is_a_warning_naming_it(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "present-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    config = read_config(
        {
            "mcpServers": {
                "gone": {"command": "maka-test-no-such-command"},
                "here": {"command": "present-tool"},
                "py": {"command": "python"},
                "rel": {"command": "./missing.sh", "cwd": str(tmp_path)},
                "off": {"command": "maka-test-no-such-command", "disabled": True},
                "url": {"url": "https://h/mcp"},
            }
        },
        {},
    )

    assert missing_commands(config, {"PATH": str(tool.parent)}) == [
        Problem("mcpServers.gone.command", "'maka-test-no-such-command' not found on PATH"),
        Problem("mcpServers.rel.command", "'./missing.sh' not found"),
    ]
