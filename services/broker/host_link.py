"""The broker's client of the Interaction service's ``HostLink`` stream (docs/design.md#host-epoch-and-fencing).

One long-lived bidirectional stream per broker process:

- the first connection says ``Hello(begin_new_epoch=true)``: a fresh Host epoch begins and every
  pending form of older epochs closes ``host_restarted`` (RFC criterion 9);
- later connections (after a drop) say ``Hello(resume_epoch=N, watched_interaction_ids=...)`` —
  never a new epoch; forms that settled meanwhile are reported at once as ``settled``;
- a resume refused as ``STALE_EPOCH`` (another Host epoch began) is final: the link turns stale,
  ``on_stale`` is called so the broker fails its awaiting invocations closed, and every later
  :meth:`HostLink.open` raises :class:`~services.broker.errors.HostUnavailable`;
- a ``Heartbeat`` every ``heartbeat_seconds`` renews the leases of this epoch's pending forms;
- ``settled`` pushes go to ``on_settled``.

Requests are matched to replies by ``request_ref`` (open) and interaction id (close). Outgoing
frames go through a bounded queue. Reconnects back off exponentially (with jitter) up to
``backoff_max`` seconds (:class:`services.core.backoff.Backoff`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf import duration_pb2

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.broker.errors import HostUnavailable, OpenRefused
from services.core.backoff import Backoff
from services.core.channels import open_channel
from services.core.reasons import INTERACTION_DOMAIN, InteractionErrorReason, parse_reason
from services.core.status import error_from_rpc

log = logging.getLogger("maka.broker.host_link")

SettledCallback = Callable[[interaction_pb2.Interaction], None]
T = TypeVar("T")
_INVOCATION_KEY = "invocation/"
"""Prefix of the reply key of a close by invocation id (interaction ids start with ``ix_``)."""


class LinkDropped(HostUnavailable):
    """The link dropped with a request in flight; an open is re-sent (as a replay) once it resumes."""


class HostLink:
    """Client of ``InteractionService.HostLink`` with reconnect, resume and lease heartbeat.

    Args:
        target: ``host:port`` of the Interaction service.
        token: bearer token for ``authorization`` metadata; empty sends none.
        max_message_bytes: gRPC message cap of the channel (keepalive and TLS come from
            ``services.core.channels.open_channel``).
        heartbeat_seconds: lease renewal interval (seconds).
        queue_size: bound of the outgoing frame queue.
        on_settled: called with every ``InteractionSettled.interaction`` (and with the winning
            outcome of a close that found the form already settled).
        on_stale: called once when a resume is refused as ``STALE_EPOCH``.
        watched: returns the interaction ids the broker still waits on (sent on resume).
        host_id: the Runtime Host this broker serves, sent in every ``Hello`` (an Interaction tier
            serving several Hosts picks that Host's keys; the broker token must name it).
        request_timeout: seconds to wait for the reply to one open/close.
        backoff_initial: the first reconnect delay's ceiling (seconds); it doubles per failed attempt.
        backoff_max: the most a reconnect delay's ceiling grows to (seconds).
    """

    def __init__(
        self,
        target: str,
        *,
        token: str = "",
        max_message_bytes: int = 4 * 1024 * 1024,
        heartbeat_seconds: float = 5.0,
        queue_size: int = 256,
        on_settled: SettledCallback,
        on_stale: Callable[[], None],
        watched: Callable[[], Iterable[str]],
        host_id: str = "local",
        request_timeout: float = 10.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
    ) -> None:
        self._target = target
        self._token = token or None
        self._max_message_bytes = max_message_bytes
        self._heartbeat_seconds = heartbeat_seconds
        self._queue_size = queue_size
        self._on_settled = on_settled
        self._on_stale = on_stale
        self._watched = watched
        self._host_id = host_id
        self._request_timeout = request_timeout
        self._backoff = Backoff(initial=backoff_initial, maximum=backoff_max)
        self._channel: grpc.aio.Channel | None = None
        self._task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None] | None = None
        self._opens: dict[str, asyncio.Future[interaction_pb2.Interaction]] = {}
        self._closes: dict[str, deque[asyncio.Future[interaction_service_pb2.InteractionClosed]]] = {}
        self._deliveries: dict[str, deque[asyncio.Future[interaction_service_pb2.DeliveryRecorded]]] = {}
        self._gone = asyncio.Event()
        """Set once the link is stale or stopping: durable requests stop waiting for a reconnect."""
        self._deferred_closes: dict[str, interaction_pb2.CloseReason.ValueType] = {}
        self._connected = asyncio.Event()
        self._stopping = False
        self._background: set[asyncio.Task[interaction_service_pb2.InteractionClosed | None]] = set()
        self.epoch: int | None = None
        """The Host epoch this broker began (None until the first hello succeeded)."""
        self.stale = False
        """True once a resume was refused as STALE_EPOCH; the link never reconnects after that."""
        self.connects = 0
        """How many times a hello succeeded (1 + reconnects)."""
        self.heartbeats_acked = 0

    @property
    def connected(self) -> bool:
        """True while a hello succeeded and the stream is up."""
        return self._connected.is_set()

    async def start(self) -> None:
        """Open the channel and start the link in the background (never blocks on the service)."""
        self._channel = open_channel(self._target, token=self._token, max_message_bytes=self._max_message_bytes)
        self._task = asyncio.create_task(self._run(), name="maka-broker-hostlink")

    async def wait_connected(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the link to be up; raises ``TimeoutError``."""
        async with asyncio.timeout(timeout):
            await self._connected.wait()

    async def stop(self) -> None:
        """Stop reconnecting, end the stream and close the channel."""
        self._stopping = True
        self._gone.set()
        if self._queue is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._fail_inflight(HostUnavailable("the broker is shutting down"))
        if self._channel is not None:
            await self._channel.close()

    # --- requests -------------------------------------------------------------------------------

    async def open(
        self,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait_seconds: float,
        round_info: interaction_pb2.Round | None = None,
    ) -> interaction_pb2.Interaction:
        """Publish ``form`` for ``binding`` (``OpenInteraction``) and return the pending Interaction.

        ``round_info`` (the form's MRTR round position and deadline) is passed on as given.

        Raises:
            OpenRefused: the service answered ``OpenRejected`` (reason name e.g. ``INVALID_FORM``).
            HostUnavailable: the link is down, stale, or the reply did not come in time.
        """
        if not self.connected and not self.stale:
            # Ride out a short reconnect rather than failing the invocation at once.
            with contextlib.suppress(TimeoutError):
                await self.wait_connected(self._request_timeout)
        wait = duration_pb2.Duration()
        if wait_seconds > 0:
            wait.FromNanoseconds(int(wait_seconds * 1e9))
        replay = False
        while True:
            try:
                return await self._open_once(binding, form, wait, round_info, replay=replay)
            except LinkDropped:
                # The replica went away with our open in flight (docs/design.md#grpc-for-a-replicated-tier):
                # resume on another one and re-send it as a replay, which returns the form if the
                # first attempt had been stored.
                if self.stale:
                    raise HostUnavailable("the HostLink to the Interaction service dropped") from None
                try:
                    await self.wait_connected(self._request_timeout)
                except TimeoutError:
                    raise HostUnavailable("the HostLink to the Interaction service dropped") from None
                replay = True

    async def _open_once(
        self,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait: duration_pb2.Duration,
        round_info: interaction_pb2.Round | None,
        *,
        replay: bool,
    ) -> interaction_pb2.Interaction:
        ref = secrets.token_hex(8)
        future: asyncio.Future[interaction_pb2.Interaction] = asyncio.get_running_loop().create_future()
        self._opens[ref] = future
        request = interaction_service_pb2.OpenInteraction(
            request_ref=ref, binding=binding, form=form, wait=wait, replay=replay
        )
        if round_info is not None:
            request.round.CopyFrom(round_info)
        try:
            try:
                await self._send(interaction_service_pb2.HostLinkRequest(open=request))
            except HostUnavailable as error:
                if self.connected or self.stale or isinstance(error, LinkDropped):
                    raise
                raise LinkDropped("the HostLink to the Interaction service is reconnecting") from None
            async with asyncio.timeout(self._request_timeout):
                return await future
        except TimeoutError:
            raise HostUnavailable("the Interaction service did not answer the open in time") from None
        finally:
            self._opens.pop(ref, None)

    async def close(
        self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType
    ) -> interaction_service_pb2.InteractionClosed | None:
        """Close a pending form with ``reason`` and return the service's ``InteractionClosed``.

        When the link is down the close is deferred and sent right after the next successful
        hello; then (and on a reply timeout) ``None`` is returned. Never raises for a down link.
        """
        if not self.connected:
            if not self.stale:
                self._deferred_closes[interaction_id] = reason
            return None
        future: asyncio.Future[interaction_service_pb2.InteractionClosed] = asyncio.get_running_loop().create_future()
        self._closes.setdefault(interaction_id, deque()).append(future)
        try:
            await self._send(
                interaction_service_pb2.HostLinkRequest(
                    close=interaction_service_pb2.CloseInteraction(interaction_id=interaction_id, reason=reason)
                )
            )
            async with asyncio.timeout(self._request_timeout):
                return await future
        except (HostUnavailable, TimeoutError):
            if not self.stale:
                self._deferred_closes[interaction_id] = reason
            return None
        finally:
            waiting = self._closes.get(interaction_id)
            if waiting is not None:
                with contextlib.suppress(ValueError):
                    waiting.remove(future)
                if not waiting:
                    del self._closes[interaction_id]

    async def close_durably(
        self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType
    ) -> interaction_service_pb2.InteractionClosed | None:
        """Close a pending form and return only once the Interaction service answered (the close, or
        the outcome that won before it, is then in Redis): across link drops and reply timeouts the
        close is sent again after the next hello. Returns ``None`` only when that can no longer happen:
        the link is stale (a newer Host epoch fenced this one, so the form can only end
        ``host_restarted`` and no answer can commit to it) or the broker is stopping.

        This is the settle path's barrier (docs/security.md "No answer after settlement"): the broker
        reports an invocation settled only after it returned.
        """
        while True:
            if not await self._wait_usable():
                return None
            try:
                return await self._request(
                    self._closes,
                    interaction_id,
                    interaction_service_pb2.HostLinkRequest(
                        close=interaction_service_pb2.CloseInteraction(interaction_id=interaction_id, reason=reason)
                    ),
                )
            except (HostUnavailable, TimeoutError):
                log.info("form_close_retrying", extra={"interaction_id": interaction_id})

    async def close_invocation_durably(
        self, invocation_id: str, reason: interaction_pb2.CloseReason.ValueType
    ) -> interaction_service_pb2.InteractionClosed | None:
        """Close whatever form is pending for ``invocation_id`` and fence the invocation so no later
        open for it commits (``CloseInteraction.invocation_id``): for an open whose outcome is unknown.
        Retried like :meth:`close_durably`; ``None`` once stale or stopping."""
        while True:
            if not await self._wait_usable():
                return None
            try:
                return await self._request(
                    self._closes,
                    _INVOCATION_KEY + invocation_id,
                    interaction_service_pb2.HostLinkRequest(
                        close=interaction_service_pb2.CloseInteraction(invocation_id=invocation_id, reason=reason)
                    ),
                )
            except (HostUnavailable, TimeoutError):
                log.info("invocation_fence_retrying", extra={"invocation_id": invocation_id})

    async def report_delivery(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
    ) -> interaction_service_pb2.DeliveryRecorded | None:
        """Record whether an answer reached its provider (``ReportDelivery``), retried like
        :meth:`close_durably` until the service answered; ``None`` once stale or stopping (a newer
        epoch then records every still-pending delivery of this one as lost, ``host_restarted``)."""
        while True:
            if not await self._wait_usable():
                return None
            try:
                return await self._request(
                    self._deliveries,
                    interaction_id,
                    interaction_service_pb2.HostLinkRequest(
                        delivery=interaction_service_pb2.ReportDelivery(
                            interaction_id=interaction_id, delivery=delivery, lost_reason=lost_reason
                        )
                    ),
                )
            except (HostUnavailable, TimeoutError):
                log.info("delivery_report_retrying", extra={"interaction_id": interaction_id})

    async def _wait_usable(self) -> bool:
        """Wait until the link is up (True) or stale/stopping (False)."""
        while not self.connected:
            if self._gone.is_set():
                return False
            up = asyncio.ensure_future(self._connected.wait())
            gone = asyncio.ensure_future(self._gone.wait())
            try:
                await asyncio.wait({up, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                up.cancel()
                gone.cancel()
        return not self._gone.is_set()

    async def _request(
        self,
        waiting: dict[str, deque[asyncio.Future[T]]],
        interaction_id: str,
        request: interaction_service_pb2.HostLinkRequest,
    ) -> T:
        """Send one ordered request and await its reply (matched by interaction id, in order)."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        waiting.setdefault(interaction_id, deque()).append(future)
        try:
            await self._send(request)
            async with asyncio.timeout(self._request_timeout):
                return await future
        finally:
            queue = waiting.get(interaction_id)
            if queue is not None:
                if future in queue:  # usually not: the reply popped it (a failed remove formats its repr)
                    queue.remove(future)
                if not queue:
                    del waiting[interaction_id]

    async def _send(self, request: interaction_service_pb2.HostLinkRequest) -> None:
        queue = self._queue
        if self.stale:
            raise HostUnavailable("the Host epoch of this broker is stale")
        if queue is None or not self.connected:
            raise HostUnavailable("the HostLink to the Interaction service is down")
        try:
            async with asyncio.timeout(self._request_timeout):
                await queue.put(request)
        except TimeoutError:
            raise HostUnavailable("the HostLink send queue is full") from None

    # --- the stream -----------------------------------------------------------------------------

    async def _run(self) -> None:
        retry = self._backoff.attempts()
        while not self._stopping:
            try:
                await self._session()
                retry.reset()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as error:
                detail = error_from_rpc(error)
                if detail.reason == InteractionErrorReason.STALE_EPOCH:
                    log.error("host_link_stale", extra={"host_epoch": self.epoch})
                    self._down()
                    self.stale = True
                    self._gone.set()
                    self._deferred_closes.clear()
                    self._fail_inflight(HostUnavailable("the Host epoch of this broker is stale"))
                    self._on_stale()
                    return
                log.warning("host_link_down", extra={"code": detail.code.name, "reason": detail.reason})
            except Exception as error:
                log.warning("host_link_error", extra={"error_type": type(error).__name__})
            self._down()
            await retry.sleep()

    def _down(self) -> None:
        if self._connected.is_set():
            log.info("host_link_disconnected", extra={"host_epoch": self.epoch})
        self._connected.clear()
        self._queue = None
        self._fail_inflight(LinkDropped("the HostLink to the Interaction service dropped"))

    def _fail_inflight(self, error: HostUnavailable) -> None:
        for future in list(self._opens.values()):
            if not future.done():
                future.set_exception(error)
        replies: list[asyncio.Future[Any]] = [f for w in self._closes.values() for f in w]
        replies += [f for w in self._deliveries.values() for f in w]
        for reply_future in replies:
            if not reply_future.done():
                reply_future.set_exception(error)

    async def _session(self) -> None:
        assert self._channel is not None
        stub = interaction_service_pb2_grpc.InteractionServiceStub(self._channel)
        queue: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None] = asyncio.Queue(self._queue_size)
        if self.epoch is None:
            hello = interaction_service_pb2.Hello(begin_new_epoch=True, host_id=self._host_id)
        else:
            hello = interaction_service_pb2.Hello(
                resume_epoch=self.epoch, watched_interaction_ids=sorted(set(self._watched())), host_id=self._host_id
            )

        async def requests() -> AsyncIterator[interaction_service_pb2.HostLinkRequest]:
            yield interaction_service_pb2.HostLinkRequest(hello=hello)
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item

        call = stub.HostLink(requests())
        heartbeat: asyncio.Task[None] | None = None
        try:
            first = await call.read()
            if first is grpc.aio.EOF or not isinstance(first, interaction_service_pb2.HostLinkResponse):
                raise ConnectionError("HostLink ended before the epoch")
            if first.WhichOneof("frame") != "epoch":
                raise ConnectionError("HostLink's first response was not the epoch")
            began = self.epoch is None
            self.epoch = first.epoch.host_epoch
            self.connects += 1
            self._queue = queue
            self._connected.set()
            log.info(
                "host_link_connected",
                extra={
                    "host_id": self._host_id,
                    "host_epoch": self.epoch,
                    "began": began,
                    "closed_count": first.epoch.closed_count,
                },
            )
            heartbeat = asyncio.create_task(self._heartbeat(queue))
            self._flush_deferred_closes()
            while True:
                response = await call.read()
                if response is grpc.aio.EOF or not isinstance(response, interaction_service_pb2.HostLinkResponse):
                    return
                self._dispatch(response)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            call.cancel()

    def _flush_deferred_closes(self) -> None:
        deferred, self._deferred_closes = self._deferred_closes, {}
        for interaction_id, reason in deferred.items():
            task = asyncio.create_task(self.close(interaction_id, reason))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _heartbeat(self, queue: asyncio.Queue[interaction_service_pb2.HostLinkRequest | None]) -> None:
        beat = interaction_service_pb2.HostLinkRequest(heartbeat=interaction_service_pb2.Heartbeat())
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            await queue.put(beat)

    def _settled(self, interaction: interaction_pb2.Interaction) -> None:
        # A bug in the broker's handler must not take the link (and every other form) down.
        try:
            self._on_settled(interaction)
        except Exception:
            log.exception("settled_handler_failed", extra={"interaction_id": interaction.interaction_id})

    def _dispatch(self, response: interaction_service_pb2.HostLinkResponse) -> None:
        kind = response.WhichOneof("frame")
        if kind == "opened":
            future = self._opens.get(response.opened.request_ref)
            if future is not None and not future.done():
                future.set_result(response.opened.interaction)
        elif kind == "open_rejected":
            rejected = response.open_rejected
            open_future = self._opens.get(rejected.request_ref)
            if open_future is not None and not open_future.done():
                name = interaction_pb2.ErrorReason.Name(rejected.reason).removeprefix("ERROR_REASON_")
                open_future.set_exception(OpenRefused(parse_reason(INTERACTION_DOMAIN, name), rejected.message))
        elif kind == "closed":
            key = response.closed.interaction_id
            if response.closed.invocation_id:
                key = _INVOCATION_KEY + response.closed.invocation_id
            waiting = self._closes.get(key)
            while waiting:
                close_future = waiting.popleft()
                if not close_future.done():
                    close_future.set_result(response.closed)
                    break
            if not response.closed.changed and response.closed.HasField("interaction"):
                self._settled(response.closed.interaction)
        elif kind == "delivery_recorded":
            delivered = self._deliveries.get(response.delivery_recorded.interaction_id)
            while delivered:
                delivery_future = delivered.popleft()
                if not delivery_future.done():
                    delivery_future.set_result(response.delivery_recorded)
                    break
        elif kind == "settled":
            self._settled(response.settled.interaction)
        elif kind == "heartbeat_ack":
            self.heartbeats_acked += 1
