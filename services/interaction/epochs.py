"""Host epochs (RFC criterion 9): a new broker fences every older epoch at once, then its forms are closed.

Rules: the ``INCR`` of the epoch fences older brokers (the scripts refuse their opens, closes and heartbeats
and turn any settlement of their forms into ``host_restarted``); the forms older epochs left pending are closed
``host_restarted`` in batches (``restart_batch.lua``, same checks as ``settle.lua``); their undelivered answers
are recorded lost, never replayed. See docs/design.md#lifecycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from maka.interaction.v1 import interaction_pb2
from services.core import metrics
from services.interaction import audit, errors
from services.interaction.forms import Forms
from services.interaction.store import DeliveryMode, InteractionStore, Record

log = logging.getLogger("maka.interaction.authority")
"""The authority's one logger (its parts log under the same name)."""

RESTART_BATCH = 500
"""Most forms of older epochs closed by one ``restart_batch.lua`` call (and read per pipelined round trip)."""
_HOST_RESTARTED = errors.close_reason_name(interaction_pb2.CLOSE_REASON_HOST_RESTARTED)


class Epochs:
    """Host epochs of one Host: fence a new one, close the forms older ones left pending (``host_restarted``)
    and record their undelivered answers as lost."""

    def __init__(self, store: InteractionStore, *, now_ms: Callable[[], int], forms: Forms) -> None:
        self.store = store
        self.forms = forms
        self._now_ms = now_ms
        self._deliveries_swept = 0
        """The Host epoch at which :meth:`lose_older_deliveries` last found no undelivered answer of an older
        epoch left. ``settle.lua`` refuses answers to forms of older epochs, so none can appear until the
        epoch moves again; the reaper skips the sweep until then (0: not swept by this process yet)."""

    @property
    def host_id(self) -> str:
        """The Runtime Host of these epochs."""
        return self.store.keys.host_id

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
            changed, _ = await self.forms.deliver(
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
