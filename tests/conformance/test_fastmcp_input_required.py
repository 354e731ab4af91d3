"""A FastMCP 4 server (PyPI ``fastmcp``) whose Tool returns ``input_required``, through the whole stack as
processes, answered through a real surface: ``maka call`` waits, ``maka pending`` shows the Host-owned
form, ``maka answer`` accepts it, and the same logical call completes with the answer and the server's
``requestState`` echoed back (the server reports it)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.helpers.stack import ROOT, running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def _maka(state: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "surfaces.cli.main", *args, "--state-dir", str(state),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_fastmcp_tool_asking_for_input_is_answered_in_the_cli_and_completes(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": ["-m", "tests.fixtures.mcp_servers.fastmcp_deploy"], "cwd": str(ROOT)}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"fm": server}}))
    async with running_stack(tmp_path, config=config):
        state = tmp_path / "state"
        call = asyncio.create_task(_maka(state, "call", "fm:deploy", "--args", '{"artifact":"build-42"}'))
        async with asyncio.timeout(60):
            while True:
                code, out, _ = await _maka(state, "pending", "--json")
                forms = json.loads(out) if code == 0 else []
                if forms:
                    break
        [form] = forms
        assert form["message"] == "Where should build-42 go?"
        assert {field["name"] for field in form["fields"]} == {"environment", "confirm"}
        answered = await _maka(state, "answer", form["id"], "accept", "--values",
                               '{"environment":"production","confirm":true}')  # fmt: skip
        assert answered[0] == 0, answered
        code, out, err = await call
    assert code == 0, err
    assert out.strip() == "Deployed build-42 to production (state deploy:build-42)."
