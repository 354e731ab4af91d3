"""The MCP front door driven by other official clients than the Python SDK: the TypeScript SDK client
(``@modelcontextprotocol/sdk``, which speaks 2025-11-25 at its newest) and the MCP Inspector's CLI mode, against a
real ``maka up`` with the example server; the deploy form is answered with ``maka answer``."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.helpers.cli import maka
from tests.surfaces.mcp.stack import NODE, TS_CLIENT, Up, inspector, maka_up, node_env, run_node

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

DEPLOY = "examples.deploy"
FORM_ID = re.compile(r"\(([^()\s]+)\): answer it")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    async with maka_up(tmp_path_factory.mktemp("real-clients")) as running:
        yield running


async def test_the_typescript_client_lists_the_example_tools_at_2025_11_25(up: Up) -> None:
    code, out, err = await run_node(str(TS_CLIENT), up.endpoints.mcp, "list", env=node_env(headers=up.auth))
    assert code == 0, err
    listed = json.loads(out.splitlines()[-1])
    assert listed["protocolVersion"] == "2025-11-25"
    assert {DEPLOY, "examples.ping"} <= set(listed["tools"])


async def test_the_typescript_client_calls_ping_and_gets_pong(up: Up) -> None:
    code, out, err = await run_node(
        str(TS_CLIENT), up.endpoints.mcp, "call", "examples.ping", "{}", env=node_env(headers=up.auth)
    )
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result == {"protocolVersion": "2025-11-25", "isError": False, "text": "pong"}


async def test_the_typescript_client_deploys_to_staging_after_the_form_is_answered_with_maka_answer(up: Up) -> None:
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        str(TS_CLIENT),
        up.endpoints.mcp,
        "call",
        DEPLOY,
        json.dumps({"artifact": "web-ts"}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=node_env(headers=up.auth),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        async with asyncio.timeout(90):
            interaction_id = None
            while interaction_id is None:
                line = await process.stdout.readline()
                assert line, (await process.stderr.read()).decode()
                found = FORM_ID.search(json.loads(line).get("progress", ""))
                interaction_id = found.group(1) if found else None
            values = json.dumps({"environment": "staging", "confirm": True})
            ran = await maka("answer", interaction_id, "accept", "--values", values, state_dir=up.state_dir)
            assert ran.code == 0, ran.err
            rest, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    result = json.loads(rest.decode().splitlines()[-1])
    assert result == {"protocolVersion": "2025-11-25", "isError": False, "text": "Deployed web-ts to staging."}


async def test_the_inspector_cli_lists_the_example_tools(up: Up, tmp_path: Path) -> None:
    code, out, err = await inspector(up.endpoints.mcp, "--method", "tools/list", tmp=tmp_path, headers=up.auth)
    assert code == 0, err
    names = {tool["name"] for tool in json.loads(out)["tools"]}
    assert {DEPLOY, "examples.ping"} <= names


async def test_the_inspector_cli_calls_ping_and_gets_pong(up: Up, tmp_path: Path) -> None:
    code, out, err = await inspector(
        up.endpoints.mcp, "--method", "tools/call", "--tool-name", "examples.ping", tmp=tmp_path, headers=up.auth
    )
    assert code == 0, err
    result = json.loads(out)
    assert not result.get("isError")
    assert [block["text"] for block in result["content"] if block["type"] == "text"] == ["pong"]
