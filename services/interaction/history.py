"""Who answered and the history of settled forms (docs/design.md#history).

The authority records who answered (``Interaction.answered_by``: the authenticated principal, never a token,
and the surface kind the caller named). :func:`history_entry` is what ``ListHistory`` keeps of
a settled Interaction: ids, Tool, provenance, action, who, when, close reason and delivery - never the answer's
values, the form's copy, ``requestState`` or a token (docs/security.md "History and audit").
:class:`HistoryCursor` is the opaque page token of ``ListHistory``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2

DEFAULT_PAGE_SIZE = 50
"""Entries per ``ListHistory`` page when the request names none."""
MAX_PAGE_SIZE = 500
"""Most entries one ``ListHistory`` page returns."""


def history_entry(interaction: interaction_pb2.Interaction, host_id: str) -> interaction_service_pb2.HistoryEntry:
    """The history entry of a settled ``interaction`` (field by field: nothing of the answer but its action)."""
    binding = interaction.binding
    entry = interaction_service_pb2.HistoryEntry(
        interaction_id=interaction.interaction_id,
        host_id=host_id,
        host_epoch=interaction.host_epoch,
        session_id=binding.session_id,
        turn_id=binding.turn_id,
        invocation_id=binding.invocation_id,
        tool_name=binding.tool_name,
        state=interaction.state,
        close_reason=interaction.close_reason,
        delivery=interaction.delivery,
        delivery_lost_reason=interaction.delivery_lost_reason,
    )
    entry.requester.CopyFrom(interaction.form.requester)
    if binding.HasField("made_for"):
        entry.made_for.CopyFrom(binding.made_for)
    if interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
        entry.action = interaction.answer.action
        entry.answered_by.CopyFrom(interaction.answered_by)
    for name in ("created_at", "settled_at", "delivery_recorded_at"):
        if interaction.HasField(name):
            getattr(entry, name).CopyFrom(getattr(interaction, name))
    return entry


@dataclass(frozen=True, slots=True)
class HistoryCursor:
    """Where a ``ListHistory`` page ended: the last entry's settlement time (ms) and id. Encoded as URL-safe
    base64 of ``{"v":1,"s":<ms>,"i":<id>}``; opaque to clients."""

    score: int
    interaction_id: str

    def encode(self) -> str:
        """The opaque page token."""
        raw = json.dumps({"v": 1, "s": self.score, "i": self.interaction_id}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(token: str) -> HistoryCursor | None:
        """Parse a page token; None when it is malformed."""
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if raw.get("v") != 1 or not isinstance(raw["s"], int) or not isinstance(raw["i"], str):
                return None
            return HistoryCursor(score=raw["s"], interaction_id=raw["i"])
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, UnicodeDecodeError):
            return None
