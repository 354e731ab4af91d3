"""Attached surfaces across replicas (docs/design.md#attached-surfaces), through real processes.

Two real Interaction replicas serve Hosts ``h00`` and ``h01`` over one real Redis. Surfaces attach to
either replica with their own tokens; ``ListSurfaces`` on any replica lists every replica's streams of
the asked Host, scoped by the caller's token, never another Host's, never a token value (a canary token
is looked for in the replies, in Redis and in the logs). A stream that ends leaves the list at once; the
streams of a replica that dies leave it within the presence TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio

from bench.fanout import replica_env
from bench.processes import InteractionProcess
from maka_client import AttachedSurface, MakaError, SurfaceClient
from surfaces.common.interactions import FormSnapshot, Interactions, surface_json
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e]

HOSTS = ["h00", "h01"]
CANARY = "canary-surface-token-5b1e9c"
TOKENS = {
    "alice": CANARY,
    "ops": "ops-surface-token",
    "team-b": "team-b-surface-token",
}
PRESENCE_SECONDS = 3.0


def _tokens_file(path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "tokens": [
                    {
                        "name": "alice",
                        "token": TOKENS["alice"],
                        "roles": ["surface"],
                        "sessions": ["s1"],
                        "hosts": ["h00"],
                    },
                    {"name": "ops", "token": TOKENS["ops"], "roles": ["surface"], "hosts": ["h00"]},
                    {"name": "team-b", "token": TOKENS["team-b"], "roles": ["surface"], "hosts": ["h01"]},
                ]
            }
        )
    )


@dataclass
class Tier:
    targets: list[str]
    processes: list[InteractionProcess]
    redis_url: str
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    def client(self, replica: int, who: str, host: str, kind: str = "") -> Interactions:
        channel = grpc.aio.insecure_channel(self.targets[replica])
        self.channels.append(channel)
        return Interactions(
            SurfaceClient(self.targets[replica], channel=channel, token=TOKENS[who], host_id=host, surface_kind=kind)
        )

    def logs(self) -> str:
        return "".join(p.log_path.read_text(errors="replace") for p in self.processes if p.log_path.exists())


@pytest.fixture
async def tier(redis_url: str, tmp_path: Path) -> AsyncIterator[Tier]:
    _tokens_file(tmp_path / "tokens.json")
    env = {
        **replica_env(redis_url, HOSTS, tmp_path / "tokens.json", pool_size=8, followers=1),
        "MAKA_SURFACE_PRESENCE_SECONDS": str(PRESENCE_SECONDS),
        "MAKA_REAPER_INTERVAL_SECONDS": "0.2",
        "MAKA_LOG_LEVEL": "INFO",
    }
    processes = [InteractionProcess(tmp_path / f"replica-{i}", env) for i in range(2)]
    ports = [await p.start() for p in processes]
    running = Tier([f"127.0.0.1:{port}" for port in ports], processes, redis_url)
    try:
        yield running
    finally:
        for channel in running.channels:
            await channel.close()
        for process in processes:
            process.stop()


@contextlib.asynccontextmanager
async def attached(client: Interactions, sessions: list[str]) -> AsyncIterator[asyncio.Task[None]]:
    """Hold an Attach stream of ``client`` open (its snapshot received) until the block ends."""
    ready = asyncio.Event()

    async def follow() -> None:
        async for event in client.attach(sessions):
            if isinstance(event, FormSnapshot):
                ready.set()

    task = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(20):
            await ready.wait()
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, MakaError):
            await task


def _by_principal(surfaces: list[AttachedSurface]) -> dict[str, AttachedSurface]:
    return {s.principal: s for s in surfaces}


async def _listing_of(client: Interactions, principals: set[str]) -> tuple[list[AttachedSurface], int]:
    """The listing once it names exactly ``principals`` (a stream's presence is written just after its
    snapshot is sent, so a listing right after attach may not have it yet); bounded."""

    async def check() -> tuple[list[AttachedSurface], int] | None:
        listed, omitted = await client.list_surfaces()
        return (listed, omitted) if set(_by_principal(listed)) == principals else None

    return await eventually(check, timeout=20, interval=0.1, what=f"a listing of exactly {sorted(principals)}")


async def _redis_text(url: str) -> str:
    """Every key and value in Redis, as text (to look for a token value)."""
    client = redis.asyncio.Redis.from_url(url)
    parts: list[str] = []
    try:
        async for key in client.scan_iter(count=500):
            raw_kind = await client.type(key)
            kind = raw_kind.decode() if isinstance(raw_kind, bytes) else str(raw_kind)
            value: Any
            if kind == "hash":
                value = await client.hgetall(key)
            elif kind == "string":
                value = await client.get(key)
            elif kind == "stream":
                value = await client.xrange(key)
            elif kind == "zset":
                value = await client.zrange(key, 0, -1, withscores=True)
            else:
                value = kind
            parts.append(f"{key!r}={value!r}")
    finally:
        await client.aclose()
    return "\n".join(parts)


async def test_every_replica_lists_the_hosts_surfaces_scoped_by_token_and_never_another_hosts_or_a_token(
    tier: Tier,
) -> None:
    alice = tier.client(0, "alice", "h00", kind="web")
    ops = tier.client(1, "ops", "h00", kind="tui\x07\x1b")
    team_b = tier.client(0, "team-b", "h01", kind="maka-client-ts")
    async with attached(alice, ["s1"]), attached(ops, []), attached(team_b, []):
        ops_on_a = tier.client(0, "ops", "h00")
        listed, omitted = await _listing_of(ops_on_a, {"alice", "ops"})
        assert omitted == 0
        seen = _by_principal(listed)
        assert set(seen) == {"alice", "ops"}  # both replicas' streams; never team-b's Host
        assert (seen["alice"].kind, seen["alice"].session_ids, seen["alice"].all_sessions) == ("web", ("s1",), False)
        assert (seen["ops"].kind, seen["ops"].all_sessions) == ("tui", True)  # control characters removed
        assert {s.host_id for s in listed} == {"h00"}
        assert seen["alice"].replica_id != seen["ops"].replica_id
        assert seen["alice"].attached_at is not None
        assert surface_json(seen["alice"])["sessions"] == ["s1"]
        assert surface_json(seen["ops"])["sessions"] == "all"

        other_host, _ = await _listing_of(tier.client(1, "team-b", "h01"), {"team-b"})
        assert [(s.principal, s.kind, s.host_id) for s in other_host] == [("team-b", "maka-client-ts", "h01")]
        with pytest.raises(MakaError) as refused:
            await tier.client(1, "team-b", "h00").list_surfaces()
        assert refused.value.grpc_status_code == grpc.StatusCode.PERMISSION_DENIED
        assert "alice" not in refused.value.message

        as_alice, _ = await tier.client(1, "alice", "h00").list_surfaces()
        assert set(_by_principal(as_alice)) == {"alice", "ops"}  # ops watches every session, s1 included

        everything = repr(listed) + repr(other_host) + repr(as_alice)
        assert CANARY not in everything
        assert CANARY not in await _redis_text(tier.redis_url)
        assert CANARY not in tier.logs()

    async def alice_gone() -> list[AttachedSurface] | None:
        now, _ = await ops_on_a.list_surfaces()
        return now if "alice" not in _by_principal(now) else None

    # every stream ended: nothing stays listed
    assert await eventually(alice_gone, timeout=10, interval=0.1, what="alice unlisted") == []


async def test_the_surfaces_of_a_replica_that_dies_leave_the_list_within_the_presence_ttl(tier: Tier) -> None:
    ops = tier.client(1, "ops", "h00", kind="tui")
    alice = tier.client(0, "alice", "h00", kind="web")
    async with attached(ops, []), attached(alice, ["s1"]):
        lister = tier.client(0, "ops", "h00")
        before, _ = await _listing_of(lister, {"alice", "ops"})
        assert set(_by_principal(before)) == {"alice", "ops"}
        tier.processes[1].stop(kill=True)  # no stream ends cleanly: its entries only expire

        async def ops_gone() -> list[AttachedSurface] | None:
            now, _ = await lister.list_surfaces()
            return now if "ops" not in _by_principal(now) else None

        after = await eventually(ops_gone, timeout=PRESENCE_SECONDS * 4, interval=0.1, what="ops' entries expired")
        assert set(_by_principal(after)) == {"alice"}  # the live replica's stream is refreshed, still listed
        await asyncio.sleep(PRESENCE_SECONDS)  # let one whole TTL pass: alice's entry lives only if refreshed
        still, _ = await lister.list_surfaces()
        assert set(_by_principal(still)) == {"alice"}
