"""Bounded waiting: tests wait on conditions with a deadline, never with bare sleeps.

The suite's one polling helper. A check says "not yet" by returning ``None`` or ``False``; anything else
(``True``, a value, an empty list that *is* the answer) ends the wait and is returned. A check that polls
another process turns its transient errors (``UNAVAILABLE`` while a service restarts) into ``None``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar, overload

import grpc
import grpc.aio

T = TypeVar("T")

NotYet = Literal[False] | None


@overload
async def eventually(
    check: Callable[[], Awaitable[T | NotYet]], *, timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | NotYet], *, timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...


async def eventually(
    check: Callable[[], object],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> object:
    """Poll ``check`` (sync or async) every ``interval`` s until it returns neither ``None`` nor ``False``.

    Returns that value. The whole wait, a hanging async check included, is bounded by ``timeout`` s;
    then ``AssertionError`` names ``what``. An exception the check raises ends the wait at once.
    """
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            while True:
                value = check()
                result = await value if inspect.isawaitable(value) else value
                if result is not None and result is not False:
                    return result
                await asyncio.sleep(interval)
    except TimeoutError:
        if not scope.expired():
            raise  # the check's own timeout, not this wait's
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def none_while_unavailable(call: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T | None]]:
    """A check for :func:`eventually` that calls like a surface does: ``call()``'s result, or ``None`` ("not
    yet") while it fails ``UNAVAILABLE`` (a service restarting, a store failing over); other errors raise.

    ``call`` must return a value (an RPC's response), and be safe to repeat (an Answer keeps its
    submission id, which makes the retry idempotent).
    """

    async def check() -> T | None:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return None

    return check
