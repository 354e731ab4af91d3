"""The Interaction service's side of ``InteractionService.HostLink``: one broker's link after its ``hello``.

:class:`HostLinkSession` holds what one link knows (its Host epoch, the settled Stream position it follows,
the settlements already reported, the answered Interactions awaiting their delivery report, the opens in
flight) and applies each request frame with one ``_apply_<frame>`` method. The servicer is the adapter:
it reads the ``hello``, builds the session with :meth:`HostLinkSession.begin`, yields its
:meth:`~HostLinkSession.greeting`, then runs :meth:`~HostLinkSession.read` and
:meth:`~HostLinkSession.follow` as the stream's two workers.

Ordering (the proto's contract): opens run concurrently, at most :data:`OPEN_CONCURRENCY` at a time, their
replies matched by ``request_ref`` (possibly out of order); opens of the same invocation are decided in
the order sent; a close, delivery or heartbeat is handled after every earlier frame was read and before any
later frame starts. Every open is answered before the stream ends.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core.status import ServiceError
from services.interaction import errors
from services.interaction.authority import InteractionAuthority
from services.interaction.fanout import SubscriberOverflow

log = logging.getLogger("maka.interaction.host_link")

OPEN_CONCURRENCY = 64
"""Most ``open`` frames of one HostLink processed at once; the link reads no further frame until one ends."""
ANSWERED_KEPT = 4096
"""Answered Interactions a HostLink remembers from its ``settled`` pushes until their delivery report."""

Response = interaction_service_pb2.HostLinkResponse
Send = Callable[[Response | ServiceError], Awaitable[None]]
"""Queues a frame for the broker, or a :class:`ServiceError` that ends the stream with its status."""


class HostLinkSession:
    """One HostLink stream of Host epoch ``epoch`` (see the module docstring).

    ``send`` queues what the stream yields (bounded: it waits while the broker is slow); ``finish`` ends the
    stream (the request side ended, or the settled feed overflowed and the broker resumes).
    """

    def __init__(
        self,
        authority: InteractionAuthority,
        epoch: int,
        *,
        closed_count: int,
        position: str,
        already: list[interaction_pb2.Interaction],
        send: Send,
        finish: Callable[[], Awaitable[None]],
    ) -> None:
        self.authority = authority
        self.epoch = epoch
        self.closed_count = closed_count
        """Older-epoch forms pending at the fence of a ``begin_new_epoch`` hello (each ends ``host_restarted``)."""
        self.position = position
        """The settled Stream position taken before the watched ids were checked."""
        self.already = already
        """Watched Interactions already settled at hello, pushed right after the ``epoch`` reply."""
        self._send = send
        self._finish = finish
        self.reported: set[str] = {interaction.interaction_id for interaction in already}
        """Settlements pushed at hello, skipped once when the settled feed delivers them again."""
        self.answered: dict[str, interaction_pb2.Interaction] = {}
        """Answered, delivery-pending Interactions pushed on this link, for their delivery report."""
        self.opens: set[asyncio.Task[None]] = set()
        """Opens in flight (the servicer cancels those left when the stream ends)."""
        self._last_open: dict[str, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(OPEN_CONCURRENCY)
        for interaction in already:
            self._remember_answered(interaction)

    @classmethod
    async def begin(
        cls,
        authority: InteractionAuthority,
        hello: interaction_service_pb2.Hello,
        *,
        send: Send,
        finish: Callable[[], Awaitable[None]],
    ) -> HostLinkSession:
        """Apply ``hello``: fence a new epoch (``begin_new_epoch``) or resume one (``resume_epoch``).

        A new epoch is answered as soon as it is fenced: the watched ids of older epochs close first, every
        other older form right after the reply (in the background). Raises InvalidRequest for a hello with
        neither mode, StaleEpoch for a resumed epoch that is not current.
        """
        position = await authority.settled_position()
        mode = hello.WhichOneof("mode")
        if mode == "begin_new_epoch" and hello.begin_new_epoch:
            epoch, closed = await authority.fence_epoch()
            await authority.close_older_of(list(hello.watched_interaction_ids))
            authority.close_older_epochs_soon()
        elif mode == "resume_epoch":
            await authority.resume_epoch(hello.resume_epoch)
            epoch, closed = hello.resume_epoch, 0
        else:
            raise errors.InvalidRequest("hello needs begin_new_epoch=true or resume_epoch")
        already = await authority.settled_of(list(hello.watched_interaction_ids))
        return cls(authority, epoch, closed_count=closed, position=position, already=already, send=send, finish=finish)

    def greeting(self) -> list[Response]:
        """The frames that answer the hello: ``epoch``, then a ``settled`` push per watched settled form."""
        begun = interaction_service_pb2.EpochBegun(host_epoch=self.epoch, closed_count=self.closed_count)
        frames = [Response(epoch=begun)]
        frames += [
            Response(settled=interaction_service_pb2.InteractionSettled(interaction=interaction))
            for interaction in self.already
        ]
        return frames

    # --- the two workers ----------------------------------------------------------------------

    async def read(self, requests: AsyncIterator[interaction_service_pb2.HostLinkRequest]) -> None:
        """Apply every request frame after hello; once the broker ends its side and every open was answered,
        finish the stream. A refused frame (not an open) ends the stream with its status."""
        try:
            async for request in requests:
                if request.WhichOneof("frame") == "open":
                    await self._start_open(request.open)
                else:  # close/delivery/heartbeat in order: later frames (opens included) start after them
                    await self._send(await self._apply(request))
        except ServiceError as error:
            await self._send(error)
            return
        if self.opens:
            await asyncio.wait(set(self.opens))  # every open is answered before the stream ends
        await self._finish()

    async def follow(self) -> None:
        """Push every settlement of this epoch after :attr:`position` (``settled`` frames)."""
        try:
            async for interaction in self.authority.follow_settled(self.epoch, self.position):
                if interaction.interaction_id in self.reported:
                    self.reported.discard(interaction.interaction_id)
                    continue
                self._remember_answered(interaction)
                await self._send(Response(settled=interaction_service_pb2.InteractionSettled(interaction=interaction)))
        except SubscriberOverflow:  # the broker resumes (resume_epoch + watched ids): nothing is lost
            await self._finish()

    # --- frames -------------------------------------------------------------------------------

    async def _apply(self, request: interaction_service_pb2.HostLinkRequest) -> Response:
        frame = request.WhichOneof("frame")
        if frame == "open":
            return await self._apply_open(request.open)
        if frame == "close":
            return await self._apply_close(request.close)
        if frame == "delivery":
            return await self._apply_delivery(request.delivery)
        if frame == "heartbeat":
            return await self._apply_heartbeat()
        raise errors.InvalidRequest(f"unexpected HostLink frame {frame!r} after hello")

    async def _start_open(self, request: interaction_service_pb2.OpenInteraction) -> None:
        """Run an open in its own task once a slot is free, after the same invocation's previous open."""
        await self._slots.acquire()  # at most OPEN_CONCURRENCY opens in flight (backpressure)
        invocation_id = request.binding.invocation_id
        task = asyncio.create_task(self._run_open(request, self._last_open.get(invocation_id)))
        self._last_open[invocation_id] = task
        self.opens.add(task)
        task.add_done_callback(functools.partial(self._forget_open, invocation_id))

    async def _run_open(
        self, request: interaction_service_pb2.OpenInteraction, before: asyncio.Task[None] | None
    ) -> None:
        try:
            if before is not None:  # the same invocation's earlier open decides first, as when serial
                await asyncio.wait([before])
            try:
                reply = await self._apply_open(request)
            except Exception:  # a bug must not leave the broker waiting: refuse this open only
                log.exception("open_failed")
                reply = Response(
                    open_rejected=interaction_service_pb2.OpenRejected(
                        request_ref=request.request_ref, message="internal error"
                    )
                )
            await self._send(reply)
        finally:
            self._slots.release()

    def _forget_open(self, invocation_id: str, task: asyncio.Task[None]) -> None:
        self.opens.discard(task)
        if self._last_open.get(invocation_id) is task:
            del self._last_open[invocation_id]

    async def _apply_open(self, request: interaction_service_pb2.OpenInteraction) -> Response:
        """``opened`` with the canonical record, or ``open_rejected`` (never ends the stream)."""
        wait = request.wait.ToTimedelta().total_seconds() if request.HasField("wait") else None
        try:
            round_info = request.round if request.HasField("round") else None
            interaction = await self.authority.open(
                self.epoch, request.binding, request.form, wait, round_info, replay=request.replay
            )
        except ServiceError as error:
            return Response(
                open_rejected=interaction_service_pb2.OpenRejected(
                    request_ref=request.request_ref,
                    reason=errors.error_reason(error),
                    message=error.message,
                    violations=errors.violations_to_proto(error.violations),
                )
            )
        return Response(
            opened=interaction_service_pb2.InteractionOpened(request_ref=request.request_ref, interaction=interaction)
        )

    async def _apply_close(self, close: interaction_service_pb2.CloseInteraction) -> Response:
        """Close one form by id, or (invocation id only) whatever form the invocation has pending and fence
        the invocation."""
        if close.invocation_id and not close.interaction_id:
            changed, after = await self.authority.close_invocation(self.epoch, close.invocation_id, close.reason)
            closed = interaction_service_pb2.InteractionClosed(invocation_id=close.invocation_id, changed=changed)
            if after is not None:
                closed.interaction_id = after.interaction_id
                closed.interaction.CopyFrom(after)
            return Response(closed=closed)
        changed, after = await self.authority.close(self.epoch, close.interaction_id, close.reason)
        closed = interaction_service_pb2.InteractionClosed(interaction_id=close.interaction_id, changed=changed)
        if after is not None:
            closed.interaction.CopyFrom(after)
        return Response(closed=closed)

    async def _apply_delivery(self, report: interaction_service_pb2.ReportDelivery) -> Response:
        """Record whether an answer reached its provider (the pushed record spares a read)."""
        known = self.answered.pop(report.interaction_id, None)
        changed, after = await self.authority.record_delivery(
            self.epoch, report.interaction_id, report.delivery, report.lost_reason, answered=known
        )
        recorded = interaction_service_pb2.DeliveryRecorded(interaction_id=report.interaction_id, changed=changed)
        if after is not None:
            recorded.interaction.CopyFrom(after)
        return Response(delivery_recorded=recorded)

    async def _apply_heartbeat(self) -> Response:
        """Renew every lease of this epoch."""
        renewed, deadline_ms = await self.authority.heartbeat(self.epoch)
        ack = interaction_service_pb2.HeartbeatAck(renewed=renewed)
        ack.lease_deadline.FromMilliseconds(deadline_ms)
        return Response(heartbeat_ack=ack)

    def _remember_answered(self, interaction: interaction_pb2.Interaction) -> None:
        """Keep an answered, delivery-pending Interaction pushed on this link for its delivery report
        (bounded: the oldest is dropped past :data:`ANSWERED_KEPT`, whose report then reads Redis)."""
        if (
            interaction.state != interaction_pb2.INTERACTION_STATE_ANSWERED
            or interaction.delivery != interaction_pb2.DELIVERY_STATE_PENDING
        ):
            return
        if len(self.answered) >= ANSWERED_KEPT:
            del self.answered[next(iter(self.answered))]
        self.answered[interaction.interaction_id] = interaction
