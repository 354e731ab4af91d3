"""``surfaces.common.target``: which Host or pool of Hosts a surface command follows."""

from __future__ import annotations

import argparse

import pytest

from surfaces.common.target import add_target_arguments, parse_pool, pool


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_target_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_pool_is_a_list_of_host_ids_or_every_host_and_empty_means_one_host() -> None:
    assert parse_pool("") is None
    assert parse_pool(" , ") is None
    assert parse_pool("a, b,a") == ("a", "b")
    assert parse_pool("a,*") == ("*",)


def test_hosts_wins_then_an_explicit_host_id_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_HOST_IDS", "*")
    assert pool(_args("--hosts", "h0,h1")) == ("h0", "h1")
    assert pool(_args("--host-id", "h1")) is None, "naming one Host follows that Host only"
    assert pool(_args()) == ("*",)
    monkeypatch.delenv("MAKA_HOST_IDS")
    assert pool(_args()) is None
