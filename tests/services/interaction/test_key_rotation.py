"""Rotating the answer key (docs/security.md "Answer values at rest"): ``maka answer-key rotate`` on the key
file a service already sealed answers with, then a restart: the answers in retention still open, new ones
are sealed with the new key id, and a ring without the key that sealed a record still fails
ANSWER_UNSEALABLE."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest
import redis.asyncio

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.key_file import generate_key_file, read_key_ring
from services.core.reasons import InteractionErrorReason
from services.core.status import error_from_rpc
from services.interaction.keys import Keys
from services.interaction.sealing import KEY_ID_MAGIC
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


def _settings(redis_url: str, tmp_path: Path, key: Path) -> Settings:
    return Settings(
        redis_url=redis_url,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
        answer_key_file=key,
    )


async def _answer_one(service: Service, session: str) -> str:
    async with service.channel(BROKER_TOKEN) as broker, service.channel(ADMIN_SURFACE_TOKEN) as surface_channel:
        link = await Link.connect(broker)
        opened = await link.open(session, f"inv-{session}")
        surface = await Surface.attach(surface_channel, (session,))
        await surface.next("snapshot")
        await surface.answer(f"sub-{session}", opened.interaction_id, accept(f"target-{session}"))
        assert (await surface.next("answer_outcome")).answer_outcome.accepted
        await surface.close()
        await link.close()
    return opened.interaction_id


async def _get(service: Service, interaction_id: str) -> interaction_pb2.Interaction:
    async with service.channel(ADMIN_SURFACE_TOKEN) as ch:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(ch)
        reply = await stub.GetInteraction(interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id))
    return reply.interaction


def _maka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "surfaces.cli.main", "answer-key", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


async def _sealed_blob(redis_url: str, interaction_id: str) -> bytes:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        pb = await client.hget(Keys("local").record(interaction_id), "pb")
    finally:
        await client.aclose()
    assert isinstance(pb, bytes)
    return interaction_pb2.Interaction.FromString(pb).sealed_answer


async def test_answers_sealed_before_maka_answer_key_rotate_still_open_after_a_restart(
    redis_url: str, tmp_path: Path
) -> None:
    key = tmp_path / "state" / "answer.key"
    generate_key_file(key)
    service = await start_service(_settings(redis_url, tmp_path, key))
    try:
        before = await _answer_one(service, "s-before")
    finally:
        await service.running.stop()
    assert not (await _sealed_blob(redis_url, before)).startswith(KEY_ID_MAGIC), "sealed as before rings"

    rotated = _maka("rotate", "--state-dir", str(tmp_path / "state"))
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.strip() == "k1"
    assert _maka("list", "--state-dir", str(tmp_path / "state")).stdout.split("\n")[:2] == ["k0 opens", "k1 seals"]

    service = await start_service(_settings(redis_url, tmp_path, key))
    try:
        old = await _get(service, before)
        after = await _answer_one(service, "s-after")
        new = await _get(service, after)
    finally:
        await service.running.stop()
    assert old.answer.values["target"].string_value == "target-s-before"
    assert new.answer.values["target"].string_value == "target-s-after"
    assert (await _sealed_blob(redis_url, after)).startswith(KEY_ID_MAGIC + bytes([2]) + b"k1")


async def test_a_record_whose_key_left_the_ring_fails_answer_unsealable(redis_url: str, tmp_path: Path) -> None:
    key = tmp_path / "answer.key"
    generate_key_file(key)
    assert _maka("rotate", "--key-file", str(key)).returncode == 0
    service = await start_service(_settings(redis_url, tmp_path, key))
    try:
        sealed_with_k1 = await _answer_one(service, "s-k1")
    finally:
        await service.running.stop()
    assert _maka("rotate", "--key-file", str(key)).returncode == 0
    ring = read_key_ring(key)
    key.write_text("".join(line for line in key.read_text().splitlines(keepends=True) if not line.startswith("k1 ")))
    assert set(read_key_ring(key).keys) == set(ring.keys) - {"k1"}

    service = await start_service(_settings(redis_url, tmp_path, key))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _get(service, sealed_with_k1)
    finally:
        await service.running.stop()
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.INTERNAL
    assert detail.reason == InteractionErrorReason.ANSWER_UNSEALABLE


def test_maka_answer_key_on_a_missing_file_exits_2_with_one_line(tmp_path: Path) -> None:
    result = _maka("rotate", "--key-file", str(tmp_path / "none.key"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "cannot read" in result.stderr
