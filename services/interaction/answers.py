"""Answers to a Host's pending forms, from surfaces: validated, committed once, named by who answered.

Rules (RFC criteria 5-8): an answer is validated against the stored canonical form and committed by one Lua
script (``settle.lua``: exactly one winner); a repeated ``submission_id`` gets the first outcome back (with a
fence, only once it is durable); an id the caller may not see reads as unknown. Nothing here logs form copy or
values. See docs/design.md#lifecycle and docs/security.md "No answer after settlement".
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable

from google.protobuf import json_format

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core import metrics
from services.core.auth import ANONYMOUS, Principal
from services.core.form import (
    FormError,
    FormErrorReason,
    Violation,
    answer_from_proto,
    answer_to_proto,
    form_from_proto,
    validate_answer,
)
from services.core.limits import MAX_ID_CHARS, Limits
from services.core.status import ServiceError
from services.interaction import audit, errors
from services.interaction.forms import Forms
from services.interaction.presence import clean_kind
from services.interaction.reads import Reads
from services.interaction.store import InteractionStore, Mode, Record, ScriptCode, SettleResult

log = logging.getLogger("maka.interaction.authority")
"""The authority's one logger (its parts log under the same name)."""

_CLOSE_REASONS_BY_NAME = {errors.close_reason_name(v): v for v in interaction_pb2.CloseReason.values()}


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


class Answers:
    """Surfaces answer a Host's pending forms: one committed answer per form (``settle.lua``)."""

    def __init__(
        self, store: InteractionStore, *, limits: Limits, now_ms: Callable[[], int], forms: Forms, reads: Reads
    ) -> None:
        self.store = store
        self.limits = limits
        self.forms = forms
        self.reads = reads
        self._now_ms = now_ms

    @property
    def host_id(self) -> str:
        """The Runtime Host these answers are for."""
        return self.store.keys.host_id

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
        record = await self.reads.visible_record(
            principal, interaction_id, session_id, known=self.forms.opened(interaction_id)
        )
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
        self.forms.forget_opened(interaction_id)  # settled now, or settled before: either way no longer pending
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
            await self.forms.close_record(record, interaction_pb2.CLOSE_REASON_HOST_RESTARTED, Mode.RESTART)
        elif result.code is ScriptCode.EXPIRED:
            reason = _CLOSE_REASONS_BY_NAME[result.reason]
            mode = Mode.TIMEOUT if reason == interaction_pb2.CLOSE_REASON_TIMED_OUT else Mode.LEASE
            await self.forms.close_record(record, reason, mode)
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
