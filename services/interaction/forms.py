"""The broker's side of a Host's forms: open, close, heartbeat and the delivery of committed answers.

Rules (RFC criteria 5-9): canonical ids are minted here, never by a provider; a form is checked against the
form contract and caps before it is stored; only the current Host epoch opens, closes and heartbeats
(``open.lua``, ``settle.lua``, ``heartbeat.lua`` refuse the rest as STALE_EPOCH); an answer's delivery is recorded
once (``deliver.lua``). Nothing here logs form copy or values. See docs/design.md#lifecycle.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core import metrics
from services.core.form import (
    FormError,
    FormErrorReason,
    Violation,
    check_form,
    form_from_proto,
    form_to_proto,
)
from services.core.limits import MAX_ID_CHARS, Limits
from services.interaction import audit, errors
from services.interaction.keys import ALL_SESSIONS
from services.interaction.notify import Notifier
from services.interaction.settings import Settings
from services.interaction.store import DeliveryMode, InteractionStore, Mode, Record, ScriptCode

log = logging.getLogger("maka.interaction.authority")
"""The authority's one logger (its parts log under the same name)."""

_BROKER_CLOSE_REASONS = frozenset(
    {
        interaction_pb2.CLOSE_REASON_STOPPED,
        interaction_pb2.CLOSE_REASON_PROVIDER_LOST,
        interaction_pb2.CLOSE_REASON_INVOCATION_SETTLED,
        interaction_pb2.CLOSE_REASON_SUPERSEDED,
        interaction_pb2.CLOSE_REASON_TIMED_OUT,
        interaction_pb2.CLOSE_REASON_LEASE_EXPIRED,
        interaction_pb2.CLOSE_REASON_HOST_RESTARTED,
    }
)


OPENED_KEPT = 16384
"""Pending records an authority keeps from its own opens for the Answers that reach it."""


def mint_interaction_id() -> str:
    """A fresh canonical Interaction id: ``ix_`` + 128 random bits, URL-safe. Never chosen by a provider."""
    return "ix_" + secrets.token_urlsafe(16)


def _check_id(name: str, value: str, violations: list[Violation]) -> None:
    if not value or value == ALL_SESSIONS:
        violations.append(Violation(f"/{name}", FormErrorReason.SCHEMA_INVALID_VALUE, "is required (and not '*')"))
    elif len(value) > MAX_ID_CHARS or not value.isprintable():
        violations.append(
            Violation(
                f"/{name}",
                FormErrorReason.SCHEMA_INVALID_VALUE,
                f"must be printable and at most {MAX_ID_CHARS} characters",
            )
        )


_BINDING_IDS = ("session_id", "turn_id", "tool_use_id", "invocation_id", "registration_id", "connection_id")
"""The ids every binding must carry (printable, at most :data:`MAX_ID_CHARS`, not ``*``)."""


def _check_binding(binding: interaction_pb2.Binding) -> None:
    """Raise InvalidRequest when a binding id is missing or malformed, or an optional one too long."""
    violations: list[Violation] = []
    for name in _BINDING_IDS:
        _check_id(f"binding/{name}", getattr(binding, name), violations)
    made_for = binding.made_for
    if any(len(part) > MAX_ID_CHARS for part in (made_for.principal, made_for.issuer, made_for.via)):
        violations.append(Violation("/binding/made_for", FormErrorReason.SCHEMA_INVALID_VALUE, "too long"))
    if len(binding.provider_correlation_id) > MAX_ID_CHARS or len(binding.tool_name) > MAX_ID_CHARS:
        violations.append(
            Violation("/binding", FormErrorReason.SCHEMA_INVALID_VALUE, "provider_correlation_id or tool_name too long")
        )
    if violations:
        raise errors.InvalidRequest("the binding is incomplete or malformed", violations)


def _pending(
    binding: interaction_pb2.Binding,
    epoch: int,
    form: form_pb2.Form,
    round_info: interaction_pb2.Round | None,
    now: int,
    wait_deadline: int,
) -> interaction_pb2.Interaction:
    """A new pending Interaction (fresh canonical id) of ``form`` for ``binding`` in Host ``epoch``."""
    interaction = interaction_pb2.Interaction(
        interaction_id=mint_interaction_id(),
        binding=binding,
        host_epoch=epoch,
        state=interaction_pb2.INTERACTION_STATE_PENDING,
        form=form,
    )
    interaction.created_at.FromMilliseconds(now)
    interaction.expires_at.FromMilliseconds(wait_deadline)
    if round_info is not None:
        interaction.round.CopyFrom(round_info)
    return interaction


class Forms:
    """The broker's side of a Host's forms: open, close (one form, or an invocation's), heartbeat, and the
    delivery of committed answers; keeps the forms this replica opened for the Answers that reach it."""

    def __init__(
        self,
        store: InteractionStore,
        settings: Settings,
        *,
        limits: Limits,
        now_ms: Callable[[], int],
        notifier: Notifier | None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.limits = limits
        self.notifier = notifier
        self._now_ms = now_ms
        self._opened: OrderedDict[str, Record] = OrderedDict()
        """Forms this replica opened, as stored (a pending record is written once, by ``open.lua``), so an
        Answer reaching this replica validates without reading the record back; ``settle.lua`` still
        compares state, session and epoch (bounded by :data:`OPENED_KEPT`, oldest dropped)."""

    @property
    def host_id(self) -> str:
        """The Runtime Host these forms belong to."""
        return self.store.keys.host_id

    # --- Forms (broker) -------------------------------------------------------------------------

    async def open(
        self,
        epoch: int,
        binding: interaction_pb2.Binding,
        form: form_pb2.Form,
        wait_seconds: float | None = None,
        round_info: interaction_pb2.Round | None = None,
        *,
        replay: bool = False,
    ) -> interaction_pb2.Interaction:
        """Publish ``form`` for the exact ``binding`` in Host ``epoch``; returns the canonical record.

        ``round_info`` (the form's MRTR round: position, size, deadline) is stored on the record, and the
        bounded wait never runs past ``round_info.deadline``: a form whose round can no longer finish in
        time closes ``round_expired`` at that deadline (docs/acceptance.md).

        ``replay``: the broker re-sends an open whose reply was lost with its link; when the invocation's
        pending form has exactly ``binding``, that form is returned instead of AlreadyPending.

        Raises InvalidRequest (missing/oversized binding ids), InvalidForm (form contract or caps,
        via ``check_form``), StaleEpoch (``epoch`` is not current), AlreadyPending (the invocation
        already has a pending form). ``wait_seconds`` ≤ 0 or None means the default wait; it is
        capped by ``form_wait_max_seconds``.
        """
        _check_binding(binding)
        canonical = self._canonical_form(form)
        now = self._now_ms()
        wait_deadline = self._wait_deadline(now, wait_seconds, round_info)
        for _attempt in range(3):
            interaction = _pending(binding, epoch, canonical, round_info, now, wait_deadline)
            code, detail = await self.store.open(
                interaction,
                lease_deadline_ms=now + int(self.settings.lease_seconds * 1000),
                wait_deadline_ms=wait_deadline,
                created_ms=now,
            )
            if code is ScriptCode.OK:
                self._opened_now(interaction)
                return interaction
            if code is ScriptCode.STALE_EPOCH:
                raise errors.StaleEpoch(epoch, int(detail))
            if code is ScriptCode.ALREADY_PENDING:
                return await self._already_pending(binding, detail, replay=replay)
        raise RuntimeError("could not mint a unique interaction id")  # pragma: no cover - 128 random bits

    def _canonical_form(self, form: form_pb2.Form) -> form_pb2.Form:
        """``form`` checked against the form contract and caps, in canonical shape. Raises LimitExceeded or
        InvalidForm."""
        if form.ByteSize() > self.limits.max_request_bytes * 2:
            raise errors.LimitExceeded("the form is larger than the request cap")
        try:
            return form_to_proto(check_form(form_from_proto(form), limits=self.limits))
        except FormError as error:
            raise errors.InvalidForm(error) from error

    def _wait_deadline(self, now: int, wait_seconds: float | None, round_info: interaction_pb2.Round | None) -> int:
        """When the bounded wait of a form opened at ``now`` ends (ms): the requested wait (default when
        unset, capped by ``form_wait_max_seconds``), never past the round's deadline. Raises InvalidRequest
        for a malformed round position."""
        wait = self.settings.form_wait_seconds if not wait_seconds or wait_seconds <= 0 else wait_seconds
        wait = min(wait, self.settings.form_wait_max_seconds)
        wait_deadline = now + int(wait * 1000)
        if round_info is not None:
            if not 1 <= round_info.position <= max(round_info.size, 1) or round_info.size > 1000:
                raise errors.InvalidRequest(
                    "the round position is malformed",
                    [Violation("/round", FormErrorReason.SCHEMA_INVALID_VALUE, "position must be 1..size")],
                )
            if round_info.HasField("deadline"):
                wait_deadline = max(now, min(wait_deadline, round_info.deadline.ToMilliseconds()))
        return wait_deadline

    def _opened_now(self, interaction: interaction_pb2.Interaction) -> None:
        """Keep a form this replica just opened for the Answers that reach it, and log it."""
        binding = interaction.binding
        self._remember_opened(
            Record(interaction, "pending", binding.session_id, interaction.host_epoch, binding.invocation_id, "")
        )
        audit.emit("form_opened", interaction, self.host_id)
        if self.notifier is not None:  # only the replica whose open.lua committed it: one notification per open
            self.notifier.form_opened(interaction, self.host_id, self._still_pending)
        log.info(
            "opened",
            extra={
                "interaction_id": interaction.interaction_id,
                "session_id": binding.session_id,
                "invocation_id": binding.invocation_id,
                "host_epoch": interaction.host_epoch,
            },
        )

    async def _still_pending(self, interaction_id: str) -> bool:
        """Whether the form is still pending (before a ``form_expiring`` notification)."""
        record = await self.store.get(interaction_id)
        return record is not None and record.state == "pending"

    async def _already_pending(
        self, binding: interaction_pb2.Binding, pending_id: str, *, replay: bool
    ) -> interaction_pb2.Interaction:
        """The invocation already has pending form ``pending_id``: a replayed open of exactly ``binding`` gets
        that form back; anything else raises AlreadyPending."""
        if replay and pending_id:  # the broker re-sends an open its dropped link lost the reply of
            existing = await self.store.get(pending_id)
            if existing is not None and existing.state == "pending" and existing.interaction.binding == binding:
                return existing.interaction
            log.warning(  # which check refused it (a rare race after a replica is killed)
                "replay_refused",
                extra={
                    "invocation_id": binding.invocation_id,
                    "interaction_id": pending_id,
                    "state": existing.state if existing is not None else "",
                    "same_binding": existing is not None and existing.interaction.binding == binding,
                },
            )
        raise errors.AlreadyPending(binding.invocation_id)

    async def close(
        self, epoch: int, interaction_id: str, reason: interaction_pb2.CloseReason.ValueType
    ) -> tuple[bool, interaction_pb2.Interaction | None]:
        """The broker closes a pending form with ``reason``: returns ``(changed, record after)``.

        ``changed`` is False when the form was already settled (the record shows the winning
        outcome) or unknown (record None). Raises InvalidRequest for ANSWERED/UNSPECIFIED reasons and
        StaleEpoch when ``epoch`` is no longer current.
        """
        if reason not in _BROKER_CLOSE_REASONS:
            raise errors.InvalidRequest(
                "close reason must be a closure reason other than answered",
                [Violation("/reason", FormErrorReason.SCHEMA_INVALID_VALUE, "invalid close reason")],
            )
        record = await self.store.get(interaction_id) if interaction_id else None
        if record is None:
            return False, None
        changed, after = await self.close_record(record, reason, Mode.CLOSE, caller_epoch=epoch)
        return changed, after

    async def close_invocation(
        self, epoch: int, invocation_id: str, reason: interaction_pb2.CloseReason.ValueType
    ) -> tuple[bool, interaction_pb2.Interaction | None]:
        """The broker closes whatever form is pending for ``invocation_id`` and fences the invocation
        so no later open for it commits (an open whose reply was lost): returns ``(changed, record
        after)`` like :meth:`close` (record None when no form was pending). Raises InvalidRequest
        (bad reason or id) and StaleEpoch."""
        if reason not in _BROKER_CLOSE_REASONS:
            raise errors.InvalidRequest(
                "close reason must be a closure reason other than answered",
                [Violation("/reason", FormErrorReason.SCHEMA_INVALID_VALUE, "invalid close reason")],
            )
        violations: list[Violation] = []
        _check_id("invocation_id", invocation_id, violations)
        if violations:
            raise errors.InvalidRequest("invocation_id is required", violations)
        code, value = await self.store.fence_invocation(epoch, invocation_id)
        if code is ScriptCode.STALE_EPOCH:
            raise errors.StaleEpoch(epoch, int(value))
        log.info("invocation_fenced", extra={"invocation_id": invocation_id, "host_epoch": epoch})
        if not value:
            return False, None
        return await self.close(epoch, value, reason)

    async def heartbeat(self, epoch: int) -> tuple[int, int]:
        """Renew every lease of ``epoch``: returns ``(renewed, lease deadline ms)``. Raises StaleEpoch."""
        deadline = self._now_ms() + int(self.settings.lease_seconds * 1000)
        code, value = await self.store.heartbeat(epoch, deadline)
        if code is ScriptCode.STALE_EPOCH:
            raise errors.StaleEpoch(epoch, value)
        return value, deadline

    async def close_record(
        self,
        record: Record,
        reason: interaction_pb2.CloseReason.ValueType,
        mode: Mode,
        *,
        caller_epoch: int | None = None,
    ) -> tuple[bool, interaction_pb2.Interaction | None]:
        new = interaction_pb2.Interaction()
        new.CopyFrom(record.interaction)
        new.state = interaction_pb2.INTERACTION_STATE_CLOSED
        new.close_reason = reason
        new.settled_at.FromMilliseconds(self._now_ms())
        result = await self.store.settle(
            mode,
            record,
            new,
            state="closed",
            reason=errors.close_reason_name(reason),
            submission_id="",
            now_ms=self._now_ms(),
            caller_epoch=caller_epoch,
        )
        self.forget_opened(record.interaction.interaction_id)
        if result.code is ScriptCode.OK:
            metrics.INTERACTIONS_SETTLED.labels(errors.close_reason_name(reason)).inc()
            audit.emit("form_closed", new, self.host_id)
            log.info(
                "closed",
                extra={
                    "interaction_id": new.interaction_id,
                    "close_reason": errors.close_reason_name(reason),
                    "host_epoch": record.epoch,
                },
            )
            return True, new
        if result.code is ScriptCode.STALE:
            await self.close_record(record, interaction_pb2.CLOSE_REASON_HOST_RESTARTED, Mode.RESTART)
            after = await self.store.get(record.interaction.interaction_id)
            return False, after.interaction if after else None
        if result.code is ScriptCode.STALE_EPOCH:
            raise errors.StaleEpoch(caller_epoch or 0, int(result.reason))
        return False, result.stored

    def _remember_opened(self, record: Record) -> None:
        if len(self._opened) >= OPENED_KEPT:
            self._opened.popitem(last=False)
        self._opened[record.interaction.interaction_id] = record

    def opened(self, interaction_id: str) -> Record | None:
        """The pending record of a form this replica opened, as stored (None: not kept here)."""
        return self._opened.get(interaction_id)

    def forget_opened(self, interaction_id: str) -> None:
        """Drop a kept form once it is settled (or found settled)."""
        self._opened.pop(interaction_id, None)

    # --- Delivery of committed answers (docs/security.md "No answer after settlement") ------------

    async def record_delivery(
        self,
        epoch: int,
        interaction_id: str,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType = interaction_pb2.CLOSE_REASON_UNSPECIFIED,
        *,
        answered: interaction_pb2.Interaction | None = None,
    ) -> tuple[bool, interaction_pb2.Interaction | None]:
        """The broker of ``epoch`` records whether an answer reached its provider: returns
        ``(changed, record after)``; ``changed`` is False when the delivery was already recorded, the
        Interaction is not answered, or it is unknown (record None).

        ``answered`` is the answered Interaction this link pushed as ``settled`` (docs/design.md#data-path-of-one-call:
        the broker learns the answer only from that push): used instead of reading the record back, since
        ``deliver.lua`` writes only while the stored record is still that answer (answered, delivery
        pending, same epoch) and no other script rewrites an answered record.

        Raises InvalidRequest for a delivery other than DELIVERED / LOST (or LOST without a closure
        reason) and StaleEpoch when ``epoch`` is not current.
        """
        if delivery not in (interaction_pb2.DELIVERY_STATE_DELIVERED, interaction_pb2.DELIVERY_STATE_LOST) or (
            delivery == interaction_pb2.DELIVERY_STATE_LOST and lost_reason not in _BROKER_CLOSE_REASONS
        ):
            raise errors.InvalidRequest(
                "delivery must be DELIVERED, or LOST with a closure reason other than answered",
                [Violation("/delivery", FormErrorReason.SCHEMA_INVALID_VALUE, "invalid delivery report")],
            )
        if answered is not None and answered.interaction_id == interaction_id and interaction_id:
            record: Record | None = Record(
                interaction=answered,
                state="answered",
                session_id=answered.binding.session_id,
                epoch=answered.host_epoch,
                invocation_id=answered.binding.invocation_id,
                submission_id="",
            )
        else:
            record = await self.store.get(interaction_id) if interaction_id else None
        if record is None:
            return False, None
        return await self.deliver(record, delivery, lost_reason, DeliveryMode.BROKER, caller_epoch=epoch)

    async def deliver(
        self,
        record: Record,
        delivery: interaction_pb2.DeliveryState.ValueType,
        lost_reason: interaction_pb2.CloseReason.ValueType,
        mode: DeliveryMode,
        *,
        caller_epoch: int | None = None,
    ) -> tuple[bool, interaction_pb2.Interaction | None]:
        new = interaction_pb2.Interaction()
        new.CopyFrom(record.interaction)
        new.delivery = delivery
        if delivery == interaction_pb2.DELIVERY_STATE_LOST:
            new.delivery_lost_reason = lost_reason
        new.delivery_recorded_at.FromMilliseconds(self._now_ms())
        outcome = "delivered" if delivery == interaction_pb2.DELIVERY_STATE_DELIVERED else "lost"
        reason = errors.close_reason_name(lost_reason) if delivery == interaction_pb2.DELIVERY_STATE_LOST else ""
        result = await self.store.deliver(
            mode, record, new, outcome=outcome, lost_reason=reason, caller_epoch=caller_epoch
        )
        if result.code is ScriptCode.OK:
            metrics.ANSWER_DELIVERIES.labels(outcome).inc()
            audit.emit("form_delivery", new, self.host_id)
            log.info(
                "delivery_recorded",
                extra={
                    "interaction_id": new.interaction_id,
                    "delivery": outcome,
                    "close_reason": reason,
                    "host_epoch": record.epoch,
                },
            )
            return True, new
        if result.code is ScriptCode.STALE_EPOCH:
            raise errors.StaleEpoch(caller_epoch or 0, int(result.reason))
        return False, result.stored
