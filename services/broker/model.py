"""The Capability broker's provider-side records: provider streams, their outbox, registrations.

Plain data the broker reads and changes; no gRPC service code. Invocations are in
:mod:`services.broker.invocation`; :func:`mint_id` mints the broker's ids.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from maka.broker.v1 import broker_pb2


class Notifier:
    """A bounded outgoing queue drained by one stream, with an explicit end."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._maxsize = maxsize
        self.closed = False

    def push(self, item: Any) -> bool:
        """Queue ``item``; False when closed or full (the caller decides what full means)."""
        if self.closed or len(self._items) >= self._maxsize:
            return False
        self._items.append(item)
        self._wake.set()
        return True

    def pop(self) -> Any | None:
        """The oldest queued item, removed; ``None`` when nothing is queued (never waits)."""
        return self._items.popleft() if self._items else None

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def drain(self) -> AsyncIterator[Any]:
        """Yield queued items until closed and empty."""
        while True:
            self._wake.clear()
            while (item := self.pop()) is not None:
                yield item
            if self.closed:
                return
            await self._wake.wait()


@dataclass(eq=False)
class ProviderStream:
    """One provider ``Connect`` stream."""

    connection_id: str
    outbox: Notifier
    registration: Registration | None = None
    last_seen: float = field(default_factory=time.monotonic)
    on_overflow: Callable[[ProviderStream], None] | None = None
    """Called when a frame finds the queue full (the stream is closed by then)."""

    def send(self, frame: broker_pb2.ConnectResponse) -> None:
        """Queue ``frame``; a provider that does not read its stream is not buffered for without bound: a full
        queue closes the stream and calls :attr:`on_overflow`."""
        if self.outbox.push(frame) or self.outbox.closed:
            return
        self.outbox.close()
        if self.on_overflow is not None:
            self.on_overflow(self)

    def frames(self) -> AsyncIterator[broker_pb2.ConnectResponse]:
        """The frames to write to the provider, ending when the broker ends the stream."""
        return self.outbox.drain()


@dataclass(eq=False)
class Registration:
    """A live (or retired) provider registration and the Tools it offers."""

    registration_id: str
    provider_id: str
    display_name: str
    stream: ProviderStream
    tools: dict[str, broker_pb2.ToolDescriptor]
    """Qualified ``SERVER:TOOL`` → descriptor."""
    invocations: set[str] = field(default_factory=lambda: set[str]())
    """Ids of its live invocations (:class:`~services.broker.invocation.LiveInvocations` keeps them)."""
    live: bool = True
    sign_in: broker_pb2.SignInStatus | None = None
    """The OAuth sign-in status the provider last published for its server (``sign_in_status``)."""


def mint_id(prefix: str) -> str:
    """A fresh unguessable id the broker mints: ``<prefix>_<random>`` (registrations, connections, invocations)."""
    return f"{prefix}_{secrets.token_urlsafe(12)}"
