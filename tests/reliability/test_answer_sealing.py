"""Answer values sealed at rest (docs/security.md "Answer values at rest"), on the stack as ``maka up`` runs it
(``STATE/answer.key``): a form-value canary reaches the MCP server and the surface, and is absent from every
Redis key's ``DUMP`` (records, event and settled Streams) and from the AOF; after an Interaction service
restart with the same key file, ``GetInteraction`` still returns the answer."""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

import pytest
import redis.asyncio

from maka.interaction.v1 import interaction_pb2
from tests.helpers.observed import Observed
from tests.helpers.waiting import eventually
from tests.reliability.harness import ToolCall, answer, get_interaction, redis_dump

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="package")]


async def _dump_every_key(url: str) -> bytes:
    """``DUMP`` of every key (RDB encoding: long strings may be LZF-compressed, so :func:`redis_dump`'s
    values are searched too)."""
    client = redis.asyncio.Redis.from_url(url)
    parts: list[bytes] = []
    try:
        async for key in client.scan_iter(count=500):
            parts += [key, await client.dump(key) or b""]
    finally:
        await client.aclose()
    return b"\n".join(parts)


def _aof(state_dir: Path) -> bytes:
    files = sorted(path for path in (state_dir / "redis").rglob("*.aof*") if path.is_file())
    assert files, "the embedded Redis keeps an AOF in the state dir"
    return b"".join(path.read_bytes() for path in files)


def _settled_entry(interaction_id: str) -> bytes:
    """How the AOF spells the settled Stream entry's ``id`` field of ``interaction_id`` (written by the same
    script as the committed answer)."""
    raw = interaction_id.encode()
    return b"\r\nid\r\n$" + str(len(raw)).encode() + b"\r\n" + raw + b"\r\n"


async def test_a_committed_answer_is_sealed_in_redis_and_the_aof_and_still_read_whole_after_a_restart(
    observed: Observed,
) -> None:
    canary = f"sealed-canary-{secrets.token_hex(8)}"
    tag = f"sealed-{secrets.token_hex(4)}"
    state_dir = observed.running.stack.state_dir
    key_file = state_dir / "answer.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    async with ToolCall(observed.broker, "counter:ask", {"tag": tag}, session="sealing") as call:
        interaction_id = await call.awaiting()
        committed = await answer(observed.interaction, interaction_id, canary)
        done = await call.terminal()
    assert done.WhichOneof("event") == "result"
    assert committed.answer.values["value"].string_value == canary
    assert [(leg["leg"], leg.get("value")) for leg in observed.calls_of(tag)] == [("first", None), ("retry", canary)]

    async def delivered() -> bool:  # deliver.lua rewrote the record and added a delivery event
        record = await get_interaction(observed.interaction, interaction_id)
        return record.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED

    await eventually(delivered, timeout=15, what="the answer's delivery recorded")
    dump = await _dump_every_key(observed.redis_url)
    assert interaction_id.encode() in dump
    assert canary.encode() not in dump, "the answer is sealed in every key (records, event and settled Streams)"
    values = await redis_dump(observed.redis_url)  # every hash field, Stream entry, set member... as stored
    assert interaction_id.encode() in values
    assert canary.encode() not in values

    def aof_with_the_answer() -> bytes | None:
        blob = _aof(state_dir)
        return blob if _settled_entry(interaction_id) in blob else None

    aof = await eventually(
        aof_with_the_answer,
        timeout=10,
        what="the committed answer in the AOF (appendfsync everysec)",
    )
    assert canary.encode() not in aof

    read = await get_interaction(observed.interaction, interaction_id)
    assert read.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert read.answer.values["value"].string_value == canary
    assert not read.sealed_answer

    before = key_file.read_bytes()
    await observed.running.stack.restart(observed.running.stack.INTERACTION)
    assert key_file.read_bytes() == before, "the key file is written once and kept"
    after = await get_interaction(observed.interaction, interaction_id)
    assert after.answer.values["value"].string_value == canary
