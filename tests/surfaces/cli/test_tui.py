"""``maka tui`` command wiring (the app itself is tested in tests/surfaces/tui/test_app.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2
from services.core.form import Action
from stack.access import OWNER
from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.main import build_parser, main
from surfaces.common.interactions import Interactions
from tests.helpers.oidc import Person, id_token, oidc_provider
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


AUDIENCE = "maka-cli"
ALICE = Person("alice", "alice@example.com", ("staff",))
CAROL = Person("carol", "carol@example.com", ("staff",))


class Terminals:
    """``maka tui`` processes in real terminals (one tmux server, a window each)."""

    def __init__(self, tmux: str) -> None:
        self._tmux = tmux
        self._socket = f"maka-tui-{uuid.uuid4().hex[:8]}"
        self._started = False

    async def run(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            self._tmux, "-L", self._socket, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await process.communicate()
        return out.decode()

    async def start(self, name: str, token: str, *argv: str) -> None:
        """Run ``maka tui ARGV`` in window ``name`` with ``token`` as its bearer (``MAKA_SURFACE_TOKEN``; empty: none,
        the TUI then takes the local stack's owner token, as after ``maka up``)."""
        command = " ".join([sys.executable, "-m", "surfaces.cli.main", "tui", *argv])
        if self._started:
            where = ["new-window", "-d", "-t", "maka", "-n", name]
        else:
            where = ["new-session", "-d", "-s", "maka", "-n", name, "-x", "150", "-y", "50"]
        self._started = True
        env = ("-e", f"MAKA_SURFACE_TOKEN={token}") if token else ()
        await self.run(*where, "-c", str(Path.cwd()), *env, command)

    async def screen(self, name: str) -> str:
        return await self.run("capture-pane", "-p", "-t", f"maka:{name}")

    async def close(self) -> None:
        await self.run("kill-server")


OWNER_TOKEN = "tui-owner-token"
BROKER_TOKEN = "tui-broker-token"


@pytest.mark.slow
async def test_maka_tui_in_a_real_terminal_attaches_to_a_token_protected_stack_as_maka_up_starts_it(
    redis_url: str, tmp_path: Path
) -> None:
    # Textual runs its loop with an eager task factory, under which grpc.aio's interceptors cancelled Attach:
    # the TUI showed "Disconnected; reconnecting" forever whenever a token was sent (tests without auth passed)
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    tokens_file = tmp_path / "tokens.json"  # as `maka up` writes it: the owner's token, found via endpoints.json
    entries = [
        {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
        {"token": OWNER_TOKEN, "name": OWNER, "roles": ["admin"]},
    ]
    tokens_file.write_text(json.dumps({"tokens": entries}))
    host = f"tui-{uuid.uuid4().hex[:8]}"
    async with interaction_service(
        redis_url, broker_token=BROKER_TOKEN, host_id=host, auth_tokens_file=tokens_file
    ) as live:
        write_endpoints(
            tmp_path,
            Endpoints(interaction=live.address, broker="127.0.0.1:1", host_id=host, tokens=str(tokens_file)),
        )
        await live.link.open(deploy_form("Deploy build-43 with a token"), session_id="s1", wait_seconds=300)
        terminals = Terminals(tmux)
        try:
            await terminals.start("owner", "", "--state-dir", str(tmp_path))

            async def shows_form() -> str | None:
                text = await terminals.screen("owner")
                return text if "Connected · all visible sessions · 1 pending" in text else None

            screen = await eventually(shows_form, timeout=30, interval=0.1, what="the TUI to attach and show the form")
        finally:
            await terminals.close()
    assert "Deploy build-43 with a token" in screen


@pytest.mark.slow
async def test_maka_tui_of_a_person_shows_that_person_s_form_and_another_person_s_tui_does_not(
    redis_url: str, tmp_path: Path
) -> None:
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({"tokens": [{"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]}]}))
    with oidc_provider([ALICE, CAROL]) as provider:
        alice_token, carol_token = (id_token(provider, person, AUDIENCE) for person in (ALICE, CAROL))
        async with interaction_service(
            redis_url,
            broker_token=BROKER_TOKEN,
            auth_tokens_file=tokens_file,
            oidc_issuer=provider.issuer,
            oidc_audiences=[AUDIENCE],
            oidc_roles={"staff": ["surface"]},
        ) as live:
            alice = interaction_pb2.Person(principal=ALICE.email, issuer=provider.issuer)
            await live.link.open(
                deploy_form("Deploy for alice only"), session_id="s1", wait_seconds=300, made_for=alice
            )
            await live.link.open(deploy_form("Deploy for anyone"), session_id="s1", wait_seconds=300)
            terminals = Terminals(tmux)
            try:
                await terminals.start("alice", alice_token, "--interaction", live.address)
                await terminals.start("carol", carol_token, "--interaction", live.address)

                async def shows(name: str, pending: int) -> str | None:
                    text = await terminals.screen(name)
                    return text if f"Connected · all visible sessions · {pending} pending" in text else None

                alice_screen = await eventually(
                    lambda: shows("alice", 2), timeout=30, interval=0.1, what="alice's TUI to show both forms"
                )
                carol_screen = await eventually(
                    lambda: shows("carol", 1), timeout=30, interval=0.1, what="carol's TUI to show one form"
                )
            finally:
                await terminals.close()
    assert "Deploy for alice only" in alice_screen
    assert "Deploy for anyone" in alice_screen
    assert "Deploy for anyone" in carol_screen
    assert "Deploy for alice only" not in carol_screen
