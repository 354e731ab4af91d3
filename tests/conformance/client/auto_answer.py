"""The automatic answering surface: an ``Attach`` client that accepts every pending form.

It is an ordinary surface (docs/design.md#surfaces-and-callers): it reads the Host-owned projection through
:class:`surfaces.common.interactions.Interactions` and answers with ``Answer``; it keeps no
pending list of its own. Each form gets :func:`tests.conformance.client.answers.automatic_answer`.
A ``gate`` lets a driver hold one form pending (e.g. to make another call between MRTR rounds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from maka_client import MakaError
from services.core.form import Answer, Form
from services.core.reasons import InteractionErrorReason
from surfaces.common.interactions import (
    FormOpened,
    FormSnapshot,
    Interactions,
    InteractionView,
)
from tests.conformance.client.answers import automatic_answer

log = logging.getLogger("maka.tests.conformance.client.auto_answer")

Gate = Callable[[InteractionView], Awaitable[None]]
"""Awaited before a form is answered; returns when the form may be answered."""


async def _open_gate(_: InteractionView) -> None:
    return None


class AutoAnswerer:
    """Accepts each pending form of ``session_ids`` with its defaults / minimal valid values.

    ``answered`` lists the ids answered so far (in order); ``failures`` the ``(interaction id, reason)``
    of answers the Interaction service refused (the stable ``ErrorReason`` name, e.g.
    ``INVALID_ANSWER``; ``ALREADY_SETTLED`` and ``CLOSED`` are not failures: someone else settled it).
    Form values are never logged. ``answer_for`` picks the answer (default :func:`automatic_answer`),
    ``on_seen`` is called once per form as it first appears (the benchmark stamps arrival times with it).
    """

    def __init__(
        self,
        client: Interactions,
        session_ids: Sequence[str],
        *,
        gate: Gate = _open_gate,
        answer_for: Callable[[Form], Answer] = automatic_answer,
        on_seen: Callable[[InteractionView], None] | None = None,
    ) -> None:
        self._client = client
        self._session_ids = tuple(session_ids)
        self._gate = gate
        self._answer_for = answer_for
        self._on_seen = on_seen
        self._seen: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._subscribed = asyncio.Event()
        self.answered: list[str] = []
        self.failures: list[tuple[str, str]] = []

    async def wait_subscribed(self) -> None:
        """Return once the first snapshot arrived (forms opened later are seen live)."""
        await self._subscribed.wait()

    async def run(self) -> None:
        """Attach and answer forever; cancel the task to stop. Raises ``MakaError`` for errors a
        reconnect cannot fix (see :meth:`Interactions.attach`)."""
        try:
            async for event in self._client.attach(self._session_ids):
                if isinstance(event, FormSnapshot):
                    self._subscribed.set()
                    for view in event.pending:
                        self._start(view)
                elif isinstance(event, FormOpened):
                    self._start(event.interaction)
        finally:
            for task in self._tasks:
                task.cancel()

    def _start(self, view: InteractionView) -> None:
        if view.interaction_id in self._seen or not view.pending:
            return
        self._seen.add(view.interaction_id)
        if self._on_seen is not None:
            self._on_seen(view)
        task = asyncio.create_task(self._answer(view), name=f"auto-answer {view.interaction_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, view: InteractionView) -> None:
        await self._gate(view)
        try:
            await self._client.answer(view.interaction_id, self._answer_for(view.form), session_id=view.session_id)
        except MakaError as error:
            if error.reason in (InteractionErrorReason.ALREADY_SETTLED, InteractionErrorReason.CLOSED):
                log.info(
                    "form_settled_elsewhere", extra={"interaction_id": view.interaction_id, "reason": error.reason}
                )
                return
            log.warning("auto_answer_refused", extra={"interaction_id": view.interaction_id, "reason": error.reason})
            self.failures.append((view.interaction_id, error.reason))
            return
        log.info("auto_answered", extra={"interaction_id": view.interaction_id, "fields": len(view.form.fields)})
        self.answered.append(view.interaction_id)
