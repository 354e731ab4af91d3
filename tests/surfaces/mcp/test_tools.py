"""Broker Tool names as MCP Tool names: within MCP's rules, collision-free, mapped back exactly."""

from __future__ import annotations

import asyncio
import contextvars
import re

import grpc
import pytest

from maka_client import MakaError
from surfaces.mcp.tools import MAX_NAME_CHARS, InputSchemas, Schemas, decode, encode

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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Listing:
    """The read an :class:`InputSchemas` is given: counts reads, returns ``schemas`` or raises ``error``, and
    notes the value of :data:`_PROBE` in the context it ran in."""

    def __init__(self, schemas: Schemas) -> None:
        self.schemas = schemas
        self.reads = 0
        self.error: Exception | None = None
        self.release = asyncio.Event()
        self.release.set()
        self.seen_probe: list[str | None] = []

    async def __call__(self) -> Schemas:
        self.reads += 1
        self.seen_probe.append(_PROBE.get())
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return self.schemas


_PROBE: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_probe", default=None)


async def _settle(schemas: InputSchemas) -> None:
    task = schemas.refresh()
    assert task is not None
    async with asyncio.timeout(5):
        await task


async def test_a_lookup_answers_from_the_last_listing_without_reading_the_broker_again() -> None:
    clock = _Clock()
    listing = _Listing({})
    schemas = InputSchemas(listing, max_age=2.0, clock=clock)
    schemas.update({"examples.deploy": DEPLOY_SCHEMA})

    for _ in range(3):
        assert schemas.get("examples.deploy") == DEPLOY_SCHEMA
    assert schemas.get("examples.unknown") is None
    assert listing.reads == 0


async def test_a_stale_listing_is_read_again_once_in_the_background_while_lookups_answer_at_once() -> None:
    clock = _Clock()
    listing = _Listing({"examples.deploy": {"type": "object"}, "more.ping": {"type": "object"}})
    listing.release.clear()
    schemas = InputSchemas(listing, max_age=2.0, clock=clock)
    schemas.update({"examples.deploy": DEPLOY_SCHEMA})
    clock.now += 2.5

    assert schemas.get("examples.deploy") == DEPLOY_SCHEMA  # the read has started, the lookup did not wait
    assert schemas.get("more.ping") is None
    listing.release.set()
    await _settle(schemas)

    assert listing.reads == 1
    assert schemas.get("examples.deploy") == {"type": "object"}
    assert schemas.get("more.ping") == {"type": "object"}


async def test_the_first_lookup_reads_the_listing_and_not_in_the_requests_context() -> None:
    listing = _Listing({"examples.deploy": DEPLOY_SCHEMA})
    schemas = InputSchemas(listing, max_age=2.0, clock=_Clock())
    _PROBE.set("request token")

    assert schemas.get("examples.deploy") is None
    await _settle(schemas)

    assert schemas.get("examples.deploy") == DEPLOY_SCHEMA
    assert listing.seen_probe == [None]  # an empty context: a request's bearer token does not ride along


async def test_a_failed_read_keeps_the_last_listing_and_is_tried_again_only_after_max_age() -> None:
    clock = _Clock()
    listing = _Listing({})
    listing.error = MakaError(grpc.StatusCode.UNAVAILABLE, "the broker is down")
    schemas = InputSchemas(listing, max_age=2.0, clock=clock)
    schemas.update({"examples.deploy": DEPLOY_SCHEMA})
    clock.now += 3.0
    schemas.get("examples.deploy")
    await _settle(schemas)

    assert schemas.get("examples.deploy") == DEPLOY_SCHEMA
    assert listing.reads == 1
    clock.now += 2.5
    schemas.get("examples.deploy")
    await _settle(schemas)
    assert listing.reads == 2
    await schemas.close()
