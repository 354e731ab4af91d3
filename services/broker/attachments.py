"""The callers attached to invocations (docs/clients.md): caller streams, the reattach grace, retention.

Any number of caller streams (``CallTool``, ``WatchCall``) follow an invocation's
:class:`~services.broker.call_log.CallLog`, with ``status`` keepalives. While one runs the invocation counts it
as attached; when the last one ends before the terminal event the reattach grace starts, and when it runs out
with nobody attached the broker is told to stop the invocation (as Stop does). A settled invocation stays
reattachable for the grace, and its ``call_id`` (keyed by principal and session) maps to it for the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncGenerator, Callable

from maka.broker.v1 import broker_pb2
from services.broker.invocation import Invocation

log = logging.getLogger("maka.broker.broker")

CallKey = tuple[str, str, str]
"""(owner, session id, call id)."""


class CallerAttachments:
    """Caller streams of invocations, the reattach grace, and settled invocations kept reattachable.

    Args:
        keepalive_seconds: a caller stream silent this long gets a ``status`` event.
        grace_seconds: how long an invocation with no caller attached keeps running before
            ``on_abandoned`` is called; also how long a settled one stays reattachable.
        retained_limit: most settled invocations kept reattachable at once (the oldest go first).
        counters: the broker's counters (``callers_detached``, ``detached_stops``).
        on_abandoned: stops an invocation nobody reattached to within the grace.
    """

    def __init__(
        self,
        *,
        keepalive_seconds: float,
        grace_seconds: float,
        retained_limit: int,
        counters: Counter[str],
        on_abandoned: Callable[[Invocation], None],
    ) -> None:
        self._keepalive = keepalive_seconds
        self._grace = grace_seconds
        self._retained_limit = retained_limit
        self._counters = counters
        self._on_abandoned = on_abandoned
        self._retained: OrderedDict[str, tuple[float, Invocation]] = OrderedDict()
        """settled invocations still reattachable: id → (monotonic deadline, invocation)."""
        self._by_call_id: dict[CallKey, Invocation] = {}
        """(owner, session id, call id) → live or retained invocation (idempotent start)."""
        self.delivered = asyncio.Event()
        """Set whenever a caller stream sent an invocation's terminal event (cleared by whoever waits)."""

    # --- call ids and retention -----------------------------------------------------------------

    def by_call_id(self, owner: str, session_id: str, call_id: str) -> Invocation | None:
        """The live or retained invocation ``owner`` started with ``call_id`` in the session (none for no id)."""
        return self._by_call_id.get((owner, session_id, call_id)) if call_id else None

    def remember_call_id(self, invocation: Invocation) -> None:
        """Map the invocation's ``call_id`` (if any) to it while it is live or retained."""
        if invocation.call_id:
            self._by_call_id[(invocation.owner, invocation.session_id, invocation.call_id)] = invocation

    def retained(self, invocation_id: str) -> Invocation | None:
        """The settled invocation ``invocation_id`` if it is still reattachable."""
        retained = self._retained.get(invocation_id)
        return None if retained is None else retained[1]

    def retain(self, invocation: Invocation) -> None:
        """Keep a settled invocation reattachable (WatchCall, call id) for the reattach grace."""
        if invocation.grace is not None:
            invocation.grace.cancel()
            invocation.grace = None
        if invocation.registration is None or self._grace <= 0:
            self._forget_call_id(invocation)
            return
        self._retained[invocation.invocation_id] = (time.monotonic() + self._grace, invocation)
        while len(self._retained) > self._retained_limit:
            _, (_, dropped) = self._retained.popitem(last=False)
            self._forget_call_id(dropped)

    def undelivered_deadline(self) -> float | None:
        """The latest monotonic time until which a settled invocation whose outcome no caller has received
        yet stays reattachable (None: there is none). A draining Host waits for those callers, who may be
        reattaching right now (docs/design.md#drain-vs-crash)."""
        now = time.monotonic()
        deadlines = [d for d, inv in self._retained.values() if d > now and not inv.outcome_delivered]
        return max(deadlines) if deadlines else None

    async def outcomes_delivered(self) -> None:
        """Until every settled call's outcome reached a caller or its reattach grace ran out."""
        while (deadline := self.undelivered_deadline()) is not None:
            self.delivered.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                    await self.delivered.wait()

    def prune(self) -> None:
        """Forget the settled invocations whose retention ended."""
        now = time.monotonic()
        while self._retained:
            invocation_id, (deadline, invocation) = next(iter(self._retained.items()))
            if deadline > now:
                return
            del self._retained[invocation_id]
            self._forget_call_id(invocation)

    def _forget_call_id(self, invocation: Invocation) -> None:
        key = (invocation.owner, invocation.session_id, invocation.call_id)
        if invocation.call_id and self._by_call_id.get(key) is invocation:
            del self._by_call_id[key]

    # --- caller streams and the grace -----------------------------------------------------------

    async def follow(
        self, invocation: Invocation, after: int = 0, *, status_first: bool = False
    ) -> AsyncGenerator[broker_pb2.CallToolResponse, None]:
        """One caller stream of ``invocation``: its events after sequence ``after``, then live ones,
        with ``status`` keepalives. While it runs the invocation counts it as attached; when the last
        stream ends before the terminal event, the reattach grace starts."""
        self._attach(invocation)
        try:
            async for event in invocation.log.follow(
                after, keepalive=self._keepalive, status=invocation.status, status_first=status_first
            ):
                yield event
                if event is invocation.terminal:
                    invocation.outcome_delivered = True
                    self.delivered.set()
        finally:
            self._detach(invocation)

    def _attach(self, invocation: Invocation) -> None:
        invocation.watchers += 1
        if invocation.grace is not None:
            invocation.grace.cancel()
            invocation.grace = None

    def _detach(self, invocation: Invocation) -> None:
        invocation.watchers -= 1
        if invocation.watchers > 0 or invocation.is_terminal:
            return
        self._counters["callers_detached"] += 1
        log.info("caller_detached", extra={"invocation_id": invocation.invocation_id})
        if self._grace <= 0:
            self._grace_ended(invocation)
            return
        invocation.grace = asyncio.get_running_loop().call_later(self._grace, self._grace_ended, invocation)

    def _grace_ended(self, invocation: Invocation) -> None:
        invocation.grace = None
        if invocation.watchers > 0 or invocation.is_terminal:
            return
        self._counters["detached_stops"] += 1
        self._on_abandoned(invocation)
