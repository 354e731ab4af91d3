"""Nested forms: opening the form a provider asks for, and delivering how it settled.

Rules (docs/design.md#capability-broker, docs/design.md#lifecycle). A settled form (HostLink ``settled``)
is delivered only to the bound invocation, registration and connection, and only while it awaits it:

- answered → provider: ``InteractionResult(answer, correlation id echoed)``; caller:
  ``interaction_settled(action)``; a fresh execution timer.
- timed_out / lease_expired / round_expired → caller: failure INTERACTION_TIMED_OUT; provider:
  ``InteractionResult(close_reason)`` then ``cancel``. host_restarted / superseded / other → the same with
  INTERACTION_CLOSED. stopped (closed by someone else) → caller: ``stopped``.
- A form the Interaction service refuses as invalid is the provider's to fix (``FrameRejected``, the
  invocation keeps running); any other refusal, or a lost link, fails the invocation.
- Closes the broker makes itself (Stop, provider loss, a final outcome while pending, a Tool refresh,
  shutdown) deliver no interaction result to the provider afterwards (:mod:`services.broker.settlement`).
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.errors import FrameRejection, HostUnavailable, OpenRefused
from services.broker.invocation import Invocation, InvocationState, LiveInvocations
from services.broker.model import ProviderStream, Registration
from services.broker.settlement import InteractionHost, Settlement
from services.broker.timers import ExecutionTimers
from services.broker.validation import MAX_MESSAGE_CHARS
from services.core.limits import MAX_ID_CHARS
from services.core.reasons import InteractionErrorReason

log = logging.getLogger("maka.broker.broker")


class Forms:
    """Opens the forms providers ask for and delivers their settlement to the invocation awaiting each.

    Args:
        host: the Interaction service link that opens forms.
        live: the live invocations, and the form each awaits.
        timers: execution timers (suspended while a form is pending, re-armed after an answer).
        settlement: settles an invocation whose form failed it.
        counters: the broker's counters (``interactions_opened``, ``settlements_ignored``).
        form_wait_seconds: bounded wait asked for each form (0 = Interaction service default).
        settled_memory: most settlements kept that overtook their own open.
    """

    def __init__(
        self,
        host: InteractionHost,
        live: LiveInvocations,
        timers: ExecutionTimers,
        settlement: Settlement,
        counters: Counter[str],
        *,
        form_wait_seconds: float,
        settled_memory: int,
    ) -> None:
        self._host = host
        self._live = live
        self._timers = timers
        self._settlement = settlement
        self._counters = counters
        self._form_wait = form_wait_seconds
        self._settled_memory = settled_memory
        self._early_settled: OrderedDict[str, interaction_pb2.Interaction] = OrderedDict()

    def open(self, invocation: Invocation, stream: ProviderStream, frame: broker_pb2.InteractionRequest) -> None:
        """``RUNNING`` → ``OPENING``: publish the form of ``frame`` with the broker's own binding."""
        registration = stream.registration
        assert registration is not None
        form = _with_trusted_requester(frame.form, invocation, registration)
        binding = interaction_pb2.Binding(
            session_id=invocation.session_id,
            turn_id=invocation.turn_id,
            tool_use_id=invocation.tool_use_id,
            invocation_id=invocation.invocation_id,
            registration_id=registration.registration_id,
            connection_id=stream.connection_id,
            provider_correlation_id=frame.correlation_id,
            tool_name=invocation.qualified_name,
        )
        if invocation.made_for is not None:
            binding.made_for.CopyFrom(invocation.made_for)
        invocation.ask_form(frame.correlation_id)
        round_info = frame.round if frame.HasField("round") else None
        self._settlement.spawn(invocation, self._open(invocation, binding, form, round_info))

    async def _open(
        self,
        invocation: Invocation,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        round_info: interaction_pb2.Round | None = None,
    ) -> None:
        """Publish the form; the invocation awaits it once the Interaction service confirmed it."""
        try:
            interaction = await self._host.open(binding, form, self._form_wait, round_info)
        except OpenRefused as refused:
            self._open_refused(invocation, refused)
            return
        except HostUnavailable as error:
            if invocation.state is InvocationState.OPENING:
                self._settlement.fail(invocation, broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE, error.message)
            # The open's outcome is unknown (its reply may have been lost with the link): close
            # whatever form it made and fence the invocation against it before the terminal event
            # (this task is part of the settle barrier).
            closed = await self._host.close_invocation_durably(invocation.invocation_id, invocation.late_form_close)
            await self._settlement.after_close(closed, invocation.late_form_close)
            return
        self._counters["interactions_opened"] += 1
        if invocation.state is not InvocationState.OPENING:
            # Settled while the open was in flight: never leave the form orphaned. The terminal
            # event waits for this task (see Settlement.settle), so it follows the durable close.
            await self._settlement.close_form(interaction.interaction_id, invocation.late_form_close)
            return
        self._await_form(invocation, interaction)

    def _open_refused(self, invocation: Invocation, refused: OpenRefused) -> None:
        """The Interaction service refused the form: an invalid one is the provider's to fix (the frame is
        rejected and the invocation keeps running); any other refusal fails the invocation."""
        if invocation.state is not InvocationState.OPENING:
            return
        registration = invocation.registration
        if refused.reason in (
            InteractionErrorReason.INVALID_FORM,
            InteractionErrorReason.INVALID_REQUEST,
            InteractionErrorReason.LIMIT_EXCEEDED,
        ):
            invocation.form_refused()
            rejection = FrameRejection(
                broker_pb2.REJECT_REASON_INVALID_FORM,
                invocation.invocation_id,
                f"{refused.reason}: {refused.message}"[:MAX_MESSAGE_CHARS],
            )
            rejection.count(self._counters)
            if registration is not None:
                registration.stream.send(rejection.to_frame())
            return
        code = broker_pb2.FAILURE_CODE_HOST_UNAVAILABLE
        if refused.reason == InteractionErrorReason.STALE_EPOCH:
            code = broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
        self._settlement.fail(invocation, code, f"the Interaction service refused the form: {refused.reason}")

    def _await_form(self, invocation: Invocation, interaction: interaction_pb2.Interaction) -> None:
        """``OPENING`` → ``AWAITING``: the form is pending; the execution timer is suspended until it settles."""
        interaction_id = interaction.interaction_id
        invocation.await_form(interaction)
        self._timers.disarm(invocation)
        self._live.form_pending(invocation)
        awaiting = broker_pb2.AwaitingInteraction(
            interaction_id=interaction_id,
            message=interaction.form.message[:MAX_MESSAGE_CHARS],
            field_count=len(interaction.form.fields),
        )
        if invocation.interaction_expires_at is not None:
            awaiting.expires_at.CopyFrom(invocation.interaction_expires_at)
        invocation.emit(broker_pb2.CallToolResponse(awaiting_interaction=awaiting))
        log.info(
            "awaiting_interaction",
            extra={"invocation_id": invocation.invocation_id, "interaction_id": interaction_id},
        )
        early = self._early_settled.pop(interaction_id, None)
        if early is not None:
            self.form_settled(early)

    def form_settled(self, interaction: interaction_pb2.Interaction) -> None:
        """A form stopped being pending (HostLink ``settled``). Delivered only to the exact
        invocation, registration and connection it was bound to, and only while it awaits it."""
        invocation = self._awaiting_invocation(interaction)
        if invocation is None:
            return
        registration = invocation.registration
        assert registration is not None
        self._live.form_done(interaction.interaction_id)
        invocation.drop_form()
        if interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
            self._deliver_answer(invocation, registration.stream, interaction)
        else:
            self._deliver_close(invocation, registration.stream, interaction)

    def _awaiting_invocation(self, interaction: interaction_pb2.Interaction) -> Invocation | None:
        """The invocation awaiting this settled form on its bound registration and connection, or None: a
        settlement that overtook its own open is kept until the open returns, any other one is ignored."""
        invocation = self._live.awaiting(interaction.interaction_id)
        if invocation is None:
            pending = self._live.get(interaction.binding.invocation_id)
            if pending is not None and pending.state is InvocationState.OPENING:
                self._early_settled[interaction.interaction_id] = interaction
                while len(self._early_settled) > self._settled_memory:
                    self._early_settled.popitem(last=False)
            return None
        registration = invocation.registration
        binding = interaction.binding
        if (
            invocation.state is not InvocationState.AWAITING
            or registration is None
            or not registration.live
            or binding.invocation_id != invocation.invocation_id
            or binding.registration_id != registration.registration_id
            or binding.connection_id != registration.stream.connection_id
        ):
            self._counters["settlements_ignored"] += 1
            return None
        return invocation

    def _deliver_answer(
        self, invocation: Invocation, stream: ProviderStream, interaction: interaction_pb2.Interaction
    ) -> None:
        """``AWAITING`` → ``RUNNING``: the answer goes to the provider and a fresh execution timer starts."""
        interaction_id = interaction.interaction_id
        invocation.resume()
        invocation.emit(
            broker_pb2.CallToolResponse(
                interaction_settled=broker_pb2.InteractionSettledEvent(
                    interaction_id=interaction_id,
                    action=interaction.answer.action,
                    close_reason=interaction_pb2.CLOSE_REASON_ANSWERED,
                )
            )
        )
        invocation.undelivered = interaction_id
        result = broker_pb2.InteractionResult(
            invocation_id=invocation.invocation_id,
            correlation_id=invocation.correlation_id,
            interaction_id=interaction_id,
            answer=interaction.answer,
            close_reason=interaction_pb2.CLOSE_REASON_ANSWERED,
        )
        stream.send(broker_pb2.ConnectResponse(interaction_result=result))
        self._timers.arm(invocation)

    def _deliver_close(
        self, invocation: Invocation, stream: ProviderStream, interaction: interaction_pb2.Interaction
    ) -> None:
        """The form closed unanswered: the provider hears why, and the invocation ends ``stopped`` (someone
        stopped the form) or fails (timed out or closed)."""
        interaction_id = interaction.interaction_id
        reason = interaction.close_reason
        invocation.emit(
            broker_pb2.CallToolResponse(
                interaction_settled=broker_pb2.InteractionSettledEvent(
                    interaction_id=interaction_id, close_reason=reason
                )
            )
        )
        result = broker_pb2.InteractionResult(
            invocation_id=invocation.invocation_id,
            correlation_id=invocation.correlation_id,
            interaction_id=interaction_id,
            close_reason=reason,
        )
        stream.send(broker_pb2.ConnectResponse(interaction_result=result))
        if reason == interaction_pb2.CLOSE_REASON_STOPPED:
            self._settlement.settle(
                invocation,
                InvocationState.STOPPED,
                broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()),
                form_close=None,
                cancel_reason="interaction stopped",
            )
            return
        code, message = _closed_form_failure(reason)
        self._settlement.fail(invocation, code, message)

    def host_stale(self) -> None:
        """The HostLink resume was refused as stale: fail every form-bound invocation closed."""
        for invocation in self._live.all():
            if invocation.form_bound:
                self._live.form_done(invocation.interaction_id)
                invocation.drop_form()
                self._settlement.fail(invocation, broker_pb2.FAILURE_CODE_INTERACTION_CLOSED, "the Host epoch ended")


def _closed_form_failure(reason: interaction_pb2.CloseReason.ValueType) -> tuple[broker_pb2.FailureCode.ValueType, str]:
    """How a form closed unanswered (other than ``stopped``) fails its invocation: timed out or closed."""
    code = (
        broker_pb2.FAILURE_CODE_INTERACTION_TIMED_OUT
        if reason
        in (
            interaction_pb2.CLOSE_REASON_TIMED_OUT,
            interaction_pb2.CLOSE_REASON_LEASE_EXPIRED,
            interaction_pb2.CLOSE_REASON_ROUND_EXPIRED,
        )
        else broker_pb2.FAILURE_CODE_INTERACTION_CLOSED
    )
    why = interaction_pb2.CloseReason.Name(reason).removeprefix("CLOSE_REASON_").lower()
    if reason == interaction_pb2.CLOSE_REASON_ROUND_EXPIRED:
        why += " (the server's requestState for this round expired before every form was answered)"
    return code, f"the form closed: {why}"


def _with_trusted_requester(
    requested: form_pb2.Form, invocation: Invocation, registration: Registration
) -> form_pb2.Form:
    """A copy of the provider's form whose requester is what the broker knows (provider id and name); the
    claimed server and Tool stay display-only, defaulting to the invocation's."""
    form = form_pb2.Form()
    form.CopyFrom(requested)
    server, _, bare = invocation.qualified_name.partition(":")
    claimed_server = form.requester.claimed_server or server
    claimed_tool = form.requester.claimed_tool or bare
    form.requester.CopyFrom(
        form_pb2.Requester(
            provider_id=registration.provider_id,
            provider_display_name=registration.display_name,
            claimed_server=claimed_server[:MAX_ID_CHARS],
            claimed_tool=claimed_tool[:MAX_ID_CHARS],
        )
    )
    return form
