"""The Interaction service as every surface (TUI, web, CLI) sees it: :class:`maka_client.SurfaceClient`
with every Interaction decoded into an :class:`InteractionView` (the runtime's typed form,
:mod:`services.core.form`).

Surfaces read and answer forms only through this module (docs/design.md#surfaces-and-callers: no surface
keeps a pending list of its own). The wire, the reconnects and the resume tokens are the client
library's (:meth:`maka_client.SurfaceClient.attach`: jittered exponential backoff, resumed with the last
``resume_token`` seen; RFC criterion 9); this module only decodes:

- :meth:`Interactions.attach` — the ``Attach`` stream as typed :data:`AttachEvent` values
  (:class:`FormSnapshot`, :class:`FormOpened`, :class:`FormAnswered`, :class:`FormClosed`,
  :class:`FormDeliveryRecorded`, and
  the library's :class:`maka_client.Reattaching` while it reconnects).
- :meth:`Interactions.answer` — unary ``Answer`` (idempotent per ``submission_id``).
- :meth:`Interactions.pending` / :meth:`Interactions.get` / :meth:`Interactions.list_surfaces` — unary reads.
- :meth:`Interactions.history` — settled forms, newest first (``ListHistory``; :func:`history_json`).

Failed calls raise :class:`maka_client.MakaError`, whose ``reason`` is the stable ``ErrorReason``
(:class:`maka_client.InteractionErrorReason`, e.g. ``ALREADY_SETTLED``). The channel is the runtime's
(:func:`services.core.channels.open_channel`: round_robin over replicas, TLS from ``MAKA_TLS_*``, the bearer
token ``MAKA_SURFACE_TOKEN`` on every call).

Create the client (and so its grpc.aio channel) inside the running event loop that uses it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeAlias

import grpc.aio
from google.protobuf import timestamp_pb2
from google.protobuf.message import Message

import maka_client as client
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from maka_client import (
    AttachedSurface,
    FormEvent,
    HistoryEntry,
    HistoryPage,
    Reattaching,
    ReattachPolicy,
    SurfaceClient,
)
from maka_client._gen.maka.form.v1 import form_pb2 as wire_form_pb2
from maka_client.surface import TOKEN_ENV as TOKEN_ENV  # re-exported: the variable surfaces read
from services.core.auth import acts_for_metadata
from services.core.channels import Token, open_channel
from services.core.form import Answer, Form, FormError, Requester, answer_from_proto, answer_to_proto, form_from_proto
from surfaces.common.form_input import field_to_json, format_time_left
from surfaces.common.wire import same

log = logging.getLogger("maka.surfaces.interactions")


class CloseReason(StrEnum):
    """Why an Interaction stopped being pending (``maka.interaction.v1.CloseReason`` without prefix, lower case)."""

    UNSPECIFIED = "unspecified"
    ANSWERED = "answered"
    STOPPED = "stopped"
    PROVIDER_LOST = "provider_lost"
    INVOCATION_SETTLED = "invocation_settled"
    HOST_RESTARTED = "host_restarted"
    LEASE_EXPIRED = "lease_expired"
    TIMED_OUT = "timed_out"
    SUPERSEDED = "superseded"
    ROUND_EXPIRED = "round_expired"


class Delivery(StrEnum):
    """``maka.interaction.v1.DeliveryState`` without prefix, lower case: did a committed answer reach the
    provider (docs/security.md "No answer after settlement")? ``unspecified`` unless answered."""

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    DELIVERED = "delivered"
    LOST = "lost"


def _delivery_of(value: int) -> Delivery:
    """``maka.interaction.v1.DeliveryState`` enum number → :class:`Delivery`."""
    try:
        name = interaction_pb2.DeliveryState.Name(value)  # type: ignore[arg-type]
    except ValueError:
        return Delivery.UNSPECIFIED
    return Delivery(name.removeprefix("DELIVERY_STATE_").lower())


class InteractionState(StrEnum):
    """``maka.interaction.v1.InteractionState`` without prefix, lower case."""

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    ANSWERED = "answered"
    CLOSED = "closed"


CLOSE_REASON_TEXT: dict[CloseReason, str] = {
    CloseReason.UNSPECIFIED: "closed",
    CloseReason.ANSWERED: "answered on another surface",
    CloseReason.STOPPED: "the Tool call was stopped",
    CloseReason.PROVIDER_LOST: "the provider disconnected",
    CloseReason.INVOCATION_SETTLED: "the Tool call finished without it",
    CloseReason.HOST_RESTARTED: "the Host restarted",
    CloseReason.LEASE_EXPIRED: "the Host stopped renewing it",
    CloseReason.TIMED_OUT: "it timed out",
    CloseReason.SUPERSEDED: "it was replaced",
    CloseReason.ROUND_EXPIRED: "the server's time for this round of questions ran out",
}
"""Plain-language text for each close reason, for surfaces to show when a form disappears."""

LOST_TEXT = "your answer was recorded but never reached the Tool: {reason} first (nothing was retried)"
"""What surfaces say when a committed answer's delivery is ``lost`` (``{reason}``: a CLOSE_REASON_TEXT)."""


def deadline_text(view: InteractionView, now: datetime) -> str:
    """The form's one effective deadline (:attr:`InteractionView.deadline`) as a countdown labelled by what it
    is: ``"4m 05s left"`` (the form's own wait), ``"4m 05s left in this round"`` (the round's deadline comes
    first: it ends every form of the round), ``"expired"``, or ``"no time limit"``."""
    deadline = view.deadline
    left = format_time_left(deadline, now)
    if deadline is None or deadline <= now or not view.deadline_is_round:
        return left
    return f"{left} in this round"


def round_line(view: InteractionView) -> str:
    """One line about the form's round without a second countdown: ``"form 1 of 2 · the round ends 14:05:09
    UTC"`` when the round's deadline is the effective one, ``"form 1 of 2"`` when the form's own wait ends
    first (that later deadline never applies to it); empty outside a round or for a one-form round that adds
    nothing to :func:`deadline_text`."""
    if view.round_size <= 0:
        return ""
    parts: list[str] = []
    if view.round_size > 1:
        parts.append(f"form {view.round_position} of {view.round_size}")
    if view.deadline_is_round and view.round_deadline is not None:
        parts.append(f"the round ends {view.round_deadline.astimezone(UTC).strftime('%H:%M:%S UTC')}")
    return " · ".join(parts)


def _time(ts: timestamp_pb2.Timestamp, present: bool) -> datetime | None:
    if not present:
        return None
    return ts.ToDatetime(tzinfo=UTC)


def _decode_form(message: form_pb2.Form) -> Form:
    """``form_from_proto``, or — when a stored form breaks the contract — a field-less stand-in that says so, so a
    stream never dies on one bad record and the user can still decline or dismiss it."""
    try:
        return form_from_proto(message)
    except FormError as error:
        log.warning("form_undecodable", extra={"reason": error.reason.value})
        requester = Requester(
            provider_id=message.requester.provider_id,
            provider_display_name=message.requester.provider_display_name,
            claimed_server=message.requester.claimed_server,
            claimed_tool=message.requester.claimed_tool,
        )
        return Form(
            message=f"This form cannot be shown ({error.reason.value}); decline or dismiss it.",
            fields=(),
            requester=requester,
        )


def _answered_by(message: interaction_pb2.Interaction) -> client.AnsweredBy | None:
    if not message.HasField("answered_by"):
        return None
    who = message.answered_by
    kind = interaction_pb2.PrincipalKind.Name(who.principal_kind).removeprefix("PRINCIPAL_KIND_").lower()
    return client.AnsweredBy(who.principal, kind, who.surface_kind, who.issuer, who.via)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def _close_reason_of(value: int) -> CloseReason:
    """``maka.interaction.v1.CloseReason`` enum number → :class:`CloseReason`."""
    try:
        name = interaction_pb2.CloseReason.Name(value)  # type: ignore[arg-type]
    except ValueError:
        return CloseReason.UNSPECIFIED
    return CloseReason(name.removeprefix("CLOSE_REASON_").lower())


def _state_of(value: int) -> InteractionState:
    """``maka.interaction.v1.InteractionState`` enum number → :class:`InteractionState`."""
    try:
        name = interaction_pb2.InteractionState.Name(value)  # type: ignore[arg-type]
    except ValueError:
        return InteractionState.UNSPECIFIED
    return InteractionState(name.removeprefix("INTERACTION_STATE_").lower())


@dataclass(frozen=True)
class InteractionView:
    """A surface's typed view of one canonical ``maka.interaction.v1.Interaction``.

    ``form`` is decoded with :func:`services.core.form.protobuf.form_from_proto`; its message and
    labels are untrusted server text, to be shown as plain text. Times are timezone-aware UTC.
    """

    interaction_id: str
    session_id: str
    turn_id: str
    tool_use_id: str
    tool_name: str
    """Qualified ``SERVER:TOOL`` as the model called it (from the broker's binding)."""
    host_epoch: int
    state: InteractionState
    form: Form
    answer: Answer | None
    close_reason: CloseReason
    created_at: datetime | None
    expires_at: datetime | None
    """When the bounded wait ends (``None``: no limit known)."""
    settled_at: datetime | None
    proto: interaction_pb2.Interaction = field(repr=False, compare=False)
    delivery: Delivery = Delivery.UNSPECIFIED
    """Answered only: whether the answer reached the provider (``lost``: the call ended first)."""
    delivery_lost_reason: CloseReason = CloseReason.UNSPECIFIED
    """With ``delivery`` ``lost``: how the call ended (stopped, provider_lost, host_restarted, ...)."""
    round_position: int = 0
    """1-based place of this form in its MRTR round (0: not part of a round)."""
    round_size: int = 0
    """How many forms the round has (0: not part of a round)."""
    round_deadline: datetime | None = None
    """The round's one deadline (its ``requestState`` expires then); ``None`` when none is known."""
    answered_by: client.AnsweredBy | None = None
    """Answered only: who answered (principal and kind, the surface kind it used)."""
    host_id: str = ""
    """The Runtime Host the form belongs to (server-supplied text: show it through
    :func:`surfaces.common.untrusted.visible`); answers go there. Empty on a single-Host surface without one."""

    @property
    def pending(self) -> bool:
        """True while the Interaction waits for an answer."""
        return self.state is InteractionState.PENDING

    @property
    def deadline(self) -> datetime | None:
        """The one moment this form stops taking answers: the earlier of its own wait (``expires_at``) and its
        round's deadline (``round_deadline``); ``None`` when neither is known. Surfaces show only this one."""
        known = [moment for moment in (self.expires_at, self.round_deadline) if moment is not None]
        return min(known) if known else None

    @property
    def deadline_is_round(self) -> bool:
        """True when :attr:`deadline` is the round's (it comes no later than the form's own wait): the label
        then says the round ends, not just this form."""
        if self.round_deadline is None:
            return False
        return self.expires_at is None or self.round_deadline <= self.expires_at

    def to_json(self, *, with_host: bool = False) -> dict[str, object]:
        """JSON-ready data for machine output (``maka pending --json``): ids, session, Tool, state, message,
        requester, fields (see :func:`surfaces.common.form_input.field_to_json`), times as RFC 3339 UTC
        strings (``expires_at`` ``null`` when unbounded), ``host`` (the form's Host) when ``with_host`` (a surface
        following a pool). Never includes answer values."""
        requester = self.form.requester
        return {
            "id": self.interaction_id,
            "session": self.session_id,
            "turn": self.turn_id,
            "tool_use_id": self.tool_use_id,
            "tool": self.tool_name,
            "state": self.state.value,
            "close_reason": self.close_reason.value if not self.pending else None,
            "action": self.answer.action.value if self.answer is not None else None,
            "message": self.form.message,
            "requester": {
                "provider_id": requester.provider_id,
                "provider_display_name": requester.provider_display_name,
                "claimed_server": requester.claimed_server,
                "claimed_tool": requester.claimed_tool,
            },
            "fields": [field_to_json(f) for f in self.form.fields],
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "settled_at": _iso(self.settled_at),
            "delivery": self.delivery.value if self.delivery is not Delivery.UNSPECIFIED else None,
            "delivery_lost_reason": self.delivery_lost_reason.value if self.delivery is Delivery.LOST else None,
            "answered_by": {
                "principal": self.answered_by.principal,
                "principal_kind": self.answered_by.principal_kind,
                "surface": self.answered_by.surface_kind,
                "issuer": self.answered_by.issuer or None,
                "via": self.answered_by.via or None,
            }
            if self.answered_by is not None
            else None,
            **({"host": self.host_id} if with_host else {}),
            "made_for": self.proto.binding.made_for.principal or None,
            "round": {
                "position": self.round_position,
                "size": self.round_size,
                "deadline": _iso(self.round_deadline),
            }
            if self.round_size
            else None,
        }

    @classmethod
    def from_proto(cls, message: interaction_pb2.Interaction, host_id: str = "") -> InteractionView:
        """Decode ``message`` (read from ``host_id``). A form that breaks the contract becomes a field-less
        stand-in whose message says so."""
        binding = message.binding
        answer = answer_from_proto(message.answer) if message.HasField("answer") else None
        return cls(
            interaction_id=message.interaction_id,
            session_id=binding.session_id,
            turn_id=binding.turn_id,
            tool_use_id=binding.tool_use_id,
            tool_name=binding.tool_name,
            host_epoch=message.host_epoch,
            state=_state_of(message.state),
            form=_decode_form(message.form),
            answer=answer,
            close_reason=_close_reason_of(message.close_reason),
            created_at=_time(message.created_at, message.HasField("created_at")),
            expires_at=_time(message.expires_at, message.HasField("expires_at")),
            settled_at=_time(message.settled_at, message.HasField("settled_at")),
            proto=message,
            delivery=_delivery_of(message.delivery),
            delivery_lost_reason=_close_reason_of(message.delivery_lost_reason),
            round_position=message.round.position,
            round_size=message.round.size,
            round_deadline=_time(message.round.deadline, message.round.HasField("deadline")),
            answered_by=_answered_by(message),
            host_id=host_id,
        )


def surface_json(surface: AttachedSurface) -> dict[str, object]:
    """One attached surface (``ListSurfaces``) as ``maka status --json`` shows it: ``{"principal", "kind",
    "sessions": [..] | "all", "sessionCount", "attachedAt", "host", "replica"}``."""
    return {
        "principal": surface.principal,
        "kind": surface.kind or "unknown",
        "sessions": "all" if surface.all_sessions else list(surface.session_ids),
        "sessionCount": surface.session_count,
        "attachedAt": _iso(surface.attached_at),
        "host": surface.host_id,
        "replica": surface.replica_id,
    }


def history_json(entry: HistoryEntry) -> dict[str, object]:
    """One settled form (``ListHistory``) as ``maka history --json`` and the web page show it: ids, Tool,
    provenance, state, action, close reason, who answered, times (RFC 3339 UTC) and delivery. Never a value."""
    who = entry.answered_by
    return {
        "id": entry.interaction_id,
        "host": entry.host_id,
        "session": entry.session_id,
        "turn": entry.turn_id,
        "invocation": entry.invocation_id,
        "tool": entry.tool_name,
        "provider": entry.provider,
        "claimed_server": entry.claimed_server,
        "state": entry.state,
        "action": entry.action.value if entry.action is not None else None,
        "close_reason": entry.close_reason,
        "answered_by": {
            "principal": who.principal,
            "principal_kind": who.principal_kind,
            "surface": who.surface_kind,
            "issuer": who.issuer or None,
            "via": who.via or None,
        }
        if who is not None
        else None,
        "created_at": _iso(entry.created_at),
        "settled_at": _iso(entry.settled_at),
        "delivery": entry.delivery or None,
        "delivery_lost_reason": entry.delivery_lost_reason or None,
        "delivery_recorded_at": _iso(entry.delivery_recorded_at),
        "made_for": entry.made_for or None,
    }


@dataclass(frozen=True)
class FormSnapshot:
    """Every pending Interaction of the attached sessions on ``host_id`` (replaces what the surface showed of
    that Host: :func:`replaces`; on a single-Host surface, everything)."""

    pending: tuple[InteractionView, ...]
    resume_token: str
    host_id: str = ""

    def replaces(self, view: InteractionView) -> bool:
        """True when this snapshot stands for ``view``'s Host (so a form it does not list is no longer pending)."""
        return view.host_id == self.host_id


@dataclass(frozen=True)
class FormOpened:
    """A form was opened (or is pending and replayed)."""

    interaction: InteractionView
    resume_token: str


@dataclass(frozen=True)
class FormAnswered:
    """A canonical answer was committed (by this or another surface)."""

    interaction: InteractionView
    resume_token: str


@dataclass(frozen=True)
class FormClosed:
    """The Interaction was closed without an answer; ``reason`` says why."""

    interaction: InteractionView
    reason: CloseReason
    resume_token: str


@dataclass(frozen=True)
class FormDeliveryRecorded:
    """A committed answer's delivery became ``delivered`` or ``lost`` (``interaction.delivery``)."""

    interaction: InteractionView
    resume_token: str


AttachEvent: TypeAlias = FormSnapshot | FormOpened | FormAnswered | FormClosed | FormDeliveryRecorded | Reattaching
"""What :meth:`Interactions.attach` yields (:class:`maka_client.Reattaching` while the stream reconnects)."""

SURFACE_REATTACH = ReattachPolicy(initial_delay=0.2, max_delay=5.0)
"""Reconnect delays of a surface's ``Attach``: 0.2 s doubling to 5 s, with jitter; never gives up."""


def surface_token_from_env() -> str | None:
    """The bearer token from ``MAKA_SURFACE_TOKEN``, or ``None`` when unset or empty."""
    return os.environ.get(TOKEN_ENV) or None


def view_event(event: FormEvent) -> AttachEvent:
    """One event of :meth:`maka_client.SurfaceClient.attach` with its Interactions decoded (each with its Host)."""
    if isinstance(event, client.FormSnapshot):
        return FormSnapshot(tuple(_view(f) for f in event.pending), event.resume_token, host_id=event.host_id)
    if isinstance(event, client.FormOpened):
        return FormOpened(_view(event.form), event.resume_token)
    if isinstance(event, client.FormAnswered):
        return FormAnswered(_view(event.form), event.resume_token)
    if isinstance(event, client.FormClosed):
        view = _view(event.form)
        return FormClosed(view, view.close_reason, event.resume_token)
    if isinstance(event, client.FormDeliveryRecorded):
        return FormDeliveryRecorded(_view(event.form), event.resume_token)
    assert isinstance(event, Reattaching)
    return event


def _ours(message: Message) -> interaction_pb2.Interaction:
    return same(interaction_pb2.Interaction, message)


def _view(form: client.Form) -> InteractionView:
    return InteractionView.from_proto(_ours(form.proto), form.host_id)


class Interactions:
    """The Interaction service for surfaces: :class:`maka_client.SurfaceClient` returning
    :class:`InteractionView` values. Raises :class:`maka_client.MakaError`.

    Construct over a :class:`maka_client.SurfaceClient` (not closed by :meth:`close`) or use
    :meth:`connect` (its own channel, closed by :meth:`close` or ``async with``).
    """

    def __init__(self, client: SurfaceClient, *, channel: grpc.aio.Channel | None = None) -> None:
        self.client = client
        """The library client underneath (its ``host_id``, ``surface_kind``, ``reconnects``)."""
        self._channel = channel

    def for_person(self, person: str, groups: Sequence[str] = (), issuer: str = "") -> Interactions:
        """A view whose every call names ``person`` (their ``groups``, and the OpenID Connect ``issuer`` that
        verified them: empty for a static token's principal) as the one this surface acts for
        (:data:`services.core.auth.ACTS_FOR_HEADER`): the service then shows and accepts only what that person may
        see, and history labels their answers an OpenID Connect person's only with an issuer. Honoured only from a
        token allowed to act for people. Closing the view closes nothing."""
        if not person:
            return self
        return Interactions(self.client.with_metadata(acts_for_metadata(person, groups, issuer)))

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        token: Token | None = None,
        reattach: ReattachPolicy | None = None,
        host_id: str = "",
        pool: Sequence[str] | None = None,
        surface_kind: str = "",
    ) -> Interactions:
        """Open a channel to ``target`` (``host:port``) with :func:`services.core.channels.open_channel`
        (keepalive, round_robin, TLS from ``MAKA_TLS_*`` when configured, bearer token on every call); call
        inside the running loop. ``token`` defaults to :func:`surface_token_from_env` (a callable: asked at each
        new call, :class:`services.core.channels.BearerChannel`). ``pool`` (see
        :func:`surfaces.common.target.parse_pool`) follows several Hosts instead of ``host_id``
        (:class:`maka_client.SurfaceClient`).
        """
        channel = open_channel(target, token=token if token is not None else surface_token_from_env())
        client = SurfaceClient(
            target,
            channel=channel,
            reattach=reattach or SURFACE_REATTACH,
            host_id=host_id,
            pool=pool,
            surface_kind=surface_kind,
        )
        return cls(client, channel=channel)

    @property
    def pooled(self) -> bool:
        """True when this surface follows a pool of Hosts (each form then shows its Host)."""
        return self.client.pool is not None

    async def hosts(self) -> list[str]:
        """The Hosts followed now (one without a pool; ``ListHosts`` for a ``*`` pool)."""
        return await self.client.hosts()

    @property
    def reconnects(self) -> int:
        """How many times :meth:`attach` re-opened its stream (for status displays and tests)."""
        return self.client.reconnects

    async def close(self) -> None:
        """Close the channel when :meth:`connect` opened it."""
        if self._channel is not None:
            await self._channel.close()

    async def __aenter__(self) -> Interactions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def answer(
        self,
        interaction_id: str,
        answer: Answer,
        *,
        submission_id: str | None = None,
        session_id: str = "",
        acting_for: str = "",
        host_id: str | None = None,
    ) -> InteractionView:
        """Commit ``answer`` (``accept`` with values, ``decline`` or ``cancel``) to a pending Interaction.

        ``acting_for`` names the person this surface answers for (a signed-in person of the web page); the
        service honours it only from a token allowed to act for people (:data:`services.core.auth.ACTS_FOR_HEADER`).

        Returns the Interaction as it stands after the answer. ``submission_id`` defaults to a fresh
        id; retrying with the same id returns the first outcome. ``session_id`` (optional) must match
        the Interaction's session; ``host_id`` the form's Host (in a pool; found when omitted). Raises
        :class:`maka_client.MakaError`: ``INVALID_ANSWER``
        (INVALID_ARGUMENT, with violations), ``NOT_FOUND``, ``CLOSED`` (FAILED_PRECONDITION),
        ``ALREADY_SETTLED`` (ABORTED), ``UNAVAILABLE``.
        """
        message = same(wire_form_pb2.Answer, answer_to_proto(answer))
        form = await self.client.send_answer(
            interaction_id,
            message,
            submission_id=submission_id,
            session_id=session_id,
            host_id=host_id,
            metadata=acts_for_metadata(acting_for),
        )
        return _view(form)

    async def pending(self, session_ids: Sequence[str] = ()) -> list[InteractionView]:
        """The pending Interactions of ``session_ids`` (empty: every session the caller may see)."""
        return [_view(f) for f in await self.client.pending(session_ids)]

    async def list_surfaces(self) -> tuple[list[AttachedSurface], int]:
        """The surfaces attached to the Host that watch a session the caller may see, and how many more
        the service left out (its cap)."""
        return await self.client.list_surfaces()

    async def history(
        self, session_ids: Sequence[str] = (), *, page_size: int = 0, page_token: str = ""
    ) -> HistoryPage:
        """Settled forms of ``session_ids`` (empty: every session the caller may see), newest first, one page
        (:meth:`maka_client.SurfaceClient.list_history`; never an answer value)."""
        return await self.client.list_history(session_ids, page_size=page_size, page_token=page_token)

    async def get(self, interaction_id: str, *, session_id: str = "", host_id: str | None = None) -> InteractionView:
        """One Interaction, pending or settled (within retention); ``NOT_FOUND`` when there is none. In a pool it
        is read from ``host_id``, else from the Host that has it."""
        return _view(await self.client.get(interaction_id, session_id=session_id, host_id=host_id))

    async def attach(
        self, session_ids: Sequence[str] = (), resume_token: str = ""
    ) -> AsyncGenerator[AttachEvent, None]:
        """Yield the attached sessions' projection forever (:meth:`maka_client.SurfaceClient.attach`:
        reconnecting, resumed with the last token), each Interaction decoded. Stop by breaking out or
        cancelling the consumer."""
        stream = self.client.attach(session_ids, resume_token)
        try:
            async for event in stream:
                yield view_event(event)
        finally:
            await stream.aclose()
