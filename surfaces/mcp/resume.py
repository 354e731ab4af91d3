"""Resumable 2025-11-25 streams: the reattach grace of a handshake-era call (docs/mcp-front-door.md).

With an event store the SDK's transport numbers every SSE event of a request's response stream and keeps serving
the request when that stream closes; the client comes back with ``GET`` and ``Last-Event-ID`` (the SDK's client
does so by itself) and the transport replays what it missed, then carries the rest of the request's messages on
the new stream. :class:`SessionEventStore` is that store, kept apart per ``Mcp-Session-Id``: the SDK's stream ids
are request ids, which every session reuses, so an event is stored with its session and replayed only to a
``GET`` of the same session. :class:`TagRequests` (ASGI middleware) gives every HTTP request its
:class:`RequestTag` (its session, whether its client went away), which the store reads from the request's
context: the transport stores a request's events in tasks whose context descends from the request that opened
the session or sent the request.

:func:`until_gone` is what a 2025-11-25 call waits on before it is stopped: its stream closed and no ``GET``
resumed it within the grace (or a resumed stream closed in turn and none resumed that one).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

import anyio
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from surfaces.mcp.auth import PRINCIPAL_STATE, principal_identity

log = logging.getLogger("maka.mcp.resume")

SESSION_HEADER = "mcp-session-id"
TAG_SCOPE_KEY = "maka.request_tag"
MAX_EVENTS = 10_000
"""Events kept for replay, over every session (the oldest go first)."""
DISCONNECT_POLL_SECONDS = 0.5
"""How often a waiting call asks whether its stream's client is still there (ASGI has no disconnect event
besides ``receive()``)."""

_current: contextvars.ContextVar[RequestTag | None] = contextvars.ContextVar("maka_mcp_request_tag", default=None)


@dataclass
class RequestTag:
    """One HTTP request: the MCP session it belongs to and whether its client went away."""

    scope: Scope
    receive: Receive
    session: str = ""
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def principal(self) -> str:
        """The identity of the principal the request was admitted as (:func:`surfaces.mcp.auth.principal_identity`;
        the gate records it in the scope after this tag was made)."""
        return principal_identity(self.scope.get("state", {}).get(PRINCIPAL_STATE))

    async def until_gone(self) -> None:
        """Return once the client closed this request's stream."""
        while not self.gone.is_set():
            if await Request(self.scope, self.receive).is_disconnected():
                self.gone.set()
                return
            with anyio.move_on_after(DISCONNECT_POLL_SECONDS):
                await self.gone.wait()


def _header(headers: object, name: bytes) -> str:
    for key, value in headers if isinstance(headers, list | tuple) else ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


class TagRequests:
    """ASGI middleware: a :class:`RequestTag` for every HTTP request, in its context and its scope."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                tag.gone.set()
            return message

        async def tagged_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not tag.session:
                tag.session = _header(message.get("headers", []), SESSION_HEADER.encode())  # a new session's id
            await send(message)

        tag = RequestTag(scope, tagged_receive, _header(scope.get("headers", []), SESSION_HEADER.encode()))
        scope[TAG_SCOPE_KEY] = tag
        token = _current.set(tag)
        try:
            await self.app(scope, tagged_receive, tagged_send)
        finally:
            _current.reset(token)


def request_tag(request: object) -> RequestTag | None:
    """The :class:`RequestTag` of a Starlette ``request`` (None when :class:`TagRequests` did not see it)."""
    if not isinstance(request, Request):
        return None
    tag = request.scope.get(TAG_SCOPE_KEY)
    return tag if isinstance(tag, RequestTag) else None


class SessionEventStore(EventStore):
    """The SDK's ``EventStore``, in memory, each event kept with its session (see the module docstring)."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        self._events: OrderedDict[str, tuple[str, str, StreamId, JSONRPCMessage | None]] = OrderedDict()
        self._resumed: dict[tuple[str, StreamId], asyncio.Queue[RequestTag]] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        tag = _current.get()
        event_id = uuid.uuid4().hex
        session, principal = (tag.session, tag.principal) if tag is not None else ("", "")
        self._events[event_id] = (session, principal, stream_id, message)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        tag = _current.get()
        stored = self._events.get(last_event_id)
        if tag is None or stored is None or not stored[0] or (stored[0], stored[1]) != (tag.session, tag.principal):
            log.info("mcp.resume_refused", extra={"known": stored is not None})
            return None  # another session's (or principal's) event, or one no longer kept: nothing to resume
        session, _principal, stream_id, _message = stored
        after = False
        for event_id, (other_session, _other, other_stream, message) in list(self._events.items()):
            if after and other_session == session and other_stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        log.info("mcp.stream_resumed")
        waiting = self._resumed.get((session, stream_id))
        if waiting is not None:
            waiting.put_nowait(tag)
        return stream_id

    async def until_gone(self, tag: RequestTag, stream_id: StreamId, grace_seconds: float) -> None:
        """Return once the client of request ``tag`` (stream ``stream_id`` of its session) is gone for good: its
        stream closed and no ``GET`` resumed it within ``grace_seconds``, following each resumed stream in turn."""
        key = (tag.session, stream_id)
        queue = self._resumed.setdefault(key, asyncio.Queue())
        try:
            while True:
                await tag.until_gone()
                if grace_seconds <= 0 or not tag.session:
                    return
                log.info("mcp.stream_closed_waiting", extra={"grace_seconds": grace_seconds})
                with anyio.move_on_after(grace_seconds):
                    tag = await queue.get()
                    continue
                return
        finally:
            self._resumed.pop(key, None)
