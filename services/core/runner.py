"""How every service process runs its ``main`` coroutine: on uvloop by default.

uvloop (libuv) runs the same asyncio programs with less CPU per callback, socket read and timer than the
standard loop; every service is an event loop moving small gRPC, Redis and HTTP messages, so that is
most of their work (measured by ``make bench``, see bench/README.md). ``MAKA_EVENT_LOOP=asyncio``
(:class:`~services.core.settings.LoopSettings`) selects the standard loop, e.g. for debugging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

from services.core.settings import LoopSettings

T = TypeVar("T")


def loop_factory(settings: LoopSettings | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for :class:`asyncio.Runner`: uvloop's, or None (the standard loop)."""
    chosen = (settings or LoopSettings()).event_loop
    if chosen == "asyncio":
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :class:`LoopSettings` selects."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
