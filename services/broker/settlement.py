"""The terminal barrier: every invocation settles exactly once, and its terminal event waits for the closes.

Rules (docs/design.md#settlement, docs/security.md "No answer after settlement"):

- :meth:`Settlement.settle` moves a live invocation to its terminal state once (a second settle is a no-op):
  the execution timer is disarmed, the provider gets ``cancel`` (unless it reported the end itself), the
  invocation leaves the live tables and its outcome is counted.
- The terminal event (``result``, ``failure``, ``lost``, ``stopped``) is logged for the callers only after
  the pending form's close is durable (or the answer that won the race is recorded ``lost``), an in-flight
  open has been closed, and delivery reports are written.
- Every terminal transition closes the pending form with the reason of the transition, so no form is
  orphaned and no answer is delivered after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Protocol

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.attachments import CallerAttachments
from services.broker.invocation import Invocation, InvocationState, LiveInvocations
from services.broker.timers import ExecutionTimers
from services.core import metrics

log = logging.getLogger("maka.broker.broker")


class InteractionHost(Protocol):
    """What the broker needs from the Interaction service (implemented by ``HostLink``)."""

    async def open(
        self,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait_seconds: float,
        round_info: interaction_pb2.Round | None = None,
    ) -> interaction_pb2.Interaction: ...

    async def close_durably(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> Any:
        """Close a form; return once the service answered (an ``InteractionClosed``), or None when that can
        no longer happen because a newer Host epoch fenced this one (or the broker stops)."""
        ...

    async def close_invocation_durably(self, invocation_id: str, reason: interaction_pb2.CloseReason.ValueType) -> Any:
        """Close whatever form is pending for the invocation and fence it against a late open; like
        :meth:`close_durably`."""
        ...

    async def report_delivery(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = ...,
    ) -> object:
        """Record whether an answer reached its provider; retried like :meth:`close_durably`."""
        ...


class Settlement:
    """Settles invocations exactly once behind the barrier, and owns the tasks that barrier waits for.

    Args:
        host: the Interaction service link that closes forms and records deliveries.
        live: the live invocations a settled one leaves.
        timers: the execution timers a settled one disarms.
        callers: the caller attachments that retain a settled one for reattaching.
        counters: the broker's counters (``invocations.<outcome>``).
    """

    def __init__(
        self,
        host: InteractionHost,
        live: LiveInvocations,
        timers: ExecutionTimers,
        callers: CallerAttachments,
        counters: Counter[str],
    ) -> None:
        self._host = host
        self._live = live
        self._timers = timers
        self._callers = callers
        self._counters = counters
        self.tasks: set[asyncio.Task[Any]] = set()
        """Every task the broker runs (form opens and closes, delivery reports, barriers)."""

    def settle(
        self,
        invocation: Invocation,
        state: InvocationState,
        event: broker_pb2.CallToolResponse,
        *,
        form_close: interaction_pb2.CloseReason.ValueType | None = None,
        cancel_reason: str | None = None,
    ) -> bool:
        """Move ``invocation`` to terminal ``state`` once: disarm the timer, close its pending form
        with ``form_close``, tell the provider ``cancel`` (when ``cancel_reason``), emit ``event``."""
        if invocation.is_terminal:
            return False
        previous = invocation.end_as(state)
        if form_close is not None:
            invocation.late_form_close = form_close
        self._timers.disarm(invocation)
        invocation.terminal = event
        self._callers.retain(invocation)
        self._no_longer_live(invocation, state)
        self._emit_terminal_after_barrier(invocation, previous)
        registration = invocation.registration
        if cancel_reason is not None and registration is not None and not registration.stream.outbox.closed:
            registration.stream.send(
                broker_pb2.ConnectResponse(
                    cancel=broker_pb2.CancelInvocation(invocation_id=invocation.invocation_id, reason=cancel_reason)
                ),
            )
        log.info(
            "invocation_settled",
            extra={"invocation_id": invocation.invocation_id, "outcome": state.value, "from_state": previous.value},
        )
        return True

    def fail(
        self,
        invocation: Invocation,
        code: broker_pb2.FailureCode.ValueType,
        message: str,
        *,
        form_close: interaction_pb2.CloseReason.ValueType | None = interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
        cancel: bool = True,
    ) -> None:
        """Settle ``invocation`` ``FAILED`` with ``code``; the provider gets ``cancel`` unless it reported the end."""
        self.settle(
            invocation,
            InvocationState.FAILED,
            failure_event(code, message),
            form_close=form_close,
            cancel_reason=broker_pb2.FailureCode.Name(code).removeprefix("FAILURE_CODE_").lower() if cancel else None,
        )

    def lose(
        self, invocation: Invocation, reason: str, form_close: interaction_pb2.CloseReason.ValueType, cancel_reason: str
    ) -> None:
        """Settle ``invocation`` ``LOST`` its form closes ``form_close``; the provider gets ``cancel``."""
        invocation.late_form_close = form_close
        self.settle(
            invocation,
            InvocationState.LOST,
            broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason=reason)),
            form_close=form_close,
            cancel_reason=cancel_reason,
        )

    def stop(self, invocation: Invocation, reason: str) -> None:
        """Settle ``invocation`` ``STOPPED``: its form closes ``stopped``, the provider gets ``cancel``."""
        invocation.late_form_close = interaction_pb2.CLOSE_REASON_STOPPED
        self.settle(
            invocation,
            InvocationState.STOPPED,
            broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
            form_close=interaction_pb2.CLOSE_REASON_STOPPED,
            cancel_reason=reason,
        )

    def _no_longer_live(self, invocation: Invocation, state: InvocationState) -> None:
        """Move a settled invocation from the live tables to the recent ones, and count its outcome."""
        self._live.unbind(invocation)
        self._counters[f"invocations.{state.value}"] += 1
        metrics.TOOL_CALLS.labels(state.value).inc()

    def _emit_terminal_after_barrier(self, invocation: Invocation, previous: InvocationState) -> None:
        """The settle barrier (docs/security.md "No answer after settlement"): the terminal event is
        emitted only after the form's close is durable (or its winning answer is recorded lost), an
        in-flight open has been closed, and delivery reports are in Redis."""
        barrier = set(invocation.tasks)
        if previous is InvocationState.AWAITING and invocation.interaction_id:
            self._live.form_done(invocation.interaction_id)
            barrier.add(self.spawn(invocation, self.close_form(invocation.interaction_id, invocation.late_form_close)))
        if invocation.undelivered:
            interaction_id, invocation.undelivered = invocation.undelivered, ""
            barrier.add(
                self.spawn(
                    invocation,
                    self.report_delivery(
                        interaction_id, interaction_pb2.DELIVERY_STATE_LOST, invocation.late_form_close
                    ),
                )
            )
        if barrier:
            self.spawn(invocation, self._finish(invocation, barrier))
        else:
            self._log_terminal(invocation)

    @staticmethod
    def _log_terminal(invocation: Invocation) -> None:
        """Log the terminal event (callers see the invocation settled from now on)."""
        assert invocation.terminal is not None
        invocation.log.append(invocation.terminal, terminal=True)

    async def _finish(self, invocation: Invocation, barrier: set[asyncio.Task[Any]]) -> None:
        """Emit the terminal event once every settle-path write in ``barrier`` is done."""
        try:
            await asyncio.gather(*barrier, return_exceptions=True)
        finally:
            self._log_terminal(invocation)

    async def close_form(self, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """Close the form durably; when an answer committed first (it won the race) and was never
        delivered, record it lost with ``reason`` before returning."""
        await self.after_close(await self._host.close_durably(interaction_id, reason), reason)

    async def after_close(self, closed: Any, reason: interaction_pb2.CloseReason.ValueType) -> None:
        """When the close found an answer that won the race and was never delivered, record it lost."""
        if closed is None:  # fenced by a newer epoch: the form can only end host_restarted
            log.warning("form_close_fenced")
            return
        after = closed.interaction
        interaction_id = after.interaction_id
        if (
            not closed.changed
            and after.state == interaction_pb2.INTERACTION_STATE_ANSWERED
            and after.delivery == interaction_pb2.DELIVERY_STATE_PENDING
        ):
            await self.report_delivery(interaction_id, interaction_pb2.DELIVERY_STATE_LOST, reason)

    def delivered(self, invocation: Invocation) -> None:
        """The provider has the answer (it confirmed it, or sent a later frame of the invocation):
        record it delivered (docs/security.md "No answer after settlement")."""
        if invocation.undelivered:
            interaction_id, invocation.undelivered = invocation.undelivered, ""
            self.spawn(invocation, self.report_delivery(interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED))

    async def report_delivery(
        self,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
    ) -> None:
        recorded = await self._host.report_delivery(interaction_id, delivery, lost_reason)
        if recorded is None:  # fenced by a newer epoch, which records it lost (host_restarted)
            log.warning("delivery_report_dropped", extra={"interaction_id": interaction_id})

    def spawn(self, invocation: Invocation | None, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` as a task the broker waits for at shutdown (and, with ``invocation``, its barrier)."""
        task: asyncio.Task[Any] = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if invocation is not None:
            invocation.tasks.add(task)
            task.add_done_callback(invocation.tasks.discard)
        return task


def failure_event(code: broker_pb2.FailureCode.ValueType, message: str) -> broker_pb2.CallToolResponse:
    """The caller's ``failure`` event (counted in ``maka_call_failures_total`` by code)."""
    metrics.child(metrics.CALL_FAILURES, broker_pb2.FailureCode.Name(code).removeprefix("FAILURE_CODE_").lower()).inc()
    return broker_pb2.CallToolResponse(failure=broker_pb2.CallFailure(code=code, message=message))
