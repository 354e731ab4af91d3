"""One invocation's caller events as a sequenced log that any number of streams follow (docs/clients.md).

Every lifecycle event (``accepted``, ``awaiting_interaction``, ``interaction_settled``, the one terminal
event) and every ``progress`` event gets the next sequence number (1-based) and a resume token. A
stream follows the log from a position: it gets every retained event after it, then live ones, and
a ``status`` event (not logged; it repeats the last sequence) whenever it was silent for the keepalive
interval. Lifecycle events are never dropped; when more than ``max_progress`` progress events are
retained the oldest progress event is dropped, so a late reattach may miss old progress only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from maka.broker.v1 import broker_pb2


def resume_token(sequence: int) -> str:
    """The resume token of the event with ``sequence`` (opaque to callers)."""
    return str(sequence)


def parse_resume_token(token: str) -> int | None:
    """The sequence a resume token names (0 for empty = from the start); None when malformed."""
    if not token:
        return 0
    if not token.isascii() or not token.isdigit() or len(token) > 20:
        return None
    return int(token)


class CallLog:
    """The sequenced events of one invocation, ended by exactly one terminal event."""

    def __init__(self, max_progress: int) -> None:
        self._entries: deque[broker_pb2.CallToolResponse] = deque()
        self._max_progress = max(1, max_progress)
        self._progress = 0
        self._changed = asyncio.Event()
        self.last_sequence = 0
        self.closed = False
        self.dropped_progress = 0

    def append(self, event: broker_pb2.CallToolResponse, *, terminal: bool = False) -> None:
        """Log ``event`` with the next sequence and wake every follower; ``terminal`` ends the log.

        Appending after the terminal event is ignored (an invocation settles once).
        """
        if self.closed:
            return
        self.last_sequence += 1
        event.sequence = self.last_sequence
        event.resume_token = resume_token(self.last_sequence)
        if event.WhichOneof("event") == "progress":
            self._progress += 1
            if self._progress > self._max_progress:
                self._drop_oldest_progress()
        self._entries.append(event)
        self.closed = terminal
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _drop_oldest_progress(self) -> None:
        for index, entry in enumerate(self._entries):
            if entry.WhichOneof("event") == "progress":
                del self._entries[index]
                self._progress -= 1
                self.dropped_progress += 1
                return

    def after(self, sequence: int) -> list[broker_pb2.CallToolResponse]:
        """The retained events after ``sequence``, oldest first."""
        return [entry for entry in self._entries if entry.sequence > sequence]

    @property
    def terminal(self) -> broker_pb2.CallToolResponse | None:
        """The terminal event once the log is closed."""
        return self._entries[-1] if self.closed and self._entries else None

    async def follow(
        self,
        after: int,
        *,
        keepalive: float,
        status: Callable[[], broker_pb2.CallStatus],
        status_first: bool = False,
    ) -> AsyncIterator[broker_pb2.CallToolResponse]:
        """Every event after ``after``, then live ones until the terminal event; a ``status`` event
        (built by ``status``) after each ``keepalive`` seconds of silence, and once right after the
        replay when ``status_first`` (a reattach learns the phase at once)."""
        position = after
        first = status_first
        while True:
            changed = self._changed
            batch = self.after(position)
            for event in batch:
                yield event
                position = event.sequence
            if self.closed and position >= self.last_sequence:
                return
            if batch:
                continue
            if first:
                first = False
                yield self._status(status)
                continue
            try:
                async with asyncio.timeout(keepalive):
                    await changed.wait()
            except TimeoutError:
                yield self._status(status)

    def _status(self, status: Callable[[], broker_pb2.CallStatus]) -> broker_pb2.CallToolResponse:
        return broker_pb2.CallToolResponse(
            status=status(), sequence=self.last_sequence, resume_token=resume_token(self.last_sequence)
        )
