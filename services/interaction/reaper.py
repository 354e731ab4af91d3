"""The reaper: leases and bounded waits are enforced here (RFC criterion 16).

Rules: an expired lease closes ``lease_expired``, an ended wait ``timed_out`` (``round_expired`` at the round's
deadline), and forms of older epochs an interrupted closer left pending ``host_restarted``; each closure
re-checks its deadline in ``settle.lua``, so several replicas may reap at once. See docs/design.md#lifecycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from maka.interaction.v1 import interaction_pb2
from services.interaction.epochs import Epochs
from services.interaction.forms import Forms
from services.interaction.store import InteractionStore, Mode

_REAP_BATCH = 100


def _timeout_reason(interaction: interaction_pb2.Interaction) -> interaction_pb2.CloseReason.ValueType:
    """``round_expired`` when the wait that ended was the round's deadline, else ``timed_out``."""
    rounded = interaction.HasField("round") and interaction.round.HasField("deadline")
    if rounded and interaction.round.deadline.ToMilliseconds() <= interaction.expires_at.ToMilliseconds():
        return interaction_pb2.CLOSE_REASON_ROUND_EXPIRED
    return interaction_pb2.CLOSE_REASON_TIMED_OUT


class Reaper:
    """Closes a Host's forms whose lease expired or whose wait ended, and what older epochs left pending."""

    def __init__(
        self,
        store: InteractionStore,
        *,
        now_ms: Callable[[], int],
        forms: Forms,
        epochs: Epochs,
        closers_idle: Callable[[], bool],
        close_older: Callable[[], Awaitable[int]],
    ) -> None:
        """``closers_idle``: whether no background closer of this process runs; ``close_older``: the authority's
        :meth:`~services.interaction.epochs.Epochs.close_older_epochs`."""
        self.store = store
        self.forms = forms
        self.epochs = epochs
        self._now_ms = now_ms
        self._closers_idle = closers_idle
        self._close_older = close_older

    async def reap_once(self) -> int:
        """Close expired leases (``lease_expired``), ended waits (``timed_out``) and, when no background
        closer of this process is running, forms of older epochs left pending (``host_restarted``: a
        closer that was interrupted here or on another replica); returns how many closed.

        Safe to run on several replicas at once: each closure re-checks its deadline in ``settle.lua``.
        """
        now = self._now_ms()
        closed = 0
        epoch = await self.store.current_epoch()
        if self._closers_idle() and await self.store.older_pending(epoch) > 0:
            closed += await self._close_older()
        elif self._closers_idle():
            await self.epochs.lose_older_deliveries()
        for interaction_id in await self.store.due_waits(now, _REAP_BATCH):
            record = await self.store.get(interaction_id)
            if record is not None and record.state == "pending":
                changed, _ = await self.forms.close_record(record, _timeout_reason(record.interaction), Mode.TIMEOUT)
                closed += int(changed)
        for interaction_id in await self.store.due_leases(epoch, now, _REAP_BATCH):
            record = await self.store.get(interaction_id)
            if record is not None and record.state == "pending":
                changed, _ = await self.forms.close_record(
                    record, interaction_pb2.CLOSE_REASON_LEASE_EXPIRED, Mode.LEASE
                )
                closed += int(changed)
        return closed
