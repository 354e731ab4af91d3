"""JSON shapes of the web surface's ``/api/`` (what ``static/app.js`` reads and sends).

The page never sees protobuf: :func:`interaction_view` turns an
:class:`surfaces.common.interactions.InteractionView` into plain JSON, and
:func:`answer_from_json` turns the page's answer body into a typed :class:`services.core.form.Answer`
(with :func:`surfaces.common.form_input.values_from_json`). Answer *values* never go back to the
page: a settled Interaction's view carries only the action (RFC "Security and privacy requirements").
Untrusted display text (message, labels, descriptions, option labels) is passed through
:func:`surfaces.common.form_input.plain_text` (control and bidi-override characters removed); the
page still renders it only as DOM text.

Interaction view shape::

    {"id": str, "session_id": str, "turn_id": str, "tool_name": "SERVER:TOOL", "host_epoch": int,
     "host": str (the form's Host when the page follows a pool, ``MAKA_HOST_IDS``; else ""),
     "state": "pending" | "answered" | "closed", "close_reason": "" | "answered" | "stopped" | ...,
     "close_text": str, "answer_action": "" | "accept" | "decline" | "cancel",
     "created_at": ISO-8601 UTC | null, "expires_at": ... | null, "settled_at": ... | null,
     "delivery": "" | "pending" | "delivered" | "lost", "delivery_lost_text": str (with "lost"),
     "deadline": ISO-8601 UTC | null (the earlier of expires_at and the round's deadline: the one the page shows),
     "deadline_is_round": bool (that deadline is the round's),
     "round": {"position": int, "size": int, "deadline": ISO-8601 UTC | null} | null,
     "requester": {"provider_id", "provider_display_name", "claimed_server", "claimed_tool"},
     "message": str,
     "fields": [{"name", "kind": "string" | "email" | "uri" | "date" | "date-time" | "number" | "integer" |
                 "boolean" | "single_select" | "multi_select", "label", "description", "required",
                 "constraints": {"minLength"?, "maxLength"?, "format"?, "minimum"?, "maximum"?,
                 "minItems"?, "maxItems"?}, "default": value | null, "options": [{"value", "label"}]}],
     "made_for": str (the person the call was made for; "" for a machine caller's call)}
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from maka_client import MakaError
from services.core.form import Action, Answer
from services.core.form.errors import FormErrorReason, Violation, pointer
from surfaces.common.form_input import FieldInputError, field_to_json, plain_text, values_from_json
from surfaces.common.interactions import CLOSE_REASON_TEXT, CloseReason, Delivery, InteractionView

JsonObject = dict[str, Any]

ACTIONS_BY_NAME: dict[str, Action] = {a.value: a for a in Action}
ANSWER_BODY_KEYS = frozenset({"session_id", "submission_id", "action", "values"})
"""The keys of the page's answer body; any other (a typo such as ``value``) is refused, never ignored."""


def error_body(error: MakaError) -> JsonObject:
    """The ``error`` of an error response for a service failure: reason, message, field violations
    (``{"path", "reason", "description"}``) and the form's ``close_reason`` when the service sent one."""
    violations = []
    for path, description in error.violations:
        reason, sep, text = description.partition(": ")
        violations.append({"path": path, "reason": reason if sep else "", "description": text if sep else description})
    body: JsonObject = {"reason": error.reason, "message": error.message, "violations": violations}
    if "close_reason" in error.metadata:
        body["close_reason"] = error.metadata["close_reason"].lower().removeprefix("close_reason_")
    return body


def iso(moment: datetime | None) -> str | None:
    """``moment`` as ISO-8601 UTC with milliseconds (``2026-11-30T09:00:00.000Z``), or None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    """The server's current time in the format of :func:`iso` (the page uses it to correct clock skew)."""
    return iso(datetime.now(tz=UTC)) or ""


def _field_view(data: dict[str, object]) -> JsonObject:
    view: JsonObject = dict(data)
    view["label"] = plain_text(str(view["label"]) or str(view["name"]), keep_newlines=False)
    view["description"] = plain_text(str(view["description"]))
    options = view["options"]
    assert isinstance(options, list)
    view["options"] = [{"value": o["value"], "label": plain_text(o["label"], keep_newlines=False)} for o in options]
    return view


def interaction_view(ix: InteractionView, *, pooled: bool = False) -> JsonObject:
    """The page's JSON view of one Interaction (shape in the module docstring). Never carries answer values.
    ``host`` is the form's Host (untrusted text, made plain) when the surface follows a pool, else empty."""
    requester = ix.form.requester
    closed = ix.state.value != "pending" and ix.close_reason is not CloseReason.UNSPECIFIED
    return {
        "id": ix.interaction_id,
        "session_id": ix.session_id,
        "turn_id": ix.turn_id,
        "tool_name": plain_text(ix.tool_name, keep_newlines=False),
        "host_epoch": ix.host_epoch,
        "host": host_text(ix.host_id) if pooled else "",
        "state": ix.state.value,
        "close_reason": ix.close_reason.value if closed else "",
        "close_text": CLOSE_REASON_TEXT[ix.close_reason] if closed else "",
        "answer_action": ix.answer.action.value if ix.answer is not None else "",
        "created_at": iso(ix.created_at),
        "expires_at": iso(ix.expires_at),
        "settled_at": iso(ix.settled_at),
        "delivery": ix.delivery.value if ix.delivery is not Delivery.UNSPECIFIED else "",
        "delivery_lost_text": CLOSE_REASON_TEXT[ix.delivery_lost_reason] if ix.delivery is Delivery.LOST else "",
        "deadline": iso(ix.deadline),
        "deadline_is_round": ix.deadline_is_round,
        "round": {"position": ix.round_position, "size": ix.round_size, "deadline": iso(ix.round_deadline)}
        if ix.round_size
        else None,
        "requester": {
            "provider_id": plain_text(requester.provider_id, keep_newlines=False),
            "provider_display_name": plain_text(requester.provider_display_name, keep_newlines=False),
            "claimed_server": plain_text(requester.claimed_server, keep_newlines=False),
            "claimed_tool": plain_text(requester.claimed_tool, keep_newlines=False),
        },
        "message": plain_text(ix.form.message),
        "fields": [_field_view(field_to_json(f)) for f in ix.form.fields],
        "made_for": plain_text(ix.proto.binding.made_for.principal, keep_newlines=False),
    }


def host_text(host_id: str) -> str:
    """A Host id as the page shows it and matches snapshots by (server-supplied text: made plain)."""
    return plain_text(host_id, keep_newlines=False)


class AnswerShapeError(ValueError):
    """The page's answer body is not the expected JSON shape (HTTP 400, ``INVALID_REQUEST``).

    ``violations`` name each problem by path; messages never quote the submitted values.
    """

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = tuple(violations)
        super().__init__("; ".join(f"{v.path}: {v.description}" for v in violations))


def answer_from_json(body: object, ix: InteractionView) -> tuple[Answer, str]:
    """Decode the page's answer body into ``(Answer, submission_id)``.

    ``body`` shape: ``{"action": "accept" | "decline" | "cancel", "values": {name: value},
    "submission_id": str, "session_id": str}`` (``values`` only with ``accept``). Values are typed by the
    form's field kinds; the Interaction service then validates them authoritatively (RFC "Core owns
    exact-shape decoding").

    Raises :class:`AnswerShapeError` for a body that is not that shape, including one with any other key.
    """
    if not isinstance(body, dict):
        raise AnswerShapeError([Violation("$", FormErrorReason.ANSWER_WRONG_TYPE, "expected a JSON object")])
    unknown = sorted(set(body) - ANSWER_BODY_KEYS)
    if unknown:
        raise AnswerShapeError(
            [
                Violation(pointer(key), FormErrorReason.ANSWER_UNKNOWN_FIELD, "is not a key of an answer body")
                for key in unknown
            ]
        )
    action = body.get("action")
    if not isinstance(action, str) or action not in ACTIONS_BY_NAME:
        raise AnswerShapeError(
            [Violation("/action", FormErrorReason.ANSWER_INVALID_ACTION, "expected accept, decline or cancel")]
        )
    submission_id = body.get("submission_id", "")
    if not isinstance(submission_id, str) or len(submission_id) > 128:
        raise AnswerShapeError(
            [Violation("/submission_id", FormErrorReason.ANSWER_WRONG_TYPE, "expected at most 128 characters")]
        )
    raw_values = body.get("values")
    if raw_values is None:
        raw_values = {}
    try:
        values = values_from_json(ix.form, raw_values)
    except FieldInputError as error:
        raise AnswerShapeError([Violation("/values", FormErrorReason.ANSWER_WRONG_TYPE, str(error))]) from None
    return Answer(action=ACTIONS_BY_NAME[action], values=values), submission_id
