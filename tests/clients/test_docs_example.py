"""The Python example of ``docs/clients.md`` ("A first call from Python") runs as written against a stack."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from tests.helpers.stack import running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## A first call from Python"


def _example() -> str:
    page = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    section = page[page.index(HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no python block under the heading"
    return match.group(1)


async def test_the_python_example_of_the_clients_page_deploys_through_a_running_stack(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_example(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKA_BROKER_TARGET", "MAKA_INTERACTION_TARGET")}
    async with running_stack(tmp_path) as running:
        env["MAKA_STATE_DIR"] = str(running.stack.state_dir)
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(120):
            out, err = await process.communicate()

    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["form: Choose the deployment target", "Deployed build-42 to staging."]
