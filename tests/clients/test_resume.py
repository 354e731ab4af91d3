"""The one resumable-stream loop every reconnecting stream of the client uses (pure logic: scripted streams)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import grpc
import grpc.aio
import pytest

from maka_client import ClientErrorReason, MakaError, Reattaching, ReattachPolicy, resumable

FAST = ReattachPolicy(initial_delay=0.001, max_delay=0.002).backoff


def _failure(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="scripted")


class Script:
    """Each open yields the next script's items then raises its failure (None: ends); records the tokens."""

    def __init__(self, *runs: tuple[list[str], grpc.StatusCode | None]) -> None:
        self.runs = list(runs)
        self.tokens: list[str] = []
        self.closed = 0

    def open(self, token: str) -> AsyncIterator[str]:
        self.tokens.append(token)
        items, failure = self.runs.pop(0)
        return self._run(items, failure)

    async def _run(self, items: list[str], failure: grpc.StatusCode | None) -> AsyncGenerator[str, None]:
        try:
            for item in items:
                yield item
            if failure is not None:
                raise _failure(failure)
        finally:
            self.closed += 1


async def _take(stream: AsyncIterator[str | Reattaching], count: int) -> list[str | Reattaching]:
    async with asyncio.timeout(5):
        return [await anext(stream) for _ in range(count)]


async def test_a_dropped_stream_reopens_after_the_last_token_seen() -> None:
    script = Script((["t1", "t2"], grpc.StatusCode.UNAVAILABLE), ([], None), (["t3"], None))
    stream = resumable(
        script.open, token_of=lambda item: item, backoff=FAST, retryable=lambda _: True, resume_token="t0"
    )
    seen = await _take(stream, 6)
    await stream.aclose()
    assert [e if isinstance(e, str) else (e.code, e.attempt) for e in seen] == [
        "t1",
        "t2",
        ("UNAVAILABLE", 1),
        ("EOF", 2),
        "t3",
        ("EOF", 1),  # an item resets the attempts
    ]
    assert script.tokens == ["t0", "t2", "t2"]
    assert script.closed == 3


async def test_a_failure_the_rule_refuses_is_raised_with_its_code() -> None:
    script = Script((["t1"], grpc.StatusCode.PERMISSION_DENIED))
    stream = resumable(
        script.open,
        token_of=lambda item: item,
        backoff=FAST,
        retryable=lambda failure: failure is None or failure.code() != grpc.StatusCode.PERMISSION_DENIED,
    )
    assert await _take(stream, 1) == ["t1"]
    with pytest.raises(MakaError) as refused:
        await _take(stream, 1)
    assert refused.value.grpc_status_code is grpc.StatusCode.PERMISSION_DENIED


async def test_failures_past_the_give_up_bound_raise_reattach_failed() -> None:
    script = Script(([], grpc.StatusCode.UNAVAILABLE))
    stream = resumable(script.open, token_of=lambda item: item, backoff=FAST, retryable=lambda _: True, give_up_after=0)
    with pytest.raises(MakaError) as gave_up:
        await _take(stream, 1)
    assert gave_up.value.reason is ClientErrorReason.REATTACH_FAILED


async def test_a_server_that_is_not_ready_counts_as_an_unavailable_drop_without_opening() -> None:
    script = Script((["t1"], None))
    readiness = [False, True]

    async def ready() -> bool:
        return readiness.pop(0)

    stream = resumable(script.open, token_of=lambda item: item, backoff=FAST, retryable=lambda _: True, ready=ready)
    first, second = await _take(stream, 2)
    await stream.aclose()
    assert isinstance(first, Reattaching)
    assert first.code == "UNAVAILABLE"
    assert second == "t1"
    assert script.tokens == [""]
