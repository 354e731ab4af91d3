"""``maka.interaction.v1.InteractionService``: a thin grpc.aio adapter over :class:`InteractionAuthority`.

Bidirectional streams use the one-reader/one-writer pattern: a task reads the request iterator and
a task follows a Redis Stream; both feed one queue that the handler (an async generator) drains.
Domain errors become statuses only through :func:`services.core.status.abort`; per-frame failures
(an open rejected, an answer refused) are reported in frames and never end a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

import grpc.aio
from google.protobuf import timestamp_pb2

from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import Principal, current_principal
from services.core.status import ServiceError, abort
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.fanout import SubscriberOverflow
from services.interaction.host_link import HostLinkSession
from services.interaction.preamble import Preamble
from services.interaction.presence import Presence
from services.interaction.tier import InteractionTier

log = logging.getLogger("maka.interaction.servicer")

_Ctx = grpc.aio.ServicerContext[Any, Any]
R = TypeVar("R")


class _End:
    """Queue sentinel: the request side finished."""


_END = _End()
_QUEUE_SIZE = 256
"""Frames buffered per stream before the Redis follower waits for the client (backpressure)."""


class InteractionServicer(interaction_service_pb2_grpc.InteractionServiceServicer):
    """The gRPC face of the Interaction authority (see the proto for frames and errors)."""

    def __init__(
        self,
        tier: InteractionTier,
        *,
        presence: Presence | None = None,
        surfaces_listed_max: int = 200,
        attach_subscribe_timeout: float = 30.0,
        host_link_hello_timeout: float = 30.0,
    ) -> None:
        self.tier = tier
        self.attach_preamble = Preamble(
            "Attach", "subscribe", "MAKA_ATTACH_SUBSCRIBE_TIMEOUT_SECONDS", attach_subscribe_timeout
        )
        """An Attach stream's first frame: ``subscribe``."""
        self.host_link_preamble = Preamble(
            "HostLink", "hello", "MAKA_HOST_LINK_HELLO_TIMEOUT_SECONDS", host_link_hello_timeout
        )
        """A HostLink stream's first frame: ``hello`` (a ``Hello``)."""
        self.presence = presence if presence is not None else Presence(ttl_seconds=30.0)
        """This replica's Attach streams, mirrored into Redis for ``ListSurfaces``
        (docs/design.md#attached-surfaces)."""
        self.surfaces_listed_max = surfaces_listed_max
        self._streams: dict[asyncio.Queue[Any], ServiceError | _End] = {}
        """Every open stream's queue and what :meth:`drain` queues to end it."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._handlers: set[asyncio.Task[Any]] = set()
        """The tasks running a handler: gRPC's ``server.stop`` returns before the handlers it cancelled have
        unwound, and their cleanup still uses Redis (:meth:`handlers_ended`)."""

    def _handling(self) -> None:
        """Count the running task as a handler until it ends (the first line of every RPC method)."""
        task = asyncio.current_task()
        if task is not None and task not in self._handlers:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def handlers_ended(self, timeout: float) -> None:
        """Called once the server stopped: wait, at most ``timeout`` seconds, until every handler has ended
        (the server cancelled them; their cleanup, e.g. a presence leave, may still start store calls).
        Handlers still running then are cancelled and waited for as long again: none may use Redis after it
        is closed (a closed redis-py pool opens new connections, which nobody would close)."""
        pending = {task for task in self._handlers if task is not asyncio.current_task()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=timeout)
        if pending:
            log.warning("handlers_still_running", extra={"count": len(pending)})
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=timeout)

    async def drain(self, timeout: float) -> None:
        """End every open HostLink/Attach stream (clients reconnect and resume elsewhere) and wait,
        at most ``timeout`` seconds, until their handlers finished. Called on graceful shutdown.

        An Attach stream ends UNAVAILABLE / ``SHUTTING_DOWN`` (the surface reconnects to another replica
        and resumes with its last token); a HostLink stream ends OK (the broker re-links as it does after
        any end)."""
        for queue, end in list(self._streams.items()):
            with contextlib.suppress(asyncio.QueueFull):  # a full stream is cancelled by server.stop
                queue.put_nowait(end)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()

    def _track(self, queue: asyncio.Queue[Any], on_drain: ServiceError | _End) -> None:
        self._streams[queue] = on_drain
        self._idle.clear()

    def _untrack(self, queue: asyncio.Queue[Any]) -> None:
        self._streams.pop(queue, None)
        if not self._streams:
            self._idle.set()

    async def _serve_bidi(
        self,
        context: _Ctx,
        queue: asyncio.Queue[R | ServiceError | _End],
        workers: Iterable[Callable[[], Coroutine[Any, Any, None]]],
        *,
        also_cancel: Iterable[asyncio.Task[Any]] = (),
        method: str,
        on_drain: Callable[[], ServiceError | _End] = lambda: _END,
    ) -> AsyncGenerator[R, None]:
        """The one-reader/one-writer loop of a bidi stream (HostLink and Attach).

        Starts one task per worker (the request reader and the Redis follower), which feed the bounded
        ``queue`` (:data:`_QUEUE_SIZE`), and yields what they queue until one queues :data:`_END` (the request
        side ended, the follower overflowed, or :meth:`drain`). A queued :class:`ServiceError` ends the stream
        with its status through :func:`abort`; per-frame failures are frames the workers queue. However the
        stream ends (end, error, cancellation, the client going away), every worker and every task still in
        ``also_cancel`` (read when the stream ends) is cancelled and awaited, and the stream stops counting
        for :meth:`drain` (which queues ``on_drain()``). A stream the server ends with a status is logged
        (``stream_ended`` with the reason). Callers iterate it inside :func:`contextlib.aclosing` so that
        cleanup runs when their own generator is closed.
        """
        tasks = [asyncio.create_task(worker()) for worker in workers]
        self._track(queue, on_drain())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, ServiceError):
                    log.info(
                        "stream_ended",
                        extra={"code": item.code.name, "reason": str(item.reason), "method": method},
                    )
                    await abort(context, item)
                yield item
        finally:
            pending = [*tasks, *also_cancel]
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._untrack(queue)

    async def _call(self, context: _Ctx, call: Callable[[], Awaitable[R]]) -> R:
        try:
            return await call()
        except ServiceError as error:
            await abort(context, error)

    # --- HostLink ---------------------------------------------------------------------------------

    async def HostLink(
        self, request_iterator: AsyncIterator[interaction_service_pb2.HostLinkRequest], context: _Ctx
    ) -> AsyncIterator[interaction_service_pb2.HostLinkResponse]:
        """The broker's link: hello → epoch, then open/close/delivery/heartbeat, settled pushed.

        ``hello{begin_new_epoch}`` is answered as soon as the new epoch is fenced: ``closed_count`` is
        the number of older-epoch forms pending at the fence, each of which ends ``host_restarted``
        (closed in batches right after the reply; watched ones before it). The frames are applied by a
        :class:`~services.interaction.host_link.HostLinkSession` (its docstring states the ordering).
        """
        self._handling()
        requests = aiter(request_iterator)
        first = await self.host_link_preamble.first(requests, context)
        if first is None:
            return
        hello = first.hello
        principal = current_principal()
        authority = await self._call(context, lambda: self._resolve(principal, hello.host_id))
        queue: asyncio.Queue[interaction_service_pb2.HostLinkResponse | ServiceError | _End] = asyncio.Queue(
            _QUEUE_SIZE
        )
        session = await self._call(
            context,
            lambda: HostLinkSession.begin(authority, hello, send=queue.put, finish=functools.partial(queue.put, _END)),
        )
        for frame in session.greeting():
            yield frame
        workers = (functools.partial(session.read, requests), session.follow)
        async with contextlib.aclosing(
            self._serve_bidi(context, queue, workers, also_cancel=session.opens, method="HostLink")
        ) as frames:
            async for frame in frames:
                yield frame

    async def _resolve(self, principal: Principal, host_id: str) -> InteractionAuthority:
        return self.tier.resolve(principal, host_id)

    # --- Attach -----------------------------------------------------------------------------------

    async def Attach(
        self, request_iterator: AsyncIterator[interaction_service_pb2.AttachRequest], context: _Ctx
    ) -> AsyncIterator[interaction_service_pb2.AttachResponse]:
        """A surface's stream: subscribe → snapshot or replay → live events; answers on the same stream.

        A stream that sends no subscribe frame within ``attach_subscribe_timeout`` seconds ends INVALID_REQUEST
        (:class:`~services.interaction.preamble.Preamble`, as HostLink's hello)."""
        self._handling()
        principal = current_principal()
        requests = aiter(request_iterator)
        first = await self.attach_preamble.first(requests, context)
        if first is None:
            return
        subscribe = first.subscribe
        authority = await self._call(context, lambda: self._resolve(principal, subscribe.host_id))
        start = await self._call(
            context,
            lambda: authority.attach_start(principal, list(subscribe.session_ids), subscribe.resume_token),
        )
        if start.snapshot is not None:
            yield interaction_service_pb2.AttachResponse(
                snapshot=interaction_service_pb2.Snapshot(
                    pending=start.snapshot, resume_token=authority.token(start.positions)
                )
            )
        queue: asyncio.Queue[interaction_service_pb2.AttachResponse | ServiceError | _End] = asyncio.Queue(_QUEUE_SIZE)

        async def read() -> None:
            async for request in requests:
                if request.WhichOneof("frame") != "answer":
                    await queue.put(errors.InvalidRequest("only answer frames may follow subscribe"))
                    return
                await queue.put(await authority.answer_outcome(principal, request.answer, subscribe.surface_kind))

        async def follow() -> None:
            try:
                async for event, token in authority.follow_events(start.positions, principal):
                    await queue.put(
                        interaction_service_pb2.AttachResponse(
                            event=interaction_service_pb2.Event(event=event, resume_token=token)
                        )
                    )
            except SubscriberOverflow:  # a resumable end: the surface resumes with its last token
                await queue.put(errors.SubscriberOverflowed())

        stream_id = await self.presence.join(authority.store, principal, subscribe.surface_kind, list(start.positions))
        try:
            serve = self._serve_bidi(context, queue, (read, follow), method="Attach", on_drain=errors.ShuttingDown)
            async with contextlib.aclosing(serve) as frames:
                async for frame in frames:
                    yield frame
        finally:
            await asyncio.shield(self.presence.leave_soon(stream_id))

    # --- Unary ------------------------------------------------------------------------------------

    async def Answer(
        self, request: interaction_service_pb2.AnswerRequest, context: _Ctx
    ) -> interaction_service_pb2.AnswerResponse:
        """Commit an answer (idempotent per submission id); errors per the proto's ErrorReason."""
        self._handling()
        principal = current_principal()
        interaction = await self._call(
            context,
            lambda: self.tier.resolve(principal, request.host_id).answer(
                principal,
                request.interaction_id,
                request.answer,
                submission_id=request.submission_id,
                session_id=request.session_id or None,
                surface_kind=request.surface_kind,
            ),
        )
        return interaction_service_pb2.AnswerResponse(interaction=interaction)

    async def ListPending(
        self, request: interaction_service_pb2.ListPendingRequest, context: _Ctx
    ) -> interaction_service_pb2.ListPendingResponse:
        """Pending Interactions of the named (or every visible) session."""
        self._handling()
        principal = current_principal()
        pending = await self._call(
            context,
            lambda: self.tier.resolve(principal, request.host_id).list_pending(principal, list(request.session_ids)),
        )
        as_of = timestamp_pb2.Timestamp()
        as_of.GetCurrentTime()
        return interaction_service_pb2.ListPendingResponse(pending=pending, as_of=as_of)

    async def GetInteraction(
        self, request: interaction_service_pb2.GetInteractionRequest, context: _Ctx
    ) -> interaction_service_pb2.GetInteractionResponse:
        """One Interaction visible to the caller, pending or settled."""
        self._handling()
        principal = current_principal()
        interaction = await self._call(
            context,
            lambda: self.tier.resolve(principal, request.host_id).get(
                principal, request.interaction_id, request.session_id or None
            ),
        )
        return interaction_service_pb2.GetInteractionResponse(interaction=interaction)

    async def ListSurfaces(
        self, request: interaction_service_pb2.ListSurfacesRequest, context: _Ctx
    ) -> interaction_service_pb2.ListSurfacesResponse:
        """The Host's attached surfaces that watch a session the caller may see; a person's own only (never a
        token)."""
        self._handling()
        principal = current_principal()

        async def listed() -> tuple[list[interaction_service_pb2.AttachedSurface], int]:
            authority = self.tier.resolve(principal, request.host_id)
            return await self.presence.listed(authority.store, principal, self.surfaces_listed_max)

        surfaces, omitted = await self._call(context, listed)
        as_of = timestamp_pb2.Timestamp()
        as_of.GetCurrentTime()
        return interaction_service_pb2.ListSurfacesResponse(surfaces=surfaces, omitted=omitted, as_of=as_of)

    async def ListHistory(
        self, request: interaction_service_pb2.ListHistoryRequest, context: _Ctx
    ) -> interaction_service_pb2.ListHistoryResponse:
        """Settled forms the caller may see, newest first, paged (never an answer value)."""
        self._handling()
        principal = current_principal()
        entries, next_token = await self._call(
            context,
            lambda: self.tier.resolve(principal, request.host_id).list_history(
                principal, list(request.session_ids), request.page_size, request.page_token
            ),
        )
        as_of = timestamp_pb2.Timestamp()
        as_of.GetCurrentTime()
        return interaction_service_pb2.ListHistoryResponse(entries=entries, next_page_token=next_token, as_of=as_of)

    async def ListHosts(
        self, request: interaction_service_pb2.ListHostsRequest, context: _Ctx
    ) -> interaction_service_pb2.ListHostsResponse:
        """The Hosts the caller may use: the tier's Hosts its token names (nothing about others)."""
        self._handling()
        principal = current_principal()
        hosts = await self._call(context, lambda: self._hosts_for(principal))
        return interaction_service_pb2.ListHostsResponse(host_ids=hosts)

    async def _hosts_for(self, principal: Principal) -> list[str]:
        return self.tier.hosts_for(principal)
