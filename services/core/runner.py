"""How every service process runs its ``main`` coroutine: on uvloop by default.

uvloop (libuv) runs the same asyncio programs with less CPU per callback, socket read and timer than the
standard loop; every service is an event loop moving small gRPC, Redis and HTTP messages, so that is
most of their work (measured by ``make bench``, see bench/README.md). ``MAKA_EVENT_LOOP=asyncio``
(:class:`~services.core.settings.LoopSettings`) selects the standard loop, e.g. for debugging.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

import uvloop
from pydantic import ValidationError

from services.core.settings import LoopSettings, settings_problem

T = TypeVar("T")


def loop_factory(settings: LoopSettings | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for :class:`asyncio.Runner`: uvloop's, or None (the standard loop)."""
    chosen = (settings or LoopSettings()).event_loop
    if chosen == "asyncio":
        return None
    return uvloop.new_event_loop


SETTINGS_INVALID_EXIT = 2
"""The exit status of a service whose ``MAKA_*`` settings are refused."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :class:`LoopSettings` selects. Settings ``main`` reads that do not
    validate stop the process with one ``settings_invalid: <setting>: <why>`` line on stderr (exit status 2),
    never a traceback."""
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(main)
    except ValidationError as error:
        settings_refused(error)


def settings_refused(error: ValidationError) -> NoReturn:
    """Stop the process for refused settings: one ``settings_invalid: …`` line on stderr, exit status 2."""
    sys.stderr.write(f"settings_invalid: {settings_problem(error)}\n")
    raise SystemExit(SETTINGS_INVALID_EXIT) from None
