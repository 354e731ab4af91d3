"""``maka history`` against the real Interaction service found through endpoints.json."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.main import main
from tests.surfaces.helpers import deploy_form, interaction_service, text_field

BROKER_TOKEN = "history-broker-token"
ALICE_TOKEN = "history-alice-token"
SCOPED_TOKEN = "history-scoped-token"
CANARY = "history-cli-canary-51b9"


async def maka(*argv: str) -> int:
    """Run the ``maka`` entry point in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(main, list(argv))


def tokens(path: Path) -> Path:
    """A tokens file: the broker, alice (every session) and a surface that sees only session s2."""
    path.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
                    {"token": ALICE_TOKEN, "name": "alice", "roles": ["surface"]},
                    {"token": SCOPED_TOKEN, "name": "scoped", "roles": ["surface"], "sessions": ["s2"]},
                ]
            }
        )
    )
    return path


def note_form() -> form_pb2.Form:
    """A form with one free-text field (where the canary goes)."""
    form = deploy_form("Anything to add?")
    del form.fields[:]
    form.fields.append(text_field("note", required=True))
    return form


async def test_history_json_names_who_answered_each_form_and_never_shows_a_value(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAKA_SURFACE_TOKEN", ALICE_TOKEN)
    host = f"cli-{secrets.token_hex(4)}"
    tokens_file = tokens(tmp_path / "tokens.json")
    async with interaction_service(
        redis_url, broker_token=BROKER_TOKEN, host_id=host, auth_tokens_file=tokens_file
    ) as live:
        write_endpoints(tmp_path, Endpoints(interaction=live.address, broker="127.0.0.1:1", host_id=host))
        answered = await live.link.open(note_form(), session_id="s1")
        values = json.dumps({"note": CANARY})
        state_dir = ("--state-dir", str(tmp_path))
        assert await maka("answer", answered.interaction_id, "accept", "--values", values, *state_dir) == 0
        await live.link.deliver(answered.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED)
        stopped = await live.link.open(deploy_form(), session_id="s2")
        await live.link.close(stopped.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        capsys.readouterr()
        assert await maka("history", "--json", *state_dir) == 0
    out = capsys.readouterr().out
    assert CANARY not in out
    newest, oldest = json.loads(out)
    assert (newest["id"], newest["state"], newest["close_reason"]) == (stopped.interaction_id, "closed", "stopped")
    assert newest["answered_by"] is None
    assert (oldest["id"], oldest["action"], oldest["delivery"]) == (answered.interaction_id, "accept", "delivered")
    assert oldest["answered_by"] == {
        "principal": "alice",
        "principal_kind": "token",
        "surface": "cli",
        "issuer": None,
        "via": None,
    }
    assert (oldest["tool"], oldest["provider"], oldest["claimed_server"]) == (
        "deployer:deploy",
        "Local MCP provider",
        "deployer",
    )
    assert (oldest["host"], oldest["session"]) == (host, "s1")
    assert oldest["settled_at"].endswith("Z")


async def test_history_text_lists_the_newest_first_up_to_the_limit_and_only_visible_sessions(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAKA_SURFACE_TOKEN", SCOPED_TOKEN)
    host, tokens_file = f"cli-{secrets.token_hex(4)}", tokens(tmp_path / "tokens.json")
    async with interaction_service(
        redis_url, broker_token=BROKER_TOKEN, host_id=host, auth_tokens_file=tokens_file
    ) as live:
        ids = []
        for session in ("s2", "s1", "s2", "s2"):
            opened = await live.link.open(deploy_form(), session_id=session)
            await live.link.close(opened.interaction_id, interaction_pb2.CLOSE_REASON_TIMED_OUT)
            ids.append(opened.interaction_id)
        assert await maka("history", "--limit", "2", "--interaction", live.address) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SETTLED", "(UTC)", "TOOL", "OUTCOME", "ANSWERED", "BY", "SESSION", "ID"]
    assert [line.split()[-1] for line in lines[1:]] == [ids[3], ids[2]]
    assert all("closed: timed_out" in line and " s2 " in line for line in lines[1:])


async def test_history_without_a_stack_fails_with_no_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await maka("history", "--state-dir", str(tmp_path / "nothing")) == 3
    assert capsys.readouterr().err.startswith("NO_STACK: ")
