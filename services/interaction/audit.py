"""Audit events: one JSON line per form transition on the logger ``maka.audit`` (docs/security.md "History and
audit").

The replica whose script committed a transition emits it, so each transition is audited once:
``form_opened``, ``form_answered``, ``form_closed`` and ``form_delivery``. An event carries ids (Interaction,
Host, epoch, session, turn, invocation), the Tool name, the person the call was made for (``made_for``, when
set), who answered (principal name and kind, surface kind), the action, the close or loss reason, the delivery
and times (RFC 3339 UTC) - never an answer value, form copy, ``requestState`` or token. With ``MAKA_AUDIT_LOG``
set (:func:`configure`) the events are appended to that file only, as JSON lines an operator ships; otherwise
they go to the service's own log stream with every other line.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import timestamp_pb2

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.logs import JsonFormatter

AUDIT = logging.getLogger("maka.audit")
"""The audit logger (level INFO whatever the service's log level)."""
AUDIT.setLevel(logging.INFO)


def configure(path: Path | None) -> None:
    """Send audit events to ``path`` (appended, JSON lines) and not to the service log; ``None``: to the service
    log. Replaces what an earlier call configured."""
    for handler in list(AUDIT.handlers):
        AUDIT.removeHandler(handler)
        handler.close()
    AUDIT.setLevel(logging.INFO)
    if path is None:
        AUDIT.propagate = True
        return
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    AUDIT.addHandler(handler)
    AUDIT.propagate = False


def _iso(ts: timestamp_pb2.Timestamp) -> str:
    return datetime.fromtimestamp(ts.ToMilliseconds() / 1000, UTC).isoformat(timespec="milliseconds")


def _name(wrapper: Any, prefix: str, value: int) -> str:
    """An enum value's name without its prefix, lower case (``CLOSE_REASON_TIMED_OUT`` → ``timed_out``)."""
    name: str = wrapper.Name(value)
    return name.removeprefix(prefix).lower()


def emit(event: str, interaction: interaction_pb2.Interaction, host_id: str) -> None:
    """Audit ``event`` (``form_opened`` | ``form_answered`` | ``form_closed`` | ``form_delivery``) of
    ``interaction`` as it stands after the transition (only the allowlisted fields below are read)."""
    binding = interaction.binding
    fields: dict[str, object] = {
        "interaction_id": interaction.interaction_id,
        "host_id": host_id,
        "host_epoch": interaction.host_epoch,
        "session_id": binding.session_id,
        "turn_id": binding.turn_id,
        "invocation_id": binding.invocation_id,
        "tool_name": binding.tool_name,
        "created_at": _iso(interaction.created_at),
    }
    if binding.made_for.principal:
        fields["made_for"] = binding.made_for.principal
    if event == "form_opened":
        fields["expires_at"] = _iso(interaction.expires_at)
    if interaction.HasField("settled_at"):
        fields["settled_at"] = _iso(interaction.settled_at)
    if interaction.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
        fields["action"] = _name(form_pb2.Action, "ACTION_", interaction.answer.action)
        who = interaction.answered_by
        fields["principal"] = who.principal
        fields["principal_kind"] = _name(interaction_pb2.PrincipalKind, "PRINCIPAL_KIND_", who.principal_kind)
        fields["surface_kind"] = who.surface_kind
        if who.issuer:
            fields["issuer"] = who.issuer
    elif interaction.state == interaction_pb2.INTERACTION_STATE_CLOSED:
        fields["close_reason"] = _name(interaction_pb2.CloseReason, "CLOSE_REASON_", interaction.close_reason)
    if event == "form_delivery":
        fields["delivery"] = _name(interaction_pb2.DeliveryState, "DELIVERY_STATE_", interaction.delivery)
        if interaction.delivery == interaction_pb2.DELIVERY_STATE_LOST:
            fields["delivery_lost_reason"] = _name(
                interaction_pb2.CloseReason, "CLOSE_REASON_", interaction.delivery_lost_reason
            )
        fields["delivery_recorded_at"] = _iso(interaction.delivery_recorded_at)
    AUDIT.info(event, extra=fields)
