"""``maka config check`` as a real process on every host's example file: the format it was read as, each
variable and how it expanded (never a value), commands missing from ``PATH``, one line per refusal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import MAKA, ROOT

HOSTS = ROOT / "examples" / "hosts"
ENVIRON = {
    "PATH": "",  # only the interpreter's own folder is searched: `python` and `uvx` are found, `npx` is not
    "HOME": "/home/me",
    "LOG_LEVEL": "",
    "REMOTE_TOKEN": "canary-remote-7f3a",
    "LOCAL_API_KEY": "canary-local-1c9e",
    "MAKA_INPUT_GITHUB_TOKEN": "canary-input-55d0",
    "LINEAR_API_KEY": "canary-linear-0b2e",
    "TIME_ZONE": "Europe/Paris",
    "GITHUB_TOKEN": "canary-github-9a41",
}
GEMINI = "format: Gemini CLI settings.json (httpUrl = Streamable HTTP, url = SSE, timeout in ms)"
AUTO_APPROVE = "ignored (used by other MCP hosts, not by Maka)"
EXPECTED = {
    "claude-desktop.json": [
        "warning: mcpServers.filesystem.command: 'npx' not found on PATH",
        "examples: stdio, era auto",
        "filesystem: stdio, era auto",
    ],
    "claude-code.json": [
        "examples: stdio, era auto",
        "  env.LOG_LEVEL: ${LOG_LEVEL:-…} → set, empty, default used",
        "remote: http, era auto",
        "  url: ${REMOTE_MCP_URL:-…} → unset, default used",
        "  headers.Authorization: ${REMOTE_TOKEN} → set",
        "events: sse, era auto",
    ],
    "vscode-mcp.json": [
        "format: VS Code mcp.json (servers, inputs)",
        "local: stdio, era auto",
        f"  args[0]: ${{workspaceFolder}} → {HOSTS}",
        "  env.API_KEY: ${env:LOCAL_API_KEY} → set",
        "github: http, era auto",
        "  headers.Authorization: ${input:github-token} → MAKA_INPUT_GITHUB_TOKEN set",
        "events: sse, era auto",
    ],
    "cursor-mcp.json": [
        "warning: mcpServers.filesystem.command: 'npx' not found on PATH",
        "filesystem: stdio, era auto",
        f"  args[2]: ${{workspaceFolder}} → {HOSTS}",
        "  args[3]: ${userHome} → /home/me",
        "linear: http, era auto",
        "  headers.Authorization: ${env:LINEAR_API_KEY} → set",
    ],
    "windsurf.json": [
        "time: stdio, era auto",
        "  args[1]: ${env:TIME_ZONE} → set",
        "remote: http, era auto",
        "  headers.Authorization: ${env:REMOTE_TOKEN} → set",
    ],
    "cline_mcp_settings.json": [
        f"warning: mcpServers.time.autoApprove: {AUTO_APPROVE}",
        f"warning: mcpServers.docs.autoApprove: {AUTO_APPROVE}",
        f"warning: mcpServers.events.autoApprove: {AUTO_APPROVE}",
        "format: Cline cline_mcp_settings.json (url without type = SSE)",
        "time: stdio, era auto, timeout 60 s",
        "docs: http, era auto",
        "events: sse, era auto, disabled",
    ],
    "gemini-settings.json": [
        "warning: mcp: ignored (Gemini CLI's server lists; Maka connects every server)",
        f"warning: mcpServers.github.trust: {AUTO_APPROVE}",
        f"warning: mcpServers.time.includeTools: {AUTO_APPROVE}",
        GEMINI,
        "github: http, era auto, timeout 30 s",
        "  headers.Authorization: $GITHUB_TOKEN → set",
        "events: sse, era auto, timeout 5 s",
        "time: stdio, era auto",
        "  cwd: ${HOME} → set",
    ],
}


def _check(path: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MAKA, "config", "check", str(path)], capture_output=True, text=True, cwd=ROOT, env=environ, timeout=60
    )


@pytest.mark.parametrize("file", sorted(EXPECTED))
def test_config_check_reads_every_hosts_example_and_shows_how_each_variable_expanded(file: str) -> None:
    path = HOSTS / file

    ran = _check(path, ENVIRON)

    assert ran.returncode == 0, ran.stderr
    servers = sum(1 for line in EXPECTED[file] if not line.startswith(("warning:", "format:", " ")))
    assert ran.stdout.splitlines() == [*EXPECTED[file], f"{path}: {servers} servers, valid"]
    assert "canary" not in ran.stdout + ran.stderr


def test_config_check_refuses_a_vscode_input_or_variable_it_cannot_expand_with_one_line_each() -> None:
    path = HOSTS / "vscode-mcp.json"

    ran = _check(path, {"PATH": "", "HOME": "/home/me"})

    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [
        f"CONFIG_INVALID: {path}: servers.local.env.API_KEY: ${{env:LOCAL_API_KEY}} is not set in the environment"
        " (write ${env:LOCAL_API_KEY:-default} for a default)",
        f"CONFIG_INVALID: {path}: servers.github.headers.Authorization: ${{input:github-token}} is a VS Code prompt"
        " Maka cannot show at start-up: set MAKA_INPUT_GITHUB_TOKEN in the environment (or write ${env:NAME})",
    ]
    assert ran.stdout == ""


def test_config_check_names_a_variable_form_of_another_host_that_maka_does_not_expand(tmp_path: Path) -> None:
    path = tmp_path / "mcp_config.json"
    path.write_text('{"mcpServers": {"w": {"serverUrl": "https://h/mcp", "headers": {"K": "${file:/run/key}"}}}}')

    ran = _check(path, {"PATH": ""})

    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [
        f"CONFIG_INVALID: {path}: mcpServers.w.headers.K: ${{file:/run/key}} is not expanded by Maka (it expands"
        " ${VAR}, ${VAR:-default}, ${env:VAR}, ${userHome}, ${workspaceFolder}, ${input:ID})"
    ]


def test_config_check_reads_a_vscode_file_with_comments_and_trailing_commas_as_vscode_does(tmp_path: Path) -> None:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    path = folder / "mcp.json"
    path.write_text(
        "{\n"
        "  // the project's servers\n"
        '  "servers": {\n'
        '    "fs": {"type": "stdio", "command": "python", "args": ["-m", "x", "http://h//path"],},\n'
        "    /* more later */\n"
        "  },\n"
        "}\n"
    )

    ran = _check(path, ENVIRON)

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == f"{path}: 1 server, valid"


def test_a_json_error_after_a_comment_still_names_the_files_own_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  // note\n  "mcpServers": {"a": {"command": "x"}\n}\n')

    ran = _check(path, ENVIRON)

    assert ran.returncode == 2
    assert "line 5" in ran.stderr
