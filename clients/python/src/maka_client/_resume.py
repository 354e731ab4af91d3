"""The one resumable-stream loop of the client: every reconnecting stream (a surface's ``Attach``, a
caller's ``CallTool`` / ``WatchCall``) runs through :func:`resumable`.

It opens the stream with the last resume token seen, yields its items, and when the stream drops (a
status the ``retryable`` rule accepts, or an end without the consumer stopping) yields a
:class:`~maka_client.events.Reattaching`, waits a jittered exponential backoff (:mod:`maka_client._retry`)
and opens it again after that token. An item resets the backoff. A failure the rule refuses, or one
that lasts longer than ``give_up_after``, raises :class:`~maka_client.MakaError`. The consumer stops the
loop by returning (or closing the generator): the open stream is closed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc
import grpc.aio

from maka_client._codes import ClientErrorReason
from maka_client._errors import MakaError
from maka_client._retry import Backoff
from maka_client.events import Reattaching

Item = TypeVar("Item")

NOT_READY = "no server is ready"
"""The message of the ``UNAVAILABLE`` a reconnect reports when ``ready`` found no server in time."""


def _not_ready() -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details=NOT_READY
    )


async def resumable(
    open_stream: Callable[[str], AsyncIterator[Item]],
    *,
    token_of: Callable[[Item], str],
    backoff: Backoff,
    retryable: Callable[[grpc.aio.AioRpcError | None], bool],
    resume_token: str = "",
    give_up_after: float | None = None,
    ready: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncGenerator[Item | Reattaching, None]:
    """Yield the items of ``open_stream(token)``, reopening it after a drop with the last token seen.

    Args:
        open_stream: opens the stream that resumes after ``token`` (``""``: from the start); raises
            ``grpc.aio.AioRpcError`` when the stream fails, returns when it ends.
        token_of: an item's resume token (``""``: the item does not move the token, e.g. a keepalive).
        backoff: the delays between reconnects; an item resets them.
        retryable: whether a failure (``None``: the stream ended) may be fixed by reconnecting; when not,
            :class:`MakaError` is raised from it.
        resume_token: the token to resume after on the first open.
        give_up_after: seconds from the first failure since the last item after which a failure raises
            ``REATTACH_FAILED`` instead (``None``: never; ``0``: at the first failure).
        ready: awaited before each open; ``False`` counts as an ``UNAVAILABLE`` drop without opening.
    """
    token = resume_token
    attempts = backoff.attempts()
    failing_since: float | None = None
    while True:
        failure: grpc.aio.AioRpcError | None = None
        if ready is not None and not await ready():
            failure = _not_ready()
        else:
            try:
                async with contextlib.aclosing(_closing(open_stream(token))) as stream:
                    async for item in stream:
                        attempts.reset()
                        failing_since = None
                        token = token_of(item) or token
                        yield item
            except grpc.aio.AioRpcError as error:
                failure = error
        if not retryable(failure):
            assert failure is not None, "an ended stream is always retryable"
            raise MakaError.from_rpc(failure) from None
        code = failure.code().name if failure is not None else "EOF"
        now = time.monotonic()
        failing_since = failing_since if failing_since is not None else now
        if give_up_after is not None and (give_up_after <= 0 or now - failing_since >= give_up_after):
            raise MakaError(
                grpc.StatusCode.UNAVAILABLE,
                f"the call's stream dropped ({code}) and could not be resumed",
                reason=ClientErrorReason.REATTACH_FAILED,
            )
        delay = attempts.next_delay()
        yield Reattaching(code, attempts.failures, delay, MakaError.from_rpc(failure) if failure is not None else None)
        await asyncio.sleep(delay)  # reconnect backoff, not synchronisation


async def _closing(stream: AsyncIterator[Item]) -> AsyncGenerator[Item, None]:
    """``stream`` as an async generator, so ``aclosing`` closes it (and its call) when the consumer stops."""
    try:
        async for item in stream:
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
