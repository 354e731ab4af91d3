"""``maka status`` with an MCP stdio server that fails to start and writes ESC, BEL, C1, bidi and zero-width
characters to stderr (:mod:`tests.fixtures.mcp_servers.failing_stderr_server`), through the real stack as
``maka up`` runs it: the cause and stderr lines ``maka status`` prints carry the server's visible words and
none of those characters (surfaces/common/untrusted.py; docs/security.md#threats-and-what-stops-them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.acceptance.harness import write_config
from tests.fixtures.mcp_servers.failing_stderr_server import WORDS
from tests.fixtures.mcp_servers.hostile_server import FORBIDDEN
from tests.helpers.cli import ROOT, Ran, maka
from tests.helpers.stack import running_stack
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def test_maka_status_shows_a_failing_servers_stderr_words_without_its_control_or_bidi_characters(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        {
            "broken": {
                "command": sys.executable,
                "args": ["-m", "tests.fixtures.mcp_servers.failing_stderr_server"],
                "cwd": str(ROOT),
            }
        },
    )
    async with running_stack(tmp_path, config=config, echo=False) as live:
        state_dir = live.stack.state_dir

        async def failed_with_stderr() -> Ran | None:
            ran = await maka("status", state_dir=state_dir)
            shown = [line for line in ran.out.splitlines() if line.strip().startswith(("cause:", "stderr:"))]
            return ran if "broken: failed" in ran.out and shown else None

        ran = await eventually(failed_with_stderr, what="maka status shows broken failed", timeout=90, interval=0.5)

    raw = ran.out.encode("utf-8")  # the bytes the terminal got (``maka`` decodes them strictly as UTF-8)
    reached = sorted(f"U+{ord(char):04X}" for char in FORBIDDEN if char.encode("utf-8") in raw)
    assert reached == []
    quoted = "\n".join(line for line in ran.out.splitlines() if line.strip().startswith(("cause:", "stderr:")))
    for word in WORDS:
        assert word in quoted
