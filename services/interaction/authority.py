"""The Interaction authority: one Host's pending forms, a coordinator over parts split by concern.

:class:`InteractionAuthority` wires the parts over one :class:`InteractionStore` and names their calls: Host
epochs (:mod:`~services.interaction.epochs`), forms and deliveries (:mod:`~services.interaction.forms`),
answers (:mod:`~services.interaction.answers`), reads (:mod:`~services.interaction.reads`) and the reaper
(:mod:`~services.interaction.reaper`); it runs the background closers of older epochs. The gRPC servicer is a
thin adapter over this class. Rules: RFC criteria 5-9, 16; docs/design.md#lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from services.core.limits import DEFAULT_LIMITS, Limits
from services.interaction import errors
from services.interaction.answers import Answers
from services.interaction.epochs import Epochs
from services.interaction.fanout import FanOut
from services.interaction.forms import Forms
from services.interaction.notify import Notifier
from services.interaction.policy import PolicyFile
from services.interaction.reads import Reads
from services.interaction.reaper import Reaper
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore

log = logging.getLogger("maka.interaction.authority")


class InteractionAuthority:
    """Pending forms of one Host (``store.keys.host_id``) in Redis: open, close, heartbeat, answer, list, get,
    attach, reap.

    ``clock`` returns seconds since the Unix epoch (tests may pass their own). Every call raises
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
        self.forms = Forms(store, settings, limits=limits, now_ms=self._now_ms, notifier=notifier)
        self.reads = Reads(store, settings, now_ms=self._now_ms, policies=self.policies, fanout=self.fanout)
        self.answers = Answers(store, limits=limits, now_ms=self._now_ms, forms=self.forms, reads=self.reads)
        self.epochs = Epochs(store, now_ms=self._now_ms, forms=self.forms)
        self.reaper = Reaper(
            store,
            now_ms=self._now_ms,
            forms=self.forms,
            epochs=self.epochs,
            closers_idle=lambda: not self._closers,
            close_older=lambda: self.close_older_epochs(),
        )
        # Host epoch (broker)
        self.fence_epoch = self.epochs.fence_epoch
        self.begin_epoch = self.epochs.begin_epoch
        self.close_older_epochs = self.epochs.close_older_epochs
        self.close_older_of = self.epochs.close_older_of
        self.lose_older_deliveries = self.epochs.lose_older_deliveries
        self.resume_epoch = self.epochs.resume_epoch
        # Forms and deliveries (broker)
        self.open = self.forms.open
        self.close = self.forms.close
        self.close_invocation = self.forms.close_invocation
        self.heartbeat = self.forms.heartbeat
        self.record_delivery = self.forms.record_delivery
        # Answers (surfaces)
        self.answer = self.answers.answer
        self.answer_outcome = self.answers.answer_outcome
        # Reads and Attach (surfaces), the settled feed (broker)
        self.get = self.reads.get
        self.list_pending = self.reads.list_pending
        self.list_history = self.reads.list_history
        self.attach_start = self.reads.attach_start
        self.token = self.reads.token
        self.follow_events = self.reads.follow_events
        self.settled_position = self.reads.settled_position
        self.settled_of = self.reads.settled_of
        self.follow_settled = self.reads.follow_settled
        # Reaper
        self.reap_once = self.reaper.reap_once

    @property
    def host_id(self) -> str:
        """The Runtime Host this authority serves."""
        return self.store.keys.host_id

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def close_older_epochs_soon(self) -> None:
        """Run :meth:`~services.interaction.epochs.Epochs.close_older_epochs` in the background (after a
        ``hello`` was answered).

        A failure (Redis down) is logged; the reaper finishes the job (``reap_once``), and so does the next
        service start. :meth:`aclose` cancels what still runs.
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
