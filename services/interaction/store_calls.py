"""How every store call reaches Redis: bounded, shielded from cancellation, its failures one error.

Rules: a Redis connection failure reaches a caller only as
:class:`~services.interaction.errors.StoreUnavailable`; a cancelled caller abandons the result, never the
command (the pooled connection is never left half-written); :func:`finish_calls` waits for abandoned calls at
shutdown. See docs/design.md#lua-scripts.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import redis.exceptions

from services.interaction.errors import StoreUnavailable

P = ParamSpec("P")
T = TypeVar("T")

_REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError)


_IN_FLIGHT: set[asyncio.Future[Any]] = set()
"""Store calls running in this process, abandoned ones (their caller was cancelled) included."""


def _retrieve(task: asyncio.Future[Any]) -> None:
    _IN_FLIGHT.discard(task)
    if not task.cancelled():
        task.exception()  # an abandoned call's error is expected (e.g. Redis closed at shutdown)


async def finish_calls(timeout: float = 2.0) -> None:
    """Wait (at most ``timeout`` s) for the store calls in flight, abandoned ones included, so that none
    opens a connection after the client is closed (a closed redis-py pool still hands out new ones)."""
    pending = {task for task in _IN_FLIGHT if task.get_loop() is asyncio.get_running_loop()}
    if pending:
        await asyncio.wait(pending, timeout=timeout)


def store_call(func: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Map Redis connection failures to StoreUnavailable (the only Redis error a caller sees).

    The Redis call runs shielded from cancellation: a caller cancelled mid-command (a stream that
    ended, the reaper stopping) abandons the result, but the command itself completes, so the
    pooled connection is never left half-written or half-read (which otherwise wedges later calls).
    """

    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        limiter: asyncio.Semaphore | None = getattr(args[0], "limiter", None)
        try:
            if limiter is None:
                return await func(*args, **kwargs)
            async with limiter:  # at most this many commands (connections) at once
                return await func(*args, **kwargs)
        except _REDIS_DOWN as error:
            raise StoreUnavailable() from error

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        task = asyncio.ensure_future(call(*args, **kwargs))
        _IN_FLIGHT.add(task)
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    return wrapper


def as_text(value: Any) -> str:
    """A Redis reply (bytes or a number) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
