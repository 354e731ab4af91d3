"""``maka`` commands find the owner's token of the local stack through ``endpoints.json`` (docs/security.md "Other
local users"), and never send it to services they were told about elsewhere."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from stack.access import make_private, write_owner_token
from stack.state_dir import Endpoints, write_endpoints
from surfaces.common.target import owner_token_env


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    for name in ("MAKA_CALLER_TOKEN", "MAKA_SURFACE_TOKEN", "MAKA_BROKER_TARGET", "MAKA_INTERACTION_TARGET"):
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state"
    make_private(state)
    tokens, token = write_owner_token(state)
    write_endpoints(state, Endpoints(interaction="unix:///s/i.sock", broker="127.0.0.1:1", tokens=str(tokens)))
    return state, token


def test_a_command_on_the_local_stack_gets_the_owners_token_for_each_unset_token_variable(
    state_dir: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, token = state_dir
    args = argparse.Namespace(state_dir=state, broker=None)
    assert owner_token_env(args) == {"MAKA_CALLER_TOKEN": token, "MAKA_SURFACE_TOKEN": token}
    monkeypatch.setenv("MAKA_CALLER_TOKEN", "mine-own")
    assert owner_token_env(args) == {"MAKA_SURFACE_TOKEN": token}


def test_a_command_pointed_at_other_services_gets_no_local_token(
    state_dir: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, _ = state_dir
    assert owner_token_env(argparse.Namespace(state_dir=state, broker="remote:50052")) == {}
    assert owner_token_env(argparse.Namespace(state_dir=state, interaction="remote:50051")) == {}
    monkeypatch.setenv("MAKA_BROKER_TARGET", "remote:50052")
    assert owner_token_env(argparse.Namespace(state_dir=state)) == {}


def test_no_token_comes_from_a_state_dir_without_a_stack_or_without_a_tokens_file(tmp_path: Path) -> None:
    assert owner_token_env(argparse.Namespace(state_dir=tmp_path / "none")) == {}
    write_endpoints(tmp_path, Endpoints(interaction="127.0.0.1:1", broker="127.0.0.1:2"))
    assert owner_token_env(argparse.Namespace(state_dir=tmp_path)) == {}
