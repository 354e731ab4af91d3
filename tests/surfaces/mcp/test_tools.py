"""Broker Tool names as MCP Tool names: within MCP's rules, collision-free, mapped back exactly."""

from __future__ import annotations

import re

import pytest

from surfaces.mcp.tools import MAX_NAME_CHARS, InputSchemas, decode, encode

MCP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
QUALIFIED = [
    "examples:deploy",
    "examples:release_checklist",
    "a_b:c",
    "a:b_c",
    "a.b:c",
    "a:b.c",
    "a_d:x",
    "a__d:x",
    "a_t:x",
    "a:_t",
    "a:x_x41",
    "s:weird name/é",
    "s:mañana",
    "x-y.z_w:tool-1.2_3",
]


def test_a_plain_tool_keeps_its_name_after_the_server_prefix() -> None:
    assert encode("examples:deploy") == "examples.deploy"
    assert encode("examples:release_checklist") == "examples.release_checklist"


@pytest.mark.parametrize("qualified", QUALIFIED)
def test_every_name_maps_to_a_valid_mcp_name_and_back(qualified: str) -> None:
    name = encode(qualified)

    assert name is not None
    assert MCP_NAME.match(name)
    assert decode(name) == qualified


def test_different_broker_names_never_share_an_mcp_name() -> None:
    names = [encode(qualified) for qualified in QUALIFIED]

    assert len(set(names)) == len(QUALIFIED)


def test_a_name_past_128_characters_is_not_listed() -> None:
    assert encode("s:" + "t" * (MAX_NAME_CHARS - 2)) == "s." + "t" * (MAX_NAME_CHARS - 2)
    assert encode("s:" + "t" * (MAX_NAME_CHARS - 1)) is None


@pytest.mark.parametrize("name", ["", "deploy", "a.", ".b", "a_q.b", "a_tplain", "a_t_x4", "a_d", "x" * 200, "a b.c"])
def test_names_no_broker_tool_maps_to_decode_to_none(name: str) -> None:
    assert decode(name) is None


DEPLOY_SCHEMA = {"type": "object", "properties": {"artifact": {"type": "string"}}}


def test_a_lookup_answers_from_the_last_listing_and_a_new_listing_replaces_it_whole() -> None:
    schemas = InputSchemas()
    assert schemas.get("examples.deploy") is None, "before the first listing: unchecked"
    schemas.update({"examples.deploy": DEPLOY_SCHEMA, "old.tool": {"type": "object"}})

    assert schemas.get("examples.deploy") == DEPLOY_SCHEMA
    assert schemas.get("examples.unknown") is None
    schemas.update({"examples.deploy": {"type": "object"}})
    assert schemas.get("examples.deploy") == {"type": "object"}
    assert schemas.get("old.tool") is None, "a Tool gone from the listing is no longer checked"
