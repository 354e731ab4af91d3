"""The scripted agent loops (examples/agent_loop.py on the Python client, examples/polyglot/agent.ts on
the TypeScript client) against the whole stack as real processes: list Tools, call ping, deploy (its
form answered by a surface meanwhile) and an unknown Tool; both report the same outcomes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from maka_client import SurfaceClient
from tests.helpers.stack import running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TSC = ROOT / "clients" / "typescript" / "node_modules" / "typescript" / "bin" / "tsc"


def _command(language: str, broker: str) -> list[str]:
    if language == "python":
        return [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--broker", broker]
    return [str(NODE), str(ROOT / "examples" / "polyglot" / "agent.ts"), "--broker", broker]


def test_the_typescript_client_and_agent_loop_type_check() -> None:
    for project in (ROOT / "clients" / "typescript", ROOT / "examples" / "polyglot"):
        checked = subprocess.run(
            [str(NODE), str(TSC), "-p", str(project / "tsconfig.json"), "--noEmit"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


async def _run_loop(language: str, broker: str, surface: SurfaceClient) -> list[str]:
    """Run one agent loop; answer its deploy form as a user would once it waits; its output lines."""
    process = await asyncio.create_subprocess_exec(
        *_command(language, broker), cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(90):
        while True:
            line = (await process.stdout.readline()).decode()
            assert line, f"{language} loop ended early: {lines}"
            lines.append(line.rstrip())
            if "waiting for the user: form " in line:
                form_id = line.split("form ", 1)[1].split()[0]
                await surface.answer(form_id, "accept", {"environment": "staging", "confirm": True})
                break
        rest, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return lines + rest.decode().splitlines()


async def test_both_agent_loops_list_call_wait_for_the_form_and_handle_an_unknown_tool(tmp_path: Path) -> None:
    async with running_stack(tmp_path, echo=False) as running, SurfaceClient(running.endpoints.interaction) as surface:
        for language in ("python", "typescript"):
            lines = await _run_loop(language, running.endpoints.broker, surface)
            assert lines[0].startswith("tools: "), lines
            assert "examples:deploy" in lines[0]
            assert any("UNKNOWN_TOOL" in line and "pick another Tool" in line for line in lines), lines
            assert any(line.startswith("   known Tools: ") for line in lines), lines
            outcomes = json.loads(lines[-1])["outcomes"]
            deployed = "Deployed build-42 to staging."
            assert outcomes[:2] == [
                {"tool": "examples:ping", "kind": "result", "isError": False, "text": "pong"},
                {"tool": "examples:deploy", "kind": "result", "isError": False, "text": deployed},
            ], language
            assert outcomes[2]["tool"] == "examples:does_not_exist"
            assert (outcomes[2]["kind"], outcomes[2]["code"]) == ("failure", "UNKNOWN_TOOL")
