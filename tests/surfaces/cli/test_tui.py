"""``maka tui`` command wiring (the app itself is tested in tests/surfaces/tui/test_app.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from services.core.form import Action
from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.main import build_parser, main
from surfaces.common.interactions import Interactions
from tests.helpers.waiting import eventually
from tests.surfaces.helpers import deploy_form, interaction_service


def test_tui_without_a_stack_fails_with_no_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", "--state-dir", str(tmp_path / "none")]) == 3
    assert capsys.readouterr().err.startswith("NO_STACK: ")


def test_tui_accepts_repeated_sessions_and_an_explicit_address() -> None:
    parser, commands = build_parser()
    args = parser.parse_args(["tui", "--session", "s1", "--session", "s2", "--interaction", "127.0.0.1:9"])
    assert "tui" in commands
    assert args.session == ["s1", "s2"]
    assert args.interaction == "127.0.0.1:9"


@pytest.mark.slow
async def test_maka_tui_in_a_real_terminal_shows_the_form_and_escape_cancels_it(redis_url: str, tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    socket_name = f"maka-tui-{uuid.uuid4().hex[:8]}"
    async with interaction_service(redis_url) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1"))
        opened = await live.link.open(deploy_form("Deploy build-42 — 部署 — פריסה"), session_id="s1", wait_seconds=300)
        command = f"{sys.executable} -m surfaces.cli.main tui --session s1 --state-dir {tmp_path}"

        async def tmux_run(*args: str) -> str:
            process = await asyncio.create_subprocess_exec(
                tmux, "-L", socket_name, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await process.communicate()
            return out.decode()

        await tmux_run("new-session", "-d", "-x", "150", "-y", "50", "-c", str(Path.cwd()), command)
        try:

            async def screen() -> str:
                return await tmux_run("capture-pane", "-p")

            async def shows_form() -> bool:
                text = await screen()
                return "Claimed MCP server: deployer" in text and "Do not enter passwords" in text

            await eventually(shows_form, timeout=30, interval=0.1, what="the TUI to show the form")
            text = await screen()
            assert "Deploy build-42 — 部署 — פריסה" in text
            await tmux_run("send-keys", "Escape")
            async with Interactions.connect(live.address) as client:

                async def answered() -> bool:
                    return not (await client.get(opened.interaction_id)).pending

                await eventually(answered, timeout=15, interval=0.1, what="the cancel to reach the service")
                stored = await client.get(opened.interaction_id)
            assert stored.answer is not None
            assert stored.answer.action is Action.CANCEL
        finally:
            await tmux_run("kill-server")


SURFACE_TOKEN = "tui-surface-token"
BROKER_TOKEN = "tui-broker-token"


@pytest.mark.slow
async def test_maka_tui_in_a_real_terminal_attaches_to_a_service_with_authentication_on(
    redis_url: str, tmp_path: Path
) -> None:
    # Textual runs its loop with an eager task factory, under which grpc.aio's interceptors cancelled Attach:
    # the TUI showed "Disconnected; reconnecting" forever whenever a token was sent (tests without auth passed)
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
                    {"token": SURFACE_TOKEN, "name": "ops", "roles": ["surface"]},
                ]
            }
        )
    )
    socket_name = f"maka-tui-{uuid.uuid4().hex[:8]}"
    host = f"tui-{uuid.uuid4().hex[:8]}"
    async with interaction_service(
        redis_url, broker_token=BROKER_TOKEN, host_id=host, auth_tokens_file=tokens_file
    ) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1", host_id=host))
        await live.link.open(deploy_form("Deploy build-43 with a token"), session_id="s1", wait_seconds=300)
        command = f"{sys.executable} -m surfaces.cli.main tui --state-dir {tmp_path}"

        async def tmux_run(*args: str) -> str:
            process = await asyncio.create_subprocess_exec(
                tmux, "-L", socket_name, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await process.communicate()
            return out.decode()

        await tmux_run(
            "new-session",
            "-d",
            "-x",
            "150",
            "-y",
            "50",
            "-c",
            str(Path.cwd()),
            "-e",
            f"MAKA_SURFACE_TOKEN={SURFACE_TOKEN}",
            command,
        )
        try:

            async def shows_form() -> bool:
                text = await tmux_run("capture-pane", "-p")
                return "Deploy build-43 with a token" in text and "Connected" in text

            await eventually(shows_form, timeout=30, interval=0.1, what="the TUI to attach and show the form")
        finally:
            await tmux_run("kill-server")
