"""The Interaction authority: plain async domain logic over :class:`InteractionStore`.

:class:`InteractionAuthority` owns the rules (RFC criteria 5-9, 16; docs/design.md#lifecycle): canonical ids
are minted here; forms are checked against the form contract and caps before storing; answers are
validated against the stored canonical form and committed by one Lua script (exactly one winner);
Host epochs fence older brokers; leases and bounded waits are enforced by :meth:`reap_once`.
The gRPC servicer is a thin adapter over this class. Nothing here logs form copy or values.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from google.protobuf import json_format

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core import metrics
from services.core.auth import ANONYMOUS, Principal
from services.core.backoff import Backoff
from services.core.form import (
    FormError,
    FormErrorReason,
    Violation,
    answer_from_proto,
    answer_to_proto,
    check_form,
    form_from_proto,
    form_to_proto,
    validate_answer,
)
from services.core.limits import DEFAULT_LIMITS, MAX_ID_CHARS, Limits
from services.core.status import ServiceError
from services.interaction import audit, errors
from services.interaction.fanout import FanOut
from services.interaction.history import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, HistoryCursor
from services.interaction.keys import ALL_SESSIONS
from services.interaction.notify import Notifier
from services.interaction.policy import Policies, PolicyFile, visible
from services.interaction.presence import clean_kind
from services.interaction.settings import Settings
from services.interaction.store import DeliveryMode, InteractionStore, Mode, Record, ScriptCode, SettleResult

log = logging.getLogger("maka.interaction.authority")

_REAP_BATCH = 100
RESTART_BATCH = 500
"""Most forms of older epochs closed by one ``restart_batch.lua`` call (and read per pipelined round trip)."""
_HOST_RESTARTED = errors.close_reason_name(interaction_pb2.CLOSE_REASON_HOST_RESTARTED)
_CLOSE_REASONS_BY_NAME = {errors.close_reason_name(v): v for v in interaction_pb2.CloseReason.values()}
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


def _timeout_reason(interaction: interaction_pb2.Interaction) -> interaction_pb2.CloseReason.ValueType:
    """``round_expired`` when the wait that ended was the round's deadline, else ``timed_out``."""
    rounded = interaction.HasField("round") and interaction.round.HasField("deadline")
    if rounded and interaction.round.deadline.ToMilliseconds() <= interaction.expires_at.ToMilliseconds():
        return interaction_pb2.CLOSE_REASON_ROUND_EXPIRED
    return interaction_pb2.CLOSE_REASON_TIMED_OUT


DURABLE_READ_BACKOFF = Backoff(initial=0.05, maximum=2.0)
"""Waits between durable reads of a settlement while Redis or its replicas catch up."""

_HISTORY_SCAN_BATCH = 200
_HISTORY_SCAN_ROUNDS = 10
"""One ``ListHistory`` reads at most this many batches of entries (then returns a shorter page and its token)."""

OPENED_KEPT = 16384
"""Pending records an authority keeps from its own opens for the Answers that reach it."""


def mint_interaction_id() -> str:
    """A fresh canonical Interaction id: ``ix_`` + 128 random bits, URL-safe. Never chosen by a provider."""
    return "ix_" + secrets.token_urlsafe(16)


@dataclass(frozen=True, slots=True)
class ResumeToken:
    """Where a surface stands in each subscribed session's event Stream.

    Encoded as URL-safe base64 of ``{"v":1,"t":<issued ms>,"p":{session: stream id}}``; opaque to clients.
    """

    positions: dict[str, str]
    issued_ms: int

    def encode(self) -> str:
        """The opaque token string."""
        raw = json.dumps({"v": 1, "t": self.issued_ms, "p": self.positions}, separators=(",", ":"), sort_keys=True)
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(token: str) -> ResumeToken | None:
        """Parse a token; None when it is malformed (a fresh snapshot follows, never an error)."""
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            positions = raw["p"]
            if raw.get("v") != 1 or not isinstance(positions, dict):
                return None
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in positions.items()):
                return None
            return ResumeToken(positions=dict(positions), issued_ms=int(raw["t"]))
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
            return None


@dataclass(frozen=True, slots=True)
class AttachStart:
    """How an Attach stream begins: a snapshot (when ``snapshot`` is set) and the positions to follow from."""

    snapshot: list[interaction_pb2.Interaction] | None
    positions: dict[str, str]


def _same_settlement(stored: interaction_pb2.Interaction, read: interaction_pb2.Interaction) -> bool:
    """Whether ``stored`` is the settlement ``read`` describes (its delivery fields may have moved on since)."""
    return (
        stored.state == read.state
        and stored.settled_at == read.settled_at
        and stored.close_reason == read.close_reason
        and stored.answer == read.answer
    )


def answered_by(principal: Principal, surface_kind: str) -> interaction_pb2.AnsweredBy:
    """Who commits an answer: ``principal``'s name (a token's name, never the token; ``anonymous`` without
    tokens; a person's name when the person's own OpenID Connect token was verified or a surface answered
    for its principal) and kind (OpenID Connect only with an issuer: a person's own verified token, or the
    issuer the acting surface stated; a static token's principal a surface answered for is a token's), and the
    surface kind the caller declared (control characters removed, bounded)."""
    if principal.issuer:
        kind = interaction_pb2.PRINCIPAL_KIND_OIDC
    elif principal == ANONYMOUS:
        kind = interaction_pb2.PRINCIPAL_KIND_ANONYMOUS
    else:
        kind = interaction_pb2.PRINCIPAL_KIND_TOKEN
    return interaction_pb2.AnsweredBy(
        principal=principal.name,
        principal_kind=kind,
        surface_kind=clean_kind(surface_kind),
        issuer=principal.issuer,
        via=principal.via,
    )


def _stream_id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


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


class InteractionAuthority:
    """Pending forms of one Host (``store.keys.host_id``) in Redis: open, close, heartbeat, answer, list, get,
    attach, reap.

    ``clock`` returns seconds since the Unix epoch (tests may pass their own). Every method raises
    :class:`~services.interaction.errors.StoreUnavailable` (UNAVAILABLE) when Redis is down.
    """

    def __init__(
        self,
        store: InteractionStore,
        settings: Settings,
        *,
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
        fanout: FanOut | None = None,
        policies: PolicyFile | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.notifier = notifier
        """Sends form notifications (docs/operations.md#notifications) for the forms this replica opens; None: off."""
        self.policies = policies if policies is not None else PolicyFile(None)
        """Approver policies: who besides the person a call is made for sees its forms (docs/security.md)."""
        self.fanout = fanout if fanout is not None else FanOut(store.client, lanes=1, queue_size=512)
        """The replica's shared follower of event Streams (one per process; started by the app)."""
        self.settings = settings
        self.limits = limits
        self._clock = clock
        self._closers: set[asyncio.Task[None]] = set()
        self._deliveries_swept = 0
        """The Host epoch at which :meth:`lose_older_deliveries` last found no undelivered answer of an older
        epoch left. ``settle.lua`` refuses answers to forms of older epochs, so none can appear until the
        epoch moves again; the reaper skips the sweep until then (0: not swept by this process yet)."""
        self._opened: OrderedDict[str, Record] = OrderedDict()
        """Forms this replica opened, as stored (a pending record is written once, by ``open.lua``), so an
        Answer reaching this replica validates without reading the record back; ``settle.lua`` still
        compares state, session and epoch (bounded by :data:`OPENED_KEPT`, oldest dropped)."""

    @property
    def host_id(self) -> str:
        """The Runtime Host this authority serves."""
        return self.store.keys.host_id

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- Host epoch (broker) --------------------------------------------------------------------

    async def fence_epoch(self) -> tuple[int, int]:
        """Begin a new Host epoch (RFC criterion 9) without closing anything yet: returns
        ``(epoch, older_pending)``.

        The ``INCR`` fences every older epoch at once: from then on the scripts refuse its opens,
        closes and heartbeats (STALE_EPOCH) and turn any settlement of its forms into
        ``host_restarted``, so each of the ``older_pending`` forms (pending at the fence, all of older
        epochs) can only end ``host_restarted``. Callers must then run :meth:`close_older_epochs`
        (or :meth:`close_older_epochs_soon`) so surfaces see those closures promptly.
        """
        epoch, older_pending = await self.store.begin_epoch()
        log.info("epoch_fenced", extra={"host_epoch": epoch, "older_pending": older_pending})
        return epoch, older_pending

    async def begin_epoch(self) -> tuple[int, int]:
        """:meth:`fence_epoch`, then close every pending form of older epochs as ``host_restarted``
        (records kept, events emitted) before returning ``(epoch, older_pending)``."""
        epoch, older_pending = await self.fence_epoch()
        await self.close_older_epochs()
        return epoch, older_pending

    async def close_older_epochs(self) -> int:
        """Close every pending form of an epoch older than the current one as ``host_restarted``;
        returns how many this call closed (others may have been closed concurrently by a replica).

        Batched: the pending ids are read once; per ``RESTART_BATCH`` of them, one pipelined read of
        their records, then one ``restart_batch.lua`` call closes those of older epochs with the same
        checks as the per-form ``settle.lua`` (pending, same session and epoch, epoch older than
        current), the same per-session ``closed`` events and the same settled-Stream entries. No form
        of an older epoch can be opened after the fence, so one read of the pending ids finds them
        all; it repeats when the epoch moved again meanwhile. Safe to run concurrently (each form is
        closed at most once).
        """
        closed = 0
        while True:
            current = await self.store.current_epoch()
            ids = await self.store.pending_ids()
            for start in range(0, len(ids), RESTART_BATCH):
                closed += await self._restart_batch(ids[start : start + RESTART_BATCH], current)
            if await self.store.current_epoch() == current:
                if closed:
                    log.info("older_epochs_closed", extra={"host_epoch": current, "closed_count": closed})
                await self.lose_older_deliveries()
                return closed

    async def close_older_of(self, interaction_ids: Sequence[str]) -> int:
        """Close those of ``interaction_ids`` that are pending forms of older epochs (``host_restarted``)
        at once; returns how many it closed. Used for the ids a ``hello`` watches."""
        current = await self.store.current_epoch()
        ids = list(dict.fromkeys(i for i in interaction_ids if i))
        closed = 0
        for start in range(0, len(ids), RESTART_BATCH):
            closed += await self._restart_batch(ids[start : start + RESTART_BATCH], current)
        return closed

    def close_older_epochs_soon(self) -> None:
        """Run :meth:`close_older_epochs` in the background (after a ``hello`` was answered).

        A failure (Redis down) is logged; the reaper finishes the job (:meth:`reap_once`), and so
        does the next service start. :meth:`aclose` cancels what still runs.
        """
        task = asyncio.create_task(self._close_older_logged(), name="interaction-close-older-epochs")
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    async def _close_older_logged(self) -> None:
        try:
            await self.close_older_epochs()
        except errors.StoreUnavailable:
            log.warning("close_older_epochs_deferred")
        except Exception:
            log.exception("close_older_epochs_failed")

    async def aclose(self) -> None:
        """Cancel background closers (their current script call still completes in Redis)."""
        for task in list(self._closers):
            task.cancel()
        for task in list(self._closers):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _restart_batch(self, interaction_ids: Sequence[str], current: int) -> int:
        if not interaction_ids:
            return 0
        now = self._now_ms()
        closures: list[tuple[Record, interaction_pb2.Interaction]] = []
        for record in await self.store.get_many(interaction_ids):
            if record is None or record.state != "pending" or record.epoch >= current:
                continue
            new = interaction_pb2.Interaction()
            new.CopyFrom(record.interaction)
            new.state = interaction_pb2.INTERACTION_STATE_CLOSED
            new.close_reason = interaction_pb2.CLOSE_REASON_HOST_RESTARTED
            new.settled_at.FromMilliseconds(now)
            closures.append((record, new))
        if not closures:
            return 0
        closed = await self.store.restart_batch(closures)
        if closed:
            metrics.INTERACTIONS_SETTLED.labels(_HOST_RESTARTED).inc(len(closed))
        epochs = {r.interaction.interaction_id: r.epoch for r, _ in closures}
        written = {new.interaction_id: new for _, new in closures}
        for interaction_id in closed:
            audit.emit("form_closed", written[interaction_id], self.host_id)
        for interaction_id in closed:
            log.info(
                "closed",
                extra={
                    "interaction_id": interaction_id,
                    "close_reason": _HOST_RESTARTED,
                    "host_epoch": epochs.get(interaction_id, 0),
                },
            )
        return len(closed)

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
        return await self._deliver(record, delivery, lost_reason, DeliveryMode.BROKER, caller_epoch=epoch)

    async def _deliver(
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

    async def lose_older_deliveries(self) -> int:
        """Record every answer of an older Host epoch whose delivery is still pending as lost
        (``host_restarted``): its broker is gone, so nothing can deliver it any more and it is never
        replayed (RFC criterion 9). Returns how many this call recorded."""
        current = await self.store.current_epoch()
        if current == self._deliveries_swept:
            return 0
        ids = await self.store.undelivered_ids(RESTART_BATCH)
        lost = 0
        for interaction_id, record in zip(ids, await self.store.get_many(ids), strict=True):
            if record is None:
                await self.store.forget_undelivered(interaction_id)  # expired after retention
                continue
            if record.epoch >= current or record.state != "answered":
                continue
            changed, _ = await self._deliver(
                record,
                interaction_pb2.DELIVERY_STATE_LOST,
                interaction_pb2.CLOSE_REASON_HOST_RESTARTED,
                DeliveryMode.RESTART,
            )
            lost += int(changed)
        if len(ids) < RESTART_BATCH:  # every undelivered answer was read: none of an older epoch is left
            self._deliveries_swept = current
        return lost

    async def resume_epoch(self, epoch: int) -> None:
        """Re-attach a broker of ``epoch``. Raises StaleEpoch (FAILED_PRECONDITION) unless it is current."""
        current = await self.store.current_epoch()
        if epoch != current or epoch == 0:
            raise errors.StaleEpoch(epoch, current)

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
        changed, after = await self._close(record, reason, Mode.CLOSE, caller_epoch=epoch)
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

    async def _close(
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
        self._opened.pop(record.interaction.interaction_id, None)
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
            await self._close(record, interaction_pb2.CLOSE_REASON_HOST_RESTARTED, Mode.RESTART)
            after = await self.store.get(record.interaction.interaction_id)
            return False, after.interaction if after else None
        if result.code is ScriptCode.STALE_EPOCH:
            raise errors.StaleEpoch(caller_epoch or 0, int(result.reason))
        return False, result.stored

    # --- Answers (surfaces) ---------------------------------------------------------------------

    def _remember_opened(self, record: Record) -> None:
        if len(self._opened) >= OPENED_KEPT:
            self._opened.popitem(last=False)
        self._opened[record.interaction.interaction_id] = record

    async def _visible_record(
        self, principal: Principal, interaction_id: str, session_id: str | None, *, opened: bool = False
    ) -> Record:
        record = self._opened.get(interaction_id) if opened else None
        if record is None:
            record = await self.store.get(interaction_id) if interaction_id else None
        if (
            record is None
            or not self._may_see(principal, record.interaction, self.policies.current())
            or (session_id is not None and session_id != record.session_id)
        ):
            raise errors.InteractionNotFound(interaction_id)
        return record

    @staticmethod
    def _may_see(principal: Principal, interaction: interaction_pb2.Interaction, policies: Policies) -> bool:
        """The session rule, and for a form made for a person: that person or an approver ``policies`` name
        (docs/security.md "Who sees a form"). Anything else is indistinguishable from an unknown id."""
        binding = interaction.binding
        return principal.may_see(binding.session_id) and visible(
            principal, binding.made_for, binding.tool_name, policies
        )

    async def answer(
        self,
        principal: Principal,
        interaction_id: str,
        answer: form_pb2.Answer,
        *,
        submission_id: str = "",
        session_id: str | None = None,
        surface_kind: str = "",
    ) -> interaction_pb2.Interaction:
        """Commit the canonical answer of a pending Interaction; returns the answered record.

        Idempotent per ``submission_id`` (the same id returns the first outcome; empty means a fresh
        one). ``session_id`` None means "any session the principal may see". The record names who answered
        (``answered_by``: ``principal`` and the ``surface_kind`` it declared). Raises:
        InvalidRequest (no id), LimitExceeded (answer bytes over ``max_answer_bytes``),
        InteractionNotFound (unknown, expired, or another session's id — indistinguishable),
        InvalidAnswer (does not fit the stored form: ``validate_answer``), AlreadySettled (another
        answer won, ABORTED), InteractionClosed (closed, FAILED_PRECONDITION with ``close_reason``).
        """
        if not interaction_id:
            raise errors.InvalidRequest(
                "interaction_id is required",
                [Violation("/interaction_id", FormErrorReason.SCHEMA_INVALID_VALUE, "is required")],
            )
        if len(submission_id) > MAX_ID_CHARS:
            raise errors.InvalidRequest(
                "submission_id is too long",
                [Violation("/submission_id", FormErrorReason.SCHEMA_INVALID_VALUE, "too long")],
            )
        submission_id = submission_id or "sub_" + secrets.token_urlsafe(12)
        size = len(json_format.MessageToJson(answer, indent=None).encode())
        if size > self.limits.max_answer_bytes:
            raise errors.LimitExceeded(f"the answer is larger than {self.limits.max_answer_bytes} bytes")
        record = await self._visible_record(principal, interaction_id, session_id, opened=True)
        self._raise_if_settled(record.interaction, record.state, record.submission_id, submission_id)
        try:
            form = form_from_proto(record.interaction.form)
            normalized = validate_answer(form, answer_from_proto(answer), limits=self.limits)
        except FormError as error:
            raise errors.InvalidAnswer(error) from error
        new = interaction_pb2.Interaction()
        new.CopyFrom(record.interaction)
        new.state = interaction_pb2.INTERACTION_STATE_ANSWERED
        new.answer.CopyFrom(answer_to_proto(normalized))
        new.close_reason = interaction_pb2.CLOSE_REASON_ANSWERED
        new.delivery = interaction_pb2.DELIVERY_STATE_PENDING
        new.answered_by.CopyFrom(answered_by(principal, surface_kind))
        new.settled_at.FromMilliseconds(self._now_ms())
        result = await self.store.settle(
            Mode.ANSWER,
            record,
            new,
            state="answered",
            reason="answered",
            submission_id=submission_id,
            now_ms=self._now_ms(),
        )
        self._opened.pop(interaction_id, None)  # settled now, or settled before: either way no longer pending
        if result.code is ScriptCode.OK:
            metrics.INTERACTIONS_SETTLED.labels("answered").inc()
            audit.emit("form_answered", new, self.host_id)
            log.info(
                "answered",
                extra={
                    "interaction_id": interaction_id,
                    "session_id": record.session_id,
                    "action": answer.action,
                    "by": principal.name,
                    "via": principal.via,
                },
            )
            return new
        return await self._answer_refused(record, result, submission_id)

    async def _answer_refused(
        self, record: Record, result: SettleResult, submission_id: str
    ) -> interaction_pb2.Interaction:
        interaction_id = record.interaction.interaction_id
        if result.code is ScriptCode.SAME and result.stored is not None:
            # A repeated submission succeeds only once its answer is on the replicas the fence requires
            # (the first attempt may have failed NotReplicated): docs/design.md#durable-fences.
            if self.store.fenced:
                durable = await self.store.durable_record(interaction_id)
                if durable is None or durable.state != "answered" or durable.submission_id != submission_id:
                    raise errors.StoreUnavailable()  # a failover in between: the retry decides again
            return result.stored
        if result.code is ScriptCode.ANSWERED:
            raise errors.AlreadySettled(interaction_id)
        if result.code is ScriptCode.CLOSED:
            raise errors.InteractionClosed(
                interaction_id, _CLOSE_REASONS_BY_NAME.get(result.reason, interaction_pb2.CLOSE_REASON_UNSPECIFIED)
            )
        if result.code is ScriptCode.STALE:
            await self._close(record, interaction_pb2.CLOSE_REASON_HOST_RESTARTED, Mode.RESTART)
        elif result.code is ScriptCode.EXPIRED:
            reason = _CLOSE_REASONS_BY_NAME[result.reason]
            mode = Mode.TIMEOUT if reason == interaction_pb2.CLOSE_REASON_TIMED_OUT else Mode.LEASE
            await self._close(record, reason, mode)
        after = await self.store.get(interaction_id)
        if after is None:
            raise errors.InteractionNotFound(interaction_id)
        self._raise_if_settled(after.interaction, after.state, after.submission_id, submission_id)
        raise errors.InteractionNotFound(interaction_id)  # pragma: no cover - settle reported a settled record

    @staticmethod
    def _raise_if_settled(
        interaction: interaction_pb2.Interaction, state: str, stored_submission: str, submission_id: str
    ) -> None:
        if state == "answered" and stored_submission != submission_id:
            raise errors.AlreadySettled(interaction.interaction_id)
        if state == "closed":
            raise errors.InteractionClosed(interaction.interaction_id, interaction.close_reason)

    async def answer_outcome(
        self, principal: Principal, submit: interaction_service_pb2.SubmitAnswer, surface_kind: str = ""
    ) -> interaction_service_pb2.AttachResponse:
        """Answer over Attach (``surface_kind``: what the stream's subscribe named): never raises; the
        ``answer_outcome`` frame carries accepted or the refusal (reason, message, violations, and the
        Interaction as it stands unless it is NOT_FOUND).
        """
        response = interaction_service_pb2.AttachResponse()
        out = response.answer_outcome
        out.submission_id = submit.submission_id
        try:
            out.interaction.CopyFrom(
                await self.answer(
                    principal,
                    submit.interaction_id,
                    submit.answer,
                    submission_id=submit.submission_id,
                    surface_kind=surface_kind,
                )
            )
            out.accepted = True
        except ServiceError as error:
            out.accepted = False
            out.reason = errors.error_reason(error)
            out.message = error.message
            out.violations.extend(errors.violations_to_proto(error.violations))
            if isinstance(error, errors.AlreadySettled | errors.InteractionClosed | errors.InvalidAnswer):
                with contextlib.suppress(ServiceError):
                    record = await self.store.get(submit.interaction_id)
                    if record is not None:
                        out.interaction.CopyFrom(record.interaction)
        return response

    # --- Reads (surfaces) -----------------------------------------------------------------------

    def _sessions(self, principal: Principal, session_ids: Sequence[str]) -> list[str]:
        for sid in session_ids:
            if not sid or sid == ALL_SESSIONS:
                raise errors.SessionNotFound(sid)
            if not principal.may_see(sid):
                raise errors.SessionForbidden(sid)
        return list(dict.fromkeys(session_ids))

    def _scopes(self, principal: Principal, session_ids: Sequence[str]) -> list[str]:
        """Named sessions, or for none: every session the principal may see (``*`` for all)."""
        if session_ids:
            return self._sessions(principal, session_ids)
        if principal.all_sessions:
            return [ALL_SESSIONS]
        if not principal.sessions:
            raise errors.InvalidRequest(
                "the caller may see no session",
                [Violation("/session_ids", FormErrorReason.SCHEMA_INVALID_VALUE, "no visible session")],
            )
        return sorted(principal.sessions)

    async def get(
        self, principal: Principal, interaction_id: str, session_id: str | None = None
    ) -> interaction_pb2.Interaction:
        """One Interaction, pending or settled within retention. Raises InteractionNotFound."""
        return (await self._visible_record(principal, interaction_id, session_id or None)).interaction

    async def list_pending(
        self, principal: Principal, session_ids: Sequence[str] = ()
    ) -> list[interaction_pb2.Interaction]:
        """Pending Interactions of ``session_ids`` (empty: every session the principal may see), oldest first.

        Raises SessionForbidden (PERMISSION_DENIED) for a named session the principal may not see.
        """
        if session_ids:
            pending, _ = await self.store.session_snapshot(self._sessions(principal, session_ids))
            ids = [i for sid in pending for i in pending[sid]]
        else:
            ids = await self.store.pending_ids()
        out: list[interaction_pb2.Interaction] = []
        policies = self.policies.current()
        for interaction_id in ids:
            record = await self.store.get(interaction_id)
            if (
                record is not None
                and record.state == "pending"
                and self._may_see(principal, record.interaction, policies)
            ):
                out.append(record.interaction)
        out.sort(key=lambda i: (i.created_at.ToMilliseconds(), i.interaction_id))
        return out

    async def list_history(
        self, principal: Principal, session_ids: Sequence[str] = (), page_size: int = 0, page_token: str = ""
    ) -> tuple[list[interaction_service_pb2.HistoryEntry], str]:
        """Settled forms of ``session_ids`` (empty: every session the principal may see), newest first:
        ``(entries, next page token)`` (docs/design.md#history). ``page_size`` 0 means
        :data:`~services.interaction.history.DEFAULT_PAGE_SIZE`, capped at ``MAX_PAGE_SIZE``; the token is empty
        when no older entry is left. Entries of sessions the principal may not see are skipped, never counted.

        Raises SessionForbidden for a named session the principal may not see, InvalidRequest for a malformed
        page token or a caller that may see no session.
        """
        wanted = set(self._scopes(principal, session_ids))
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        cursor: tuple[int, str] | None = None
        if page_token:
            parsed = HistoryCursor.decode(page_token)
            if parsed is None:
                raise errors.InvalidRequest(
                    "the page token is malformed",
                    [Violation("/page_token", FormErrorReason.SCHEMA_INVALID_VALUE, "not a ListHistory page token")],
                )
            cursor = (parsed.score, parsed.interaction_id)
        out: list[interaction_service_pb2.HistoryEntry] = []
        policies = self.policies.current()
        for _round in range(_HISTORY_SCAN_ROUNDS):
            page = await self.store.history_page(cursor, max(size, _HISTORY_SCAN_BATCH))
            for score, interaction_id, entry in page:
                cursor = (score, interaction_id)
                if (ALL_SESSIONS in wanted or entry.session_id in wanted) and visible(
                    principal, entry.made_for, entry.tool_name, policies
                ):
                    out.append(entry)
                    if len(out) == size:
                        return out, HistoryCursor(*cursor).encode()
            if len(page) < max(size, _HISTORY_SCAN_BATCH):
                return out, ""
        # Many entries of other sessions in a row: hand back what was found and where the scan stopped.
        return out, HistoryCursor(*cursor).encode() if cursor is not None else ""

    # --- Attach (surfaces) ----------------------------------------------------------------------

    async def attach_start(self, principal: Principal, session_ids: Sequence[str], token: str) -> AttachStart:
        """Begin an Attach: replay from ``token`` when it still covers every session without loss,
        otherwise a fresh snapshot of pending forms plus the Stream positions to follow from.

        Empty ``session_ids`` means every session the principal may see (the Host-wide Stream when it
        sees all). Raises SessionForbidden (PERMISSION_DENIED) for a session the principal may not see.
        """
        sessions = self._scopes(principal, session_ids)
        parsed = ResumeToken.decode(token) if token else None
        if parsed is not None and await self._token_valid(parsed, sessions):
            return AttachStart(snapshot=None, positions={sid: parsed.positions[sid] for sid in sessions})
        pending, positions = await self.store.session_snapshot(sessions)
        snapshot: list[interaction_pb2.Interaction] = []
        policies = self.policies.current()
        for sid in sessions:
            for interaction_id in pending[sid]:
                record = await self.store.get(interaction_id)
                if (
                    record is not None
                    and record.state == "pending"
                    and self._may_see(principal, record.interaction, policies)
                ):
                    snapshot.append(record.interaction)
        return AttachStart(snapshot=snapshot, positions=positions)

    async def _token_valid(self, token: ResumeToken, sessions: Sequence[str]) -> bool:
        if set(token.positions) != set(sessions):
            return False
        if self._now_ms() - token.issued_ms > self.settings.retention_seconds * 1000:
            return False
        for sid in sessions:
            try:
                position = _stream_id(token.positions[sid])
            except ValueError:
                return False
            info = await self.store.stream_info(sid)
            if not info.exists:
                if position != (0, 0):
                    return False
                continue
            trimmed = info.entries_added > info.length
            if position < _stream_id(info.first_id) and (position != (0, 0) or trimmed):
                return False
        return True

    def token(self, positions: dict[str, str]) -> str:
        """The resume token for ``positions`` (issued now)."""
        return ResumeToken(positions=dict(positions), issued_ms=self._now_ms()).encode()

    async def follow_events(
        self, positions: dict[str, str], principal: Principal = ANONYMOUS
    ) -> AsyncIterator[tuple[interaction_pb2.InteractionEvent, str]]:
        """Yield ``(event, resume token)`` for every change after ``positions`` that ``principal`` may see,
        through the replica's fan-out (docs/design.md#fan-out): events of a form made for a person reach only
        that person and its approvers (filtered per subscriber; the policies in force when the event arrives).
        Redis outages are waited out from the last position.

        Raises :class:`~services.interaction.fanout.SubscriberOverflow` when the consumer fell too far
        behind: the caller ends its stream and the client resumes from its last token, losing nothing.
        """
        scopes = {self.store.keys.events(sid): sid for sid in positions}
        current = dict(positions)
        subscription = self.fanout.subscribe(
            {key: positions[sid] for key, sid in scopes.items()}, self.store.event_entry
        )
        try:
            async for key, entry_id, event in subscription:
                current[scopes[key]] = entry_id
                person = event.interaction.binding.made_for.principal
                if person and not self._may_see(principal, event.interaction, self.policies.current()):
                    continue  # the next visible event's token covers this position
                yield event, self.token(current)
        finally:
            subscription.close()

    # --- HostLink settled feed (broker) ---------------------------------------------------------

    async def settled_position(self) -> str:
        """The Host-wide settled Stream position to follow from (take it before checking watched ids)."""
        return await self.store.settled_position()

    async def settled_of(self, interaction_ids: Sequence[str]) -> list[interaction_pb2.Interaction]:
        """The records among ``interaction_ids`` that are already settled (reported on HostLink hello)."""
        out: list[interaction_pb2.Interaction] = []
        for interaction_id in dict.fromkeys(interaction_ids):
            # durable as read (docs/design.md#durable-fences); a replica that lags fails the hello, which retries
            try:
                record = await self.store.durable_record(interaction_id) if interaction_id else None
            except errors.AnswerUnsealable:
                continue  # logged answer_unsealable: never pushed without its answer, never fails the hello
            if record is not None and record.state != "pending":
                out.append(record.interaction)
        return out

    async def _durable_record(self, interaction_id: str) -> Record | None:
        """The record once it is on the replicas the fence requires, waiting out replicas that lag or are
        down (docs/design.md#durable-fences): a broker never acts on a settlement a failover can roll back."""
        retry = DURABLE_READ_BACKOFF.attempts()
        while True:
            try:
                return await self.store.durable_record(interaction_id)
            except errors.StoreUnavailable:  # NotReplicated included
                await retry.sleep()  # back off while Redis or its replicas catch up

    async def _still_settled(self, interaction: interaction_pb2.Interaction) -> bool:
        """Whether a settlement read from the settled Stream is durable as read; False when a failover
        rolled it back (the form is pending again, or another settlement replaced it)."""
        if not self.store.fenced:
            return True
        try:
            record = await self._durable_record(interaction.interaction_id)
        except errors.AnswerUnsealable:
            return False  # logged answer_unsealable (a replica with another key): not pushed
        same = record is not None and _same_settlement(record.interaction, interaction)
        if not same:
            log.warning("settlement_rolled_back", extra={"interaction_id": interaction.interaction_id})
        return same

    async def follow_settled(self, epoch: int, after: str) -> AsyncIterator[interaction_pb2.Interaction]:
        """Yield every Interaction of ``epoch`` settled after Stream position ``after``, forever.

        Settlements by any replica (answers, closes, the reaper) arrive here through the replica's
        fan-out; Redis outages are waited out from the last position. With a fence, each is yielded only
        once it is on the required replicas and still as read (docs/design.md#durable-fences). Raises
        :class:`~services.interaction.fanout.SubscriberOverflow` like :meth:`follow_events`.
        """
        subscription = self.fanout.subscribe({self.store.keys.settled(): after}, self.store.settled_entry)
        try:
            async for _key, _entry_id, (record_epoch, interaction) in subscription:
                if record_epoch == epoch and await self._still_settled(interaction):
                    yield interaction
        finally:
            subscription.close()

    # --- Reaper -------------------------------------------------------------------------------------

    async def reap_once(self) -> int:
        """Close expired leases (``lease_expired``), ended waits (``timed_out``) and, when no background
        closer of this process is running, forms of older epochs left pending (``host_restarted``: a
        closer that was interrupted here or on another replica); returns how many closed.

        Safe to run on several replicas at once: each closure re-checks its deadline in ``settle.lua``.
        """
        now = self._now_ms()
        closed = 0
        epoch = await self.store.current_epoch()
        if not self._closers and await self.store.older_pending(epoch) > 0:
            closed += await self.close_older_epochs()
        elif not self._closers:
            await self.lose_older_deliveries()
        for interaction_id in await self.store.due_waits(now, _REAP_BATCH):
            record = await self.store.get(interaction_id)
            if record is not None and record.state == "pending":
                changed, _ = await self._close(record, _timeout_reason(record.interaction), Mode.TIMEOUT)
                closed += int(changed)
        for interaction_id in await self.store.due_leases(epoch, now, _REAP_BATCH):
            record = await self.store.get(interaction_id)
            if record is not None and record.state == "pending":
                changed, _ = await self._close(record, interaction_pb2.CLOSE_REASON_LEASE_EXPIRED, Mode.LEASE)
                closed += int(changed)
        return closed
