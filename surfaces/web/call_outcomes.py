"""What a finished call's forms came to, for the page's "Recent calls" and the cards that follow a call
(``GET /api/status``): a Tool that returns after its form was declined or cancelled (Dismiss) has
``succeeded`` for the broker — it completed — but nobody approved anything, so each such call's JSON gets
``formOutcome`` ``"declined"`` / ``"cancelled"`` (``null`` otherwise) and the page says that instead.

The broker's ``CallSummary`` names the call's forms, never their answers; the answers come from the Interaction
service (``GetInteraction``, asked as the person the page acts for; the action only, never a value). A settled
form's answer never changes, so each is asked once and kept (bounded, :data:`KEPT`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from maka_client import MakaError
from services.core.form.model import Action
from surfaces.common.interactions import Interactions, InteractionState

FORM_OUTCOME: dict[Action, str] = {Action.DECLINE: "declined", Action.CANCEL: "cancelled"}
"""The ``formOutcome`` of a form answered with something other than ``accept``."""
CALLS_LOOKED_AT = 10
"""The newest calls whose forms are asked about (the page shows ten; ``status.js`` ``MAX_ACTIVITY``)."""
FORMS_PER_CALL = 8
"""The last forms of one call asked about (a call's rounds rarely have more)."""
KEPT = 2048
"""Settled forms whose outcome is remembered (oldest forgotten first)."""


class FormOutcomes:
    """The ``formOutcome`` of recent calls, from their forms' answers (each settled form asked once)."""

    def __init__(self) -> None:
        self._settled: OrderedDict[str, str | None] = OrderedDict()

    async def add_to(self, calls: Sequence[dict[str, Any]], backend: Interactions) -> None:
        """Set ``formOutcome`` on every call of :func:`surfaces.common.server_status.call_json`'s shape: for the
        newest :data:`CALLS_LOOKED_AT` that ``succeeded`` with forms, the first of their forms not accepted."""
        for call in calls:
            call["formOutcome"] = None
        looked_at = [
            call for call in calls[:CALLS_LOOKED_AT] if call["state"] == "succeeded" and call["interactionIds"]
        ]
        outcomes = await asyncio.gather(*(self._call_outcome(call, backend) for call in looked_at))
        for call, outcome in zip(looked_at, outcomes, strict=True):
            call["formOutcome"] = outcome

    async def _call_outcome(self, call: dict[str, Any], backend: Interactions) -> str | None:
        ids = list(call["interactionIds"])[-FORMS_PER_CALL:]
        outcomes = await asyncio.gather(*(self._form_outcome(i, call["sessionId"], backend) for i in ids))
        return next((outcome for outcome in outcomes if outcome is not None), None)

    async def _form_outcome(self, interaction_id: str, session_id: str, backend: Interactions) -> str | None:
        if interaction_id in self._settled:
            self._settled.move_to_end(interaction_id)
            return self._settled[interaction_id]
        try:
            view = await backend.get(interaction_id, session_id=session_id)
        except MakaError:  # not the reader's to see, past retention, or unavailable: the broker's state is shown
            return None  # (asked again next time: another reader may see it)
        if view.state is InteractionState.PENDING:
            return None
        outcome = None
        if view.state is InteractionState.ANSWERED and view.answer is not None:
            outcome = FORM_OUTCOME.get(view.answer.action)
        self._keep(interaction_id, outcome)
        return outcome

    def _keep(self, interaction_id: str, outcome: str | None) -> None:
        self._settled[interaction_id] = outcome
        while len(self._settled) > KEPT:
            self._settled.popitem(last=False)
