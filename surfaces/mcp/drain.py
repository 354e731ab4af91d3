"""The MCP front door's drain on SIGTERM (docs/mcp-front-door.md "In Kubernetes", docs/design.md#drain-vs-crash).

A Host pod's front door holds its calls in its own process, so a planned stop (a rollout, a node drain) would lose
the calls whose forms people are answering. With a drain budget (``MAKA_DRAIN_SECONDS``) the process keeps serving
HTTP on SIGTERM: every call in flight keeps running, its 2026-07-28 retries and 2025-11-25 resumptions still
work, and a new call still runs (through a pool of Hosts, on a ready one); only ``/readyz`` changes, to 503
``draining`` (``/healthz``, liveness, stays 200). The process exits as soon as no call is in flight, or when the
budget runs out. Then, as on any stop, :meth:`Flights.stop_calls` stops the calls still in flight (each turn's
broker ``Stop``, on the Host that owns it: nothing stays pending) before the HTTP server stops.

:class:`Flights` counts what "in flight" means: every ``tools/call`` request being handled (a 2025-11-25 call runs
in its handler, also while its stream waits for the client's ``GET`` with ``Last-Event-ID``) and every 2026-07-28
detached call (:class:`surfaces.mcp.elicit.Calls`, also while it waits for its client's retry), and one that
ended while its client was between rounds, until the client's retry fetched the outcome or the reattach grace ran
out (:meth:`Flights.hold`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import anyio
from mcp_types import CallToolResult
from starlette.requests import Request
from starlette.responses import PlainTextResponse

from services.core.messages import lost_call
from surfaces.mcp.calls import error_result

log = logging.getLogger("maka.mcp.drain")

T = TypeVar("T")

ENDPOINT_STOPPED = "the MCP endpoint stopped (the Maka stack is stopping) while the call ran; its turn was stopped"
"""Why a call still in flight when the endpoint stops is ``LOST`` (:func:`stopped_result`)."""


def stopped_result() -> CallToolResult:
    """What a call still in flight when the endpoint stops answers its client (``LOST: ...; the outcome is unknown
    and nothing was replayed``, as ``maka call`` prints), instead of a stream closing without a response."""
    return error_result(f"LOST: {lost_call(ENDPOINT_STOPPED)}")


READY_PATH = "/readyz"
"""Readiness: 200 ``ok``, 503 ``draining`` from the drain's start (the pod leaves its pool's rotation)."""


class Flights:
    """The calls in flight in this process and whether it drains (see the module docstring)."""

    def __init__(self) -> None:
        self.requests = 0
        """``tools/call`` requests being handled."""
        self.detached = 0
        """2026-07-28 detached calls running."""
        self.draining = False
        self._tasks: set[asyncio.Task[Any]] = set()
        """The tasks that run the calls in flight (what :meth:`stop_calls` waits for)."""
        self._answering: set[asyncio.Task[Any]] = set()
        """Those of requests that answer their client themselves when the endpoint stops (:meth:`answered`)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self.stopping = asyncio.Event()
        """Set when the endpoint stops: each call still in flight stops its turn and answers :func:`stopped_result`."""

    @property
    def count(self) -> int:
        """Requests plus detached calls (a detached call with a request attached counts twice: both must end)."""
        return self.requests + self.detached

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Count one ``tools/call`` request while the block runs."""
        self.requests += 1
        task = self._track()
        try:
            yield
        finally:
            self.requests -= 1
            self._untrack(task)

    @contextlib.contextmanager
    def detached_call(self) -> Iterator[None]:
        """Count one detached call while the block runs."""
        self.detached += 1
        task = self._track()
        try:
            yield
        finally:
            self.detached -= 1
            self._untrack(task)

    def hold(self, delivered: asyncio.Event, seconds: float) -> None:
        """Count a detached call whose outcome waits for its client as in flight (from now) until ``delivered`` is
        set, at most ``seconds`` (its reattach grace)."""
        if seconds <= 0 or delivered.is_set():
            return

        async def holding() -> None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await delivered.wait()

        def released(task: asyncio.Task[None]) -> None:
            self.detached -= 1
            self._untrack(task)

        log.info("mcp.outcome_held", extra={"grace_seconds": seconds})
        self.detached += 1
        task = asyncio.create_task(holding(), name="maka-mcp-outcome-held")
        self._tasks.add(task)
        self._changed()
        task.add_done_callback(released)

    def _track(self) -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._changed()
        return task

    def _untrack(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            self._tasks.discard(task)
        self._changed()

    def _changed(self) -> None:
        if self.count:
            self._idle.clear()
        else:
            self._idle.set()

    async def until_idle(self) -> None:
        """Return once no call is in flight."""
        await self._idle.wait()

    async def drain(self, budget_seconds: float) -> bool:
        """Turn not ready and wait, at most ``budget_seconds``, until no call is in flight; True when none is left.
        Logs ``mcp.draining`` and ``mcp.drained`` with the counts (nothing of a call's content)."""
        self.draining = True
        log.info(
            "mcp.draining",
            extra={"calls": self.requests, "detached_calls": self.detached, "drain_seconds": budget_seconds},
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(budget_seconds):
                await self.until_idle()
        log.info("mcp.drained", extra={"calls_left": self.requests, "detached_calls_left": self.detached})
        return self.count == 0

    async def answered(self, call: Awaitable[T]) -> T | CallToolResult:
        """Await ``call`` (in this task) until it ends, or until the endpoint stops (:meth:`stop_calls`): then
        cancel it (which stops its turn, :func:`surfaces.mcp.calls.run_call`) and return :func:`stopped_result`,
        so the client's request is answered before its stream closes."""
        current = asyncio.current_task()
        with anyio.CancelScope() as scope:
            watcher = asyncio.ensure_future(self._cancel_when_stopping(scope))
            if current is not None:
                self._answering.add(current)
            try:
                return await call
            finally:
                watcher.cancel()
                self._answering.discard(current)
        log.info("mcp.call_lost_at_stop")
        return stopped_result()

    async def _cancel_when_stopping(self, scope: anyio.CancelScope) -> None:
        await self.stopping.wait()
        scope.cancel()

    async def stop_calls(self, timeout: float) -> int:
        """Stop every call still in flight: each request answers its client :func:`stopped_result` after stopping its
        turn on its Host (:meth:`answered`); detached calls are cancelled (their attached requests answer the same).
        Waits, at most ``timeout`` s, until they ended; returns how many there were."""
        self.stopping.set()
        tasks = [task for task in self._tasks if not task.done() and task is not asyncio.current_task()]
        for task in tasks:
            if task not in self._answering:  # a detached call, or a request that answers nothing by itself
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
            for task in tasks:
                task.cancel()  # what did not end in time
            log.info("mcp.calls_stopped", extra={"calls": len(tasks), "unfinished": sum(not t.done() for t in tasks)})
        return len(tasks)

    async def readyz(self, _request: Request) -> PlainTextResponse:
        """``/readyz``: 503 ``draining`` once the drain started, else 200 ``ok``."""
        if self.draining:
            return PlainTextResponse("draining", status_code=503)
        return PlainTextResponse("ok")
