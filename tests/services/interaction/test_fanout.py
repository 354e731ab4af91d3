"""The replica's fan-out over a real redis-server: one follower, bounded subscribers, resumable overflow."""

from __future__ import annotations

import asyncio

import redis.asyncio

from services.core import metrics
from services.interaction.fanout import FanOut, SubscriberOverflow, Subscription
from tests.helpers.waiting import eventually

KEY = "maka:{fan}:session:s:events"
OTHER = "maka:{fan2}:session:s:events"


def _text(fields: dict[bytes, bytes]) -> str:
    return fields[b"n"].decode()


async def _add(client: redis.asyncio.Redis, key: str, count: int, start: int = 0) -> list[str]:
    ids = [await client.xadd(key, {"n": str(n)}) for n in range(start, start + count)]
    return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]


async def _take(sub: Subscription[str], count: int) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    async with asyncio.timeout(10):
        async for item in sub:
            out.append(item)
            if len(out) == count:
                break
    return out


async def test_a_slow_subscriber_overflows_alone_and_resumes_from_its_position_losing_nothing(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    hub = FanOut(client, lanes=1, queue_size=8, block_ms=500)
    overflows = metrics.REGISTRY.get_sample_value("maka_subscriber_overflows_total") or 0.0
    try:
        fast = hub.subscribe({KEY: "0-0"}, _text)
        slow = hub.subscribe({KEY: "0-0"}, _text)
        reader = asyncio.create_task(_take(fast, 50))
        for n in range(50):  # a steady producer; the fast consumer keeps up
            await _add(client, KEY, 1, start=n)
            await asyncio.sleep(0.005)
        got = await reader  # the fast one is never stalled by the slow one
        assert [v for _k, _i, v in got] == [str(n) for n in range(50)]
        await eventually(lambda: slow.overflowed, what="the slow subscriber overflows", timeout=10)
        seen: list[tuple[str, str, str]] = []
        ended = False
        try:
            async with asyncio.timeout(10):
                async for item in slow:
                    seen.append(item)
        except SubscriberOverflow:
            ended = True
        assert ended, "the slow stream ends (resumably) once it has yielded what it had"
        assert metrics.REGISTRY.get_sample_value("maka_subscriber_overflows_total") == overflows + 1
        assert [v for _k, _i, v in seen] == [str(n) for n in range(8)]
        slow.close()
        resumed = hub.subscribe({KEY: seen[-1][1]}, _text)  # behind the live feed: catches up by XRANGE
        rest = await _take(resumed, 42)
        assert [v for _k, _i, v in rest] == [str(n) for n in range(8, 50)]
        await _add(client, KEY, 3, start=50)  # then it is live again
        assert [v for _k, _i, v in await _take(resumed, 3)] == ["50", "51", "52"]
        assert [v for _k, _i, v in await _take(fast, 3)] == ["50", "51", "52"]
        fast.close()
        resumed.close()
        assert hub.subscribers == 0
    finally:
        await hub.aclose()
        await client.aclose()


async def test_one_follower_reads_streams_subscribed_while_it_blocks_without_waiting_for_its_block(
    redis_url: str,
) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    hub = FanOut(client, lanes=1, queue_size=64, block_ms=30_000)  # a block far longer than the bound below
    try:
        first = hub.subscribe({KEY: "0-0"}, _text)
        await _add(client, KEY, 1)
        assert [v for _k, _i, v in await _take(first, 1)] == ["0"]  # the follower now blocks on KEY
        second = hub.subscribe({OTHER: "0-0"}, _text)  # woken: its XREAD is re-issued with OTHER at once
        await _add(client, OTHER, 1)
        async with asyncio.timeout(5):
            assert [v for _k, _i, v in await _take(second, 1)] == ["0"]
        first.close()
        second.close()
    finally:
        await hub.aclose()
        await client.aclose()
