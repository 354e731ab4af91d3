"""``maka tui`` of two people in real terminals (tmux), each with their own ID token of a real OpenID provider
(docs/security.md "Who sees a form"): a form of a call made for alice shows in bob's TUI (group release-managers,
the policy's approvers), never in carol's, which still shows a machine caller's form, first listed and live."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.helpers.waiting import eventually
from tests.surfaces.helpers import deploy_form, interaction_service

pytestmark = pytest.mark.slow

AUDIENCE = "maka-tui"
BROKER_TOKEN = "broker-token-for-the-tui-test"
ALICE = Person("alice", "alice@example.com", ("staff",))
BOB = Person("bob", "bob@example.com", ("staff", "release-managers"))
CAROL = Person("carol", "carol@example.com", ("staff",))
POLICY = {"policies": [{"server": "deployer", "tool": "deploy", "approvers": {"groups": ["release-managers"]}}]}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, CAROL]) as running:
        yield running


async def test_a_person_s_form_shows_in_the_approver_s_tui_and_not_in_another_person_s(
    redis_url: str, tmp_path: Path, provider: Provider
) -> None:
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is part of the dev environment"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "broker", "token": BROKER_TOKEN, "roles": ["broker"]}]}))
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps(POLICY))
    people = {p.sub: await asyncio.to_thread(id_token, provider, p, AUDIENCE) for p in (BOB, CAROL)}
    for_alice = interaction_pb2.Person(principal=ALICE.email, issuer=provider.issuer)
    socket_name = f"maka-people-{uuid.uuid4().hex[:8]}"

    async def tmux_run(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            tmux, "-L", socket_name, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await process.communicate()
        return out.decode()

    async with interaction_service(
        redis_url,
        broker_token=BROKER_TOKEN,
        auth_tokens_file=tokens,
        oidc_issuer=provider.issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"staff": ["surface"]},
        approver_policies_file=policies,
    ) as live:
        await live.link.open(deploy_form("Alice-deploy-1"), session_id="s1", wait_seconds=300, made_for=for_alice)
        await live.link.open(deploy_form("Machine-ask-1"), session_id="s1", wait_seconds=300)
        command = f"{sys.executable} -m surfaces.cli.main tui --session s1 --interaction {live.address}"
        for name, token in people.items():
            await tmux_run(
                "new-session", "-d", "-s", name, "-x", "150", "-y", "50", "-c", str(Path.cwd()),
                "-e", f"MAKA_SURFACE_TOKEN={token}", command,
            )  # fmt: skip
        try:

            async def screen(name: str) -> str:
                return await tmux_run("capture-pane", "-p", "-t", name)

            async def showing(name: str, *texts: str) -> bool:
                text = await screen(name)
                return all(t in text for t in texts)

            await eventually(lambda: showing("bob", "Alice-deploy-1", "Machine-ask-1"), timeout=30, interval=0.1)
            await eventually(lambda: showing("carol", "Machine-ask-1"), timeout=30, interval=0.1)
            assert "Alice-deploy-1" not in await screen("carol")

            await live.link.open(deploy_form("Alice-deploy-2"), session_id="s1", wait_seconds=300, made_for=for_alice)
            await live.link.open(deploy_form("Machine-ask-2"), session_id="s1", wait_seconds=300)
            await eventually(lambda: showing("bob", "Alice-deploy-2", "Machine-ask-2"), timeout=30, interval=0.1)
            await eventually(lambda: showing("carol", "Machine-ask-2"), timeout=30, interval=0.1)
            assert "Alice-deploy" not in await screen("carol")
        finally:
            await tmux_run("kill-server")
