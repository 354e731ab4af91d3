"""Answer values sealed at rest in Redis (docs/security.md "Answer values at rest"): the service over a real
redis-server, with an answer key file; another key's records are never served without their answer."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.key_file import generate_key_file
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction.settings import Settings
from tests.services.interaction.harness import (
    ADMIN_SURFACE_TOKEN,
    BROKER_TOKEN,
    Link,
    Service,
    Surface,
    accept,
    start_service,
    write_tokens,
)

ROOT = Path(__file__).resolve().parents[3]
CANARY = "sealed-canary-9f3b71"


def _settings(redis_url: str, tmp_path: Path, key: Path | None) -> Settings:
    return Settings(
        redis_url=redis_url,
        reaper_interval_seconds=0.05,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
        answer_key_file=key,
    )


@asynccontextmanager
async def _service(settings: Settings) -> AsyncIterator[Service]:
    service = await start_service(settings)
    try:
        yield service
    finally:
        await service.running.stop()


async def _dump_every_key(redis_url: str) -> bytes:
    """Every key's name and ``DUMP``, plus the raw fields of hashes and Stream entries (``DUMP`` may
    LZF-compress a long string, which would hide a plaintext value)."""
    client: Any = redis.asyncio.Redis.from_url(redis_url)
    parts: list[bytes] = []
    try:
        async for key in client.scan_iter(count=500):
            parts += [key, await client.dump(key) or b""]
            kind = await client.type(key)
            if kind == b"hash":
                for name, value in (await client.hgetall(key)).items():
                    parts += [name, value]
            elif kind == b"stream":
                for _entry_id, fields in await client.xrange(key):
                    for name, value in fields.items():
                        parts += [name, value]
    finally:
        await client.aclose()
    return b"\n".join(parts)


async def _answer(service: Service) -> tuple[str, interaction_pb2.Interaction, interaction_pb2.InteractionEvent]:
    """Open a form, answer it with the canary; returns (id, what the broker was pushed, the surface's event)."""
    broker = service.channel(BROKER_TOKEN)
    surface_channel = service.channel(ADMIN_SURFACE_TOKEN)
    link = await Link.connect(broker)
    opened = await link.open("s-a", "inv-1")
    surface = await Surface.attach(surface_channel, ("s-a",))
    await surface.next("snapshot")
    await surface.answer("sub-1", opened.interaction_id, accept(CANARY))
    outcome = (await surface.next("answer_outcome")).answer_outcome
    assert outcome.accepted
    event = (await surface.next("event")).event.event  # the snapshot held the pending form
    pushed = await link.next_settled()
    await surface.close()
    await link.close()
    await broker.close()
    await surface_channel.close()
    return opened.interaction_id, pushed, event


async def _get(service: Service, interaction_id: str) -> interaction_pb2.Interaction:
    async with service.channel(ADMIN_SURFACE_TOKEN) as ch:
        stub: interaction_service_pb2_grpc.InteractionServiceAsyncStub = (
            interaction_service_pb2_grpc.InteractionServiceStub(ch)
        )
        reply = await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id))
    return reply.interaction


async def test_an_answer_is_sealed_in_every_redis_key_and_read_back_whole_by_surfaces_and_the_broker(
    redis_url: str, tmp_path: Path
) -> None:
    key = tmp_path / "answer.key"
    generate_key_file(key)
    async with _service(_settings(redis_url, tmp_path, key)) as service:
        interaction_id, pushed, event = await _answer(service)
        got = await _get(service, interaction_id)
    dump = await _dump_every_key(redis_url)

    for written in (interaction_id.encode(), b":events", b":settled"):
        assert written in dump, "the record and Streams were written"
    assert CANARY.encode() not in dump
    for seen in (pushed, event.interaction, got):
        assert seen.answer.values["target"].string_value == CANARY
        assert not seen.sealed_answer, "storage only: never sent to a client"
    assert event.kind == interaction_pb2.EVENT_KIND_ANSWERED


async def test_a_restarted_service_with_the_same_key_reads_the_answered_record(redis_url: str, tmp_path: Path) -> None:
    key = tmp_path / "answer.key"
    generate_key_file(key)
    async with _service(_settings(redis_url, tmp_path, key)) as service:
        interaction_id, _pushed, _event = await _answer(service)
    async with _service(_settings(redis_url, tmp_path, key)) as service:
        got = await _get(service, interaction_id)
    assert got.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert got.answer.values["target"].string_value == CANARY


async def test_a_record_sealed_with_another_key_fails_internal_and_is_never_pushed_without_its_answer(
    redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "first.key", tmp_path / "second.key"
    generate_key_file(first)
    generate_key_file(second)
    async with _service(_settings(redis_url, tmp_path, first)) as service:
        interaction_id, _pushed, _event = await _answer(service)

    async with _service(_settings(redis_url, tmp_path, second)) as service:
        with caplog.at_level(logging.ERROR, logger="maka.interaction.sealing"):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _get(service, interaction_id)
            broker = service.channel(BROKER_TOKEN)
            link = await Link.connect(broker, watched=(interaction_id,))  # the hello still succeeds
            await link.close()
            await broker.close()
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.INTERNAL
    assert detail.reason == InteractionErrorReason.ANSWER_UNSEALABLE
    assert CANARY not in str(caught.value.details())
    assert link.settled.empty(), "an answered record is never pushed with a wrong or empty answer"
    unsealable = [r for r in caplog.records if r.getMessage() == "answer_unsealable"]
    assert len(unsealable) >= 2
    assert {r.__dict__["interaction_id"] for r in unsealable} == {interaction_id}


async def test_without_a_key_the_service_warns_that_answers_are_stored_in_plaintext(
    redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="maka.interaction.main"):
        async with _service(_settings(redis_url, tmp_path, None)):
            pass
    assert [r.getMessage() for r in caplog.records if r.name == "maka.interaction.main"].count(
        "answer_values_unsealed"
    ) == 1


@pytest.mark.parametrize("content", [None, "c2hvcnQ=\n", "not base64!\n"], ids=["missing", "short", "garbage"])
def test_a_set_but_unusable_key_file_exits_2_with_one_line_and_no_traceback(
    redis_url: str, tmp_path: Path, content: str | None
) -> None:
    key = tmp_path / "answer.key"
    if content is not None:
        key.write_text(content)
    env = {
        **os.environ,
        "MAKA_LISTEN": "127.0.0.1:0",
        "MAKA_REDIS_URL": redis_url,
        "MAKA_ANSWER_KEY_FILE": str(key),
    }
    env.pop("MAKA_AUTH_TOKENS_FILE", None)
    result = subprocess.run(
        [sys.executable, "-m", "services.interaction.main"], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if "answer_key_invalid" in line]
    assert len(lines) == 1, stderr
    assert str(key) in lines[0]
