"""``maka web`` on the stack of a ``maka up``: its sign-in page names the owner token and that stack's tokens file
(docs/operations.md#the-web-page-across-restarts)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import SecretStr

from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.commands.web import naming_the_owner_token
from surfaces.web.settings import WebSettings


def test_the_page_of_a_maka_up_stack_names_its_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "state" / "tokens.json"
    write_endpoints(tmp_path / "state", Endpoints(interaction="i", broker="b", tokens=str(tokens)))
    settings = WebSettings(surface_token=SecretStr("t"))
    named = naming_the_owner_token(settings, argparse.Namespace(state_dir=tmp_path / "state"))
    assert named.web_owner_tokens_file == tokens
    mine = settings.model_copy(update={"web_owner_tokens_file": tmp_path / "mine.json"})
    assert naming_the_owner_token(mine, argparse.Namespace(state_dir=tmp_path / "state")) is mine


def test_without_a_stack_nothing_is_named(tmp_path: Path) -> None:
    settings = WebSettings(surface_token=SecretStr("t"))
    named = naming_the_owner_token(settings, argparse.Namespace(state_dir=tmp_path / "none"))
    assert named.web_owner_tokens_file is None
