"""A server's JSON-RPC error that echoes the ``requestState`` JSON-escaped never carries it to the caller, a log
or the state dir (RFC criterion 12; docs/design.md#requeststate). The stack runs as ``maka up`` runs it, with
:mod:`tests.fixtures.mcp_servers.echoing_server`; ``maka call`` and ``maka answer`` are real processes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.helpers.stack import ROOT, running_stack, wait_for_pending

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

MAKA = [sys.executable, "-m", "surfaces.cli.main"]


async def test_a_server_error_echoing_the_request_state_json_escaped_shows_the_placeholder_not_the_state(
    tmp_path: Path,
) -> None:
    mint_log = tmp_path / "minted.log"
    config = tmp_path / "mcp.json"
    args = ["-m", "tests.fixtures.mcp_servers.echoing_server", "--mint-log", str(mint_log)]
    server = {"command": "python", "args": args}
    config.write_text(json.dumps({"mcpServers": {"echo": server}}), encoding="utf-8")
    async with running_stack(tmp_path, config=config) as running:
        state_dir = str(running.stack.state_dir)
        call = await asyncio.create_subprocess_exec(
            *MAKA, "call", "echo:ask", "--state-dir", state_dir,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        form = await wait_for_pending(running.endpoints.interaction, timeout=60)
        nonce = mint_log.read_text(encoding="utf-8").split()[-1]
        answered = await asyncio.create_subprocess_exec(
            *MAKA, "answer", form.interaction_id, "accept", "--values", '{"value": "v"}', "--state-dir", state_dir,
            cwd=ROOT,
        )  # fmt: skip
        assert await answered.wait() == 0
        async with asyncio.timeout(60):
            _out, err_bytes = await call.communicate()
        err = err_bytes.decode()
        assert call.returncode == 3, err
        assert "SERVER_ERROR: MCP error -32603: Cannot resume" in err
        assert "[requestState]" in err
        assert nonce not in err
        assert nonce not in running.all_logs()
        for path in running.stack.state_dir.rglob("*"):
            if path.is_file():
                assert nonce.encode() not in path.read_bytes(), path
