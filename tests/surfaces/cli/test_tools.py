"""``maka tools`` and ``maka call``'s unknown-Tool hint, against the real broker and Interaction service
(real redis-server) with a synthetic provider registering Tools over a real ``Connect`` stream; and
every command's quiet exit when its stdout was closed by the reader (``maka pending | head -1``)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from maka.broker.v1 import broker_pb2
from stack.state_dir import Endpoints, write_endpoints
from tests.helpers.broker import BrokerStack, deploy_tool, start_broker, start_interaction

MAKA = [sys.executable, "-m", "surfaces.cli.main"]
ROOT = Path(__file__).resolve().parents[3]
RUN_TIMEOUT = 60.0

PING = broker_pb2.ToolDescriptor(
    name="ping",
    description="Answer pong\nsecond line is not shown",
    input_schema_json='{"type":"object","properties":{}}',
    claimed_server="examples",
)


@pytest.fixture
async def registered(redis_url: str, tmp_path: Path) -> AsyncIterator[tuple[BrokerStack, Path]]:
    """A real broker with ``examples:deploy`` and ``examples:ping`` registered; endpoints.json in tmp_path."""
    interaction_settings, interaction = await start_interaction(redis_url)
    broker_settings, broker, app = await start_broker(f"127.0.0.1:{interaction.port}")
    stack = BrokerStack(interaction_settings, interaction, broker_settings, broker, app)
    try:
        await stack.provider(tools=[deploy_tool(), PING])
        write_endpoints(tmp_path, Endpoints(interaction=stack.interaction_target, broker=stack.broker_target))
        yield stack, tmp_path
    finally:
        await stack.aclose()


async def _maka(*argv: str, stdout: int = asyncio.subprocess.PIPE) -> tuple[int, str, str]:
    """Run ``maka ARGV`` as a process (bounded); returns (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        *MAKA, *argv, stdout=stdout, stderr=asyncio.subprocess.PIPE, cwd=ROOT
    )
    async with asyncio.timeout(RUN_TIMEOUT):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, (out or b"").decode(), err.decode()


async def test_tools_lists_each_qualified_name_with_the_first_line_of_its_description(
    registered: tuple[BrokerStack, Path],
) -> None:
    _, state_dir = registered

    code, out, err = await _maka("tools", "--state-dir", str(state_dir))

    assert (code, err) == (0, "")
    assert out.splitlines() == ["examples:deploy  Deploy an artifact", "examples:ping  Answer pong"]


async def test_tools_json_gives_name_description_and_the_parsed_input_schema(
    registered: tuple[BrokerStack, Path],
) -> None:
    _, state_dir = registered

    code, out, _ = await _maka("tools", "--json", "--state-dir", str(state_dir))

    assert code == 0
    tools = json.loads(out)
    assert [tool["name"] for tool in tools] == ["examples:deploy", "examples:ping"]
    assert tools[0]["description"] == "Deploy an artifact"
    assert tools[0]["inputSchema"] == {"type": "object", "properties": {"artifact": {"type": "string"}}}


async def test_tools_without_a_stack_exits_3_with_no_stack(tmp_path: Path) -> None:
    code, out, err = await _maka("tools", "--state-dir", str(tmp_path / "nothing"))

    assert (code, out) == (3, "")
    assert err.startswith("NO_STACK: no running stack")


async def test_a_dotted_tool_name_is_a_usage_error_that_suggests_the_colon_name(
    registered: tuple[BrokerStack, Path],
) -> None:
    _, state_dir = registered

    code, out, err = await _maka("call", "examples.deploy", "--state-dir", str(state_dir))

    assert (code, out) == (2, "")
    assert err.strip().endswith("got 'examples.deploy'; did you mean examples:deploy?")


async def test_calling_an_unknown_tool_prints_unknown_tool_did_you_mean_then_the_known_tool_names(
    registered: tuple[BrokerStack, Path],
) -> None:
    _, state_dir = registered

    code, out, err = await _maka("call", "examples:deplo", "--state-dir", str(state_dir))

    assert (code, out) == (3, "")
    lines = err.splitlines()
    failure = next(i for i, line in enumerate(lines) if line.startswith("UNKNOWN_TOOL: "))
    assert "FAILURE_CODE_" not in err
    assert lines[failure + 1] == "did you mean examples:deploy?"
    assert lines[failure + 2] == "known Tools: examples:deploy, examples:ping"


async def test_an_unknown_tool_like_no_known_one_gets_no_suggestion(registered: tuple[BrokerStack, Path]) -> None:
    _, state_dir = registered

    code, _, err = await _maka("call", "weather:forecast", "--state-dir", str(state_dir))

    assert code == 3
    assert "did you mean" not in err
    assert "known Tools: examples:deploy, examples:ping" in err


@pytest.mark.parametrize("command", ["tools", "pending"])
async def test_a_command_whose_stdout_reader_went_away_exits_141_without_a_traceback(
    registered: tuple[BrokerStack, Path], command: str
) -> None:
    _, state_dir = registered
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes (`| head -1` after its line)
    try:
        code, _, err = await _maka(command, "--state-dir", str(state_dir), stdout=write_end)
    finally:
        os.close(write_end)

    assert code == 141
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
