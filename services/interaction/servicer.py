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

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import Principal, current_principal
from services.core.status import ServiceError, abort
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.fanout import SubscriberOverflow
from services.interaction.presence import Presence
from services.interaction.tier import InteractionTier

log = logging.getLogger("maka.interaction.servicer")

_Ctx = grpc.aio.ServicerContext[Any, Any]
R = TypeVar("R")


class _End:
    """Queue sentinel: the request side finished."""


_END = _End()
_QUEUE_SIZE = 256
_ANSWERED_KEPT = 4096
"""Answered Interactions a HostLink remembers from its ``settled`` pushes until their delivery report."""
"""Frames buffered per stream before the Redis follower waits for the client (backpressure)."""
OPEN_CONCURRENCY = 64
"""Most ``open`` frames of one HostLink processed at once; the link reads no further frame until one ends."""


class InteractionServicer(interaction_service_pb2_grpc.InteractionServiceServicer):
    """The gRPC face of the Interaction authority (see the proto for frames and errors)."""

    def __init__(
        self, tier: InteractionTier, *, presence: Presence | None = None, surfaces_listed_max: int = 200
    ) -> None:
        self.tier = tier
        self.presence = presence if presence is not None else Presence(ttl_seconds=30.0)
        """This replica's Attach streams, mirrored into Redis for ``ListSurfaces``
        (docs/design.md#attached-surfaces)."""
        self.surfaces_listed_max = surfaces_listed_max
        self._streams: set[asyncio.Queue[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def drain(self, timeout: float) -> None:
        """End every open HostLink/Attach stream (clients reconnect and resume elsewhere) and wait,
        at most ``timeout`` seconds, until their handlers finished. Called on graceful shutdown."""
        for queue in list(self._streams):
            with contextlib.suppress(asyncio.QueueFull):  # a full stream is cancelled by server.stop
                queue.put_nowait(_END)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()

    def _track(self, queue: asyncio.Queue[Any]) -> None:
        self._streams.add(queue)
        self._idle.clear()

    def _untrack(self, queue: asyncio.Queue[Any]) -> None:
        self._streams.discard(queue)
        if not self._streams:
            self._idle.set()

    async def _serve_bidi(
        self,
        context: _Ctx,
        queue: asyncio.Queue[R | ServiceError | _End],
        workers: Iterable[Callable[[], Coroutine[Any, Any, None]]],
        *,
        also_cancel: Iterable[asyncio.Task[Any]] = (),
    ) -> AsyncGenerator[R, None]:
        """The one-reader/one-writer loop of a bidi stream (HostLink and Attach).

        Starts one task per worker (the request reader and the Redis follower), which feed the bounded
        ``queue`` (:data:`_QUEUE_SIZE`), and yields what they queue until one queues :data:`_END` (the request
        side ended, the follower overflowed, or :meth:`drain`). A queued :class:`ServiceError` ends the stream
        with its status through :func:`abort`; per-frame failures are frames the workers queue. However the
        stream ends (end, error, cancellation, the client going away), every worker and every task still in
        ``also_cancel`` (read when the stream ends) is cancelled and awaited, and the stream stops counting
        for :meth:`drain`. Callers iterate it inside :func:`contextlib.aclosing` so that cleanup runs when
        their own generator is closed.
        """
        tasks = [asyncio.create_task(worker()) for worker in workers]
        self._track(queue)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, ServiceError):
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
        (closed in batches right after the reply; watched ones before it). Opens run concurrently, at
        most :data:`OPEN_CONCURRENCY` at a time, their replies matched by ``request_ref`` (possibly out of
        order); opens of the same invocation are decided in the order sent; a close or heartbeat is
        handled after every earlier frame was read and before any later frame starts.
        """
        requests = aiter(request_iterator)
        first = await anext(requests, None)
        if first is None:
            return
        if first.WhichOneof("frame") != "hello":
            await abort(context, errors.InvalidRequest("the first HostLink frame must be hello"))
        hello = first.hello
        principal = current_principal()
        authority = await self._call(context, lambda: self._resolve(principal, hello.host_id))
        epoch, closed, position, already = await self._call(context, lambda: self._hello(authority, hello))
        yield interaction_service_pb2.HostLinkResponse(
            epoch=interaction_service_pb2.EpochBegun(host_epoch=epoch, closed_count=closed)
        )
        reported: set[str] = set()
        answered: dict[str, interaction_pb2.Interaction] = {}
        for interaction in already:
            reported.add(interaction.interaction_id)
            _remember_answered(answered, interaction)
            yield interaction_service_pb2.HostLinkResponse(
                settled=interaction_service_pb2.InteractionSettled(interaction=interaction)
            )
        queue: asyncio.Queue[interaction_service_pb2.HostLinkResponse | ServiceError | _End] = asyncio.Queue(
            _QUEUE_SIZE
        )
        slots = asyncio.Semaphore(OPEN_CONCURRENCY)
        opens: set[asyncio.Task[None]] = set()
        last_open: dict[str, asyncio.Task[None]] = {}

        async def run_open(request: interaction_service_pb2.OpenInteraction, before: asyncio.Task[None] | None) -> None:
            try:
                if before is not None:  # the same invocation's earlier open decides first, as when serial
                    await asyncio.wait([before])
                try:
                    reply = await self._open(authority, epoch, request)
                except Exception:  # a bug must not leave the broker waiting: refuse this open only
                    log.exception("open_failed")
                    reply = interaction_service_pb2.HostLinkResponse(
                        open_rejected=interaction_service_pb2.OpenRejected(
                            request_ref=request.request_ref, message="internal error"
                        )
                    )
                await queue.put(reply)
            finally:
                slots.release()

        def forget(invocation_id: str, task: asyncio.Task[None]) -> None:
            opens.discard(task)
            if last_open.get(invocation_id) is task:
                del last_open[invocation_id]

        async def read() -> None:
            try:
                async for request in requests:
                    if request.WhichOneof("frame") == "open":
                        await slots.acquire()  # at most OPEN_CONCURRENCY opens in flight (backpressure)
                        invocation_id = request.open.binding.invocation_id
                        task = asyncio.create_task(run_open(request.open, last_open.get(invocation_id)))
                        last_open[invocation_id] = task
                        opens.add(task)
                        task.add_done_callback(functools.partial(forget, invocation_id))
                    else:  # close/delivery/heartbeat in order: later frames (opens included) start after them
                        await queue.put(await self._link_frame(authority, epoch, request, answered))
            except ServiceError as error:
                await queue.put(error)
                return
            if opens:
                await asyncio.wait(set(opens))  # every open is answered before the stream ends
            await queue.put(_END)

        async def follow() -> None:
            try:
                async for interaction in authority.follow_settled(epoch, position):
                    if interaction.interaction_id in reported:
                        reported.discard(interaction.interaction_id)
                        continue
                    _remember_answered(answered, interaction)
                    await queue.put(
                        interaction_service_pb2.HostLinkResponse(
                            settled=interaction_service_pb2.InteractionSettled(interaction=interaction)
                        )
                    )
            except SubscriberOverflow:  # the broker resumes (resume_epoch + watched ids): nothing is lost
                await queue.put(_END)

        async with contextlib.aclosing(self._serve_bidi(context, queue, (read, follow), also_cancel=opens)) as frames:
            async for frame in frames:
                yield frame

    async def _resolve(self, principal: Principal, host_id: str) -> InteractionAuthority:
        return self.tier.resolve(principal, host_id)

    async def _hello(
        self, authority: InteractionAuthority, hello: interaction_service_pb2.Hello
    ) -> tuple[int, int, str, list[interaction_pb2.Interaction]]:
        position = await authority.settled_position()
        mode = hello.WhichOneof("mode")
        if mode == "begin_new_epoch" and hello.begin_new_epoch:
            # Reply as soon as the epoch is fenced; the older forms close right after (see EpochBegun).
            epoch, closed = await authority.fence_epoch()
            await authority.close_older_of(list(hello.watched_interaction_ids))
            authority.close_older_epochs_soon()
        elif mode == "resume_epoch":
            await authority.resume_epoch(hello.resume_epoch)
            epoch, closed = hello.resume_epoch, 0
        else:
            raise errors.InvalidRequest("hello needs begin_new_epoch=true or resume_epoch")
        already = await authority.settled_of(list(hello.watched_interaction_ids))
        return epoch, closed, position, already

    async def _link_frame(
        self,
        authority: InteractionAuthority,
        epoch: int,
        request: interaction_service_pb2.HostLinkRequest,
        answered: dict[str, interaction_pb2.Interaction] | None = None,
    ) -> interaction_service_pb2.HostLinkResponse:
        frame = request.WhichOneof("frame")
        if frame == "open":
            return await self._open(authority, epoch, request.open)
        if frame == "close" and request.close.invocation_id and not request.close.interaction_id:
            fence = request.close
            changed, after = await authority.close_invocation(epoch, fence.invocation_id, fence.reason)
            closed = interaction_service_pb2.InteractionClosed(invocation_id=fence.invocation_id, changed=changed)
            if after is not None:
                closed.interaction_id = after.interaction_id
                closed.interaction.CopyFrom(after)
            return interaction_service_pb2.HostLinkResponse(closed=closed)
        if frame == "close":
            changed, after = await authority.close(epoch, request.close.interaction_id, request.close.reason)
            closed = interaction_service_pb2.InteractionClosed(
                interaction_id=request.close.interaction_id, changed=changed
            )
            if after is not None:
                closed.interaction.CopyFrom(after)
            return interaction_service_pb2.HostLinkResponse(closed=closed)
        if frame == "delivery":
            report = request.delivery
            known = answered.pop(report.interaction_id, None) if answered is not None else None
            changed, after = await authority.record_delivery(
                epoch, report.interaction_id, report.delivery, report.lost_reason, answered=known
            )
            recorded = interaction_service_pb2.DeliveryRecorded(interaction_id=report.interaction_id, changed=changed)
            if after is not None:
                recorded.interaction.CopyFrom(after)
            return interaction_service_pb2.HostLinkResponse(delivery_recorded=recorded)
        if frame == "heartbeat":
            renewed, deadline_ms = await authority.heartbeat(epoch)
            ack = interaction_service_pb2.HeartbeatAck(renewed=renewed)
            ack.lease_deadline.FromMilliseconds(deadline_ms)
            return interaction_service_pb2.HostLinkResponse(heartbeat_ack=ack)
        raise errors.InvalidRequest(f"unexpected HostLink frame {frame!r} after hello")

    async def _open(
        self, authority: InteractionAuthority, epoch: int, request: interaction_service_pb2.OpenInteraction
    ) -> interaction_service_pb2.HostLinkResponse:
        wait = request.wait.ToTimedelta().total_seconds() if request.HasField("wait") else None
        try:
            round_info = request.round if request.HasField("round") else None
            interaction = await authority.open(
                epoch, request.binding, request.form, wait, round_info, replay=request.replay
            )
        except ServiceError as error:
            return interaction_service_pb2.HostLinkResponse(
                open_rejected=interaction_service_pb2.OpenRejected(
                    request_ref=request.request_ref,
                    reason=errors.error_reason(error),
                    message=error.message,
                    violations=errors.violations_to_proto(error.violations),
                )
            )
        return interaction_service_pb2.HostLinkResponse(
            opened=interaction_service_pb2.InteractionOpened(request_ref=request.request_ref, interaction=interaction)
        )

    # --- Attach -----------------------------------------------------------------------------------

    async def Attach(
        self, request_iterator: AsyncIterator[interaction_service_pb2.AttachRequest], context: _Ctx
    ) -> AsyncIterator[interaction_service_pb2.AttachResponse]:
        """A surface's stream: subscribe → snapshot or replay → live events; answers on the same stream."""
        principal = current_principal()
        requests = aiter(request_iterator)
        first = await anext(requests, None)
        if first is None:
            return
        if first.WhichOneof("frame") != "subscribe":
            await abort(context, errors.InvalidRequest("the first Attach frame must be subscribe"))
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
                await queue.put(await authority.answer_outcome(principal, request.answer))

        async def follow() -> None:
            try:
                async for event, token in authority.follow_events(start.positions):
                    await queue.put(
                        interaction_service_pb2.AttachResponse(
                            event=interaction_service_pb2.Event(event=event, resume_token=token)
                        )
                    )
            except SubscriberOverflow:  # a resumable end: the surface resumes with its last token
                await queue.put(_END)

        stream_id = await self.presence.join(authority.store, principal, subscribe.surface_kind, list(start.positions))
        try:
            async with contextlib.aclosing(self._serve_bidi(context, queue, (read, follow))) as frames:
                async for frame in frames:
                    yield frame
        finally:
            await asyncio.shield(self.presence.leave_soon(stream_id))

    # --- Unary ------------------------------------------------------------------------------------

    async def Answer(
        self, request: interaction_service_pb2.AnswerRequest, context: _Ctx
    ) -> interaction_service_pb2.AnswerResponse:
        """Commit an answer (idempotent per submission id); errors per the proto's ErrorReason."""
        principal = current_principal()
        interaction = await self._call(
            context,
            lambda: self.tier.resolve(principal, request.host_id).answer(
                principal,
                request.interaction_id,
                request.answer,
                submission_id=request.submission_id,
                session_id=request.session_id or None,
            ),
        )
        return interaction_service_pb2.AnswerResponse(interaction=interaction)

    async def ListPending(
        self, request: interaction_service_pb2.ListPendingRequest, context: _Ctx
    ) -> interaction_service_pb2.ListPendingResponse:
        """Pending Interactions of the named (or every visible) session."""
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
        """The Host's attached surfaces that watch a session the caller may see (never a token)."""
        principal = current_principal()

        async def listed() -> tuple[list[interaction_service_pb2.AttachedSurface], int]:
            authority = self.tier.resolve(principal, request.host_id)
            return await self.presence.listed(authority.store, principal, self.surfaces_listed_max)

        surfaces, omitted = await self._call(context, listed)
        as_of = timestamp_pb2.Timestamp()
        as_of.GetCurrentTime()
        return interaction_service_pb2.ListSurfacesResponse(surfaces=surfaces, omitted=omitted, as_of=as_of)


def _remember_answered(
    answered: dict[str, interaction_pb2.Interaction], interaction: interaction_pb2.Interaction
) -> None:
    """Keep an answered, delivery-pending Interaction pushed on a HostLink for its delivery report
    (bounded: the oldest is dropped past :data:`_ANSWERED_KEPT`, whose report then reads Redis)."""
    if (
        interaction.state != interaction_pb2.INTERACTION_STATE_ANSWERED
        or interaction.delivery != interaction_pb2.DELIVERY_STATE_PENDING
    ):
        return
    if len(answered) >= _ANSWERED_KEPT:
        del answered[next(iter(answered))]
    answered[interaction.interaction_id] = interaction
