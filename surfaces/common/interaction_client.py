"""The surfaces' client of the Interaction service (``maka.interaction.v1.InteractionService``).

Every surface (TUI, web, CLI) reads and answers forms only through this module (docs/design.md#surfaces-and-callers:
no surface keeps a pending list of its own):

- :meth:`InteractionClient.attach` — the ``Attach`` stream as an async iterator of typed
  :data:`AttachEvent` values (:class:`Snapshot`, :class:`Opened`, :class:`Answered`, :class:`Closed`,
  :class:`Disconnected`). It reconnects with jittered exponential backoff and resumes with the last
  ``resume_token`` it saw (RFC criterion 9: a surface that reconnects in the same Host epoch gets the
  pending form back).
- :meth:`InteractionClient.answer` — unary ``Answer`` (idempotent per ``submission_id``).
- :meth:`InteractionClient.list_pending` / :meth:`InteractionClient.get` — unary reads.

Failed calls raise :class:`InteractionError`, whose :attr:`InteractionError.reason` is the stable
``ErrorReason`` name from ``google.rpc.ErrorInfo`` (e.g. ``"ALREADY_SETTLED"``), decoded by
:func:`services.core.status.error_from_rpc`. A bearer token (``MAKA_SURFACE_TOKEN``) is sent as
``authorization: Bearer <token>`` metadata when configured.

Create the client (and so its grpc.aio channel) inside the running event loop that uses it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeAlias

import grpc
import grpc.aio
from google.protobuf import timestamp_pb2

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import bearer_metadata
from services.core.channels import open_channel
from services.core.form import Answer, Form, FormError, Requester, answer_from_proto, answer_to_proto, form_from_proto
from services.core.reasons import ErrorReason
from services.core.status import ErrorDetail, error_from_rpc
from surfaces.common.form_input import field_to_json

log = logging.getLogger("maka.surfaces.interaction_client")

TOKEN_ENV = "MAKA_SURFACE_TOKEN"
"""Environment variable holding the surface's bearer token (optional)."""

READY_TIMEOUT = 2.0
"""Seconds an Attach (re)connect waits for a ready replica before it reports Disconnected and backs off."""

_FATAL_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Attach errors that a reconnect cannot fix: raised to the caller instead of retried."""


async def _final_status(
    call: grpc.aio.StreamStreamCall[interaction_service_pb2.AttachRequest, interaction_service_pb2.AttachResponse],
) -> ErrorDetail | None:
    """The decoded final status of a finished ``Attach`` call, or None when it ended OK."""
    code = await call.code()
    if code == grpc.StatusCode.OK:
        return None
    failed = grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), await call.trailing_metadata(), details=await call.details()
    )
    return error_from_rpc(failed)


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


def delivery_of(value: int) -> Delivery:
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


class InteractionError(Exception):
    """A failed Interaction-service call. ``reason`` is the stable reason (``InteractionErrorReason.ALREADY_SETTLED``,
    ``NOT_FOUND``, ``INVALID_ANSWER``, ...; a newer server's unknown one as its string) or, without ErrorInfo, the
    gRPC status code name (``"UNAVAILABLE"``). The message never contains form values.
    """

    def __init__(self, detail: ErrorDetail) -> None:
        self.detail = detail
        self.reason: ErrorReason | str = detail.reason or detail.code.name
        super().__init__(f"{self.reason}: {detail.message}" if detail.message else self.reason)

    @property
    def code(self) -> grpc.StatusCode:
        """The gRPC status code."""
        return self.detail.code

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError) -> InteractionError:
        """Decode ``error`` with :func:`services.core.status.error_from_rpc`."""
        return cls(error_from_rpc(error))


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


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def close_reason_of(value: int) -> CloseReason:
    """``maka.interaction.v1.CloseReason`` enum number → :class:`CloseReason`."""
    try:
        name = interaction_pb2.CloseReason.Name(value)  # type: ignore[arg-type]
    except ValueError:
        return CloseReason.UNSPECIFIED
    return CloseReason(name.removeprefix("CLOSE_REASON_").lower())


def state_of(value: int) -> InteractionState:
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

    @property
    def round_text(self) -> str:
        """``"form 1 of 2"`` for a form of a round with more than one form, else ``""``."""
        return f"form {self.round_position} of {self.round_size}" if self.round_size > 1 else ""

    @property
    def pending(self) -> bool:
        """True while the Interaction waits for an answer."""
        return self.state is InteractionState.PENDING

    def to_json(self) -> dict[str, object]:
        """JSON-ready data for machine output (``maka pending --json``): ids, session, Tool, state, message,
        requester, fields (see :func:`surfaces.common.form_input.field_to_json`), times as RFC 3339 UTC
        strings (``expires_at`` ``null`` when unbounded). Never includes answer values."""
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
            "round": {
                "position": self.round_position,
                "size": self.round_size,
                "deadline": _iso(self.round_deadline),
            }
            if self.round_size
            else None,
        }

    @classmethod
    def from_proto(cls, message: interaction_pb2.Interaction) -> InteractionView:
        """Decode ``message``. A form that breaks the contract becomes a field-less stand-in whose message says so."""
        binding = message.binding
        answer = answer_from_proto(message.answer) if message.HasField("answer") else None
        return cls(
            interaction_id=message.interaction_id,
            session_id=binding.session_id,
            turn_id=binding.turn_id,
            tool_use_id=binding.tool_use_id,
            tool_name=binding.tool_name,
            host_epoch=message.host_epoch,
            state=state_of(message.state),
            form=_decode_form(message.form),
            answer=answer,
            close_reason=close_reason_of(message.close_reason),
            created_at=_time(message.created_at, message.HasField("created_at")),
            expires_at=_time(message.expires_at, message.HasField("expires_at")),
            settled_at=_time(message.settled_at, message.HasField("settled_at")),
            proto=message,
            delivery=delivery_of(message.delivery),
            delivery_lost_reason=close_reason_of(message.delivery_lost_reason),
            round_position=message.round.position,
            round_size=message.round.size,
            round_deadline=_time(message.round.deadline, message.round.HasField("deadline")),
        )


@dataclass(frozen=True)
class SurfaceView:
    """One surface attached to the Host (``ListSurfaces``): its token's name (never the token), kind,
    the sessions it watches (``all_sessions`` for every one), when it attached, its Host and replica."""

    principal: str
    kind: str
    session_ids: tuple[str, ...]
    all_sessions: bool
    session_count: int
    attached_at: datetime | None
    host_id: str
    replica_id: str

    def to_json(self) -> dict[str, object]:
        """``{"principal", "kind", "sessions": [..] | "all", "sessionCount", "attachedAt", "host", "replica"}``."""
        return {
            "principal": self.principal,
            "kind": self.kind or "unknown",
            "sessions": "all" if self.all_sessions else list(self.session_ids),
            "sessionCount": self.session_count,
            "attachedAt": _iso(self.attached_at),
            "host": self.host_id,
            "replica": self.replica_id,
        }

    @classmethod
    def from_proto(cls, message: interaction_service_pb2.AttachedSurface) -> SurfaceView:
        return cls(
            principal=message.principal,
            kind=message.kind,
            session_ids=tuple(message.session_ids),
            all_sessions=message.all_sessions,
            session_count=message.session_count,
            attached_at=_time(message.attached_at, message.HasField("attached_at")),
            host_id=message.host_id,
            replica_id=message.replica_id,
        )


@dataclass(frozen=True)
class Snapshot:
    """Every pending Interaction of the attached sessions (replaces what the surface showed)."""

    pending: tuple[InteractionView, ...]
    resume_token: str


@dataclass(frozen=True)
class Opened:
    """A form was opened (or is pending and replayed)."""

    interaction: InteractionView
    resume_token: str


@dataclass(frozen=True)
class Answered:
    """A canonical answer was committed (by this or another surface)."""

    interaction: InteractionView
    resume_token: str


@dataclass(frozen=True)
class Closed:
    """The Interaction was closed without an answer; ``reason`` says why."""

    interaction: InteractionView
    reason: CloseReason
    resume_token: str


@dataclass(frozen=True)
class DeliveryRecorded:
    """A committed answer's delivery became ``delivered`` or ``lost`` (``interaction.delivery``)."""

    interaction: InteractionView
    resume_token: str


@dataclass(frozen=True)
class Disconnected:
    """The stream dropped; the client reconnects after ``retry_in`` seconds and resumes."""

    error: ErrorDetail | None
    retry_in: float
    attempt: int


AttachEvent: TypeAlias = Snapshot | Opened | Answered | Closed | DeliveryRecorded | Disconnected
"""What :meth:`InteractionClient.attach` yields."""


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: ``initial`` seconds, times ``multiplier`` per failed attempt, at most ``maximum``,
    with full jitter (a uniform draw between half the delay and the delay)."""

    initial: float = 0.2
    maximum: float = 5.0
    multiplier: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before reconnect ``attempt`` (1-based)."""
        base = min(self.maximum, self.initial * self.multiplier ** max(0, attempt - 1))
        return random.uniform(base / 2, base)


def surface_token_from_env() -> str | None:
    """The bearer token from ``MAKA_SURFACE_TOKEN``, or ``None`` when unset or empty."""
    return os.environ.get(TOKEN_ENV) or None


def new_submission_id() -> str:
    """A fresh client-chosen submission id (retrying with the same id returns the same outcome)."""
    return uuid.uuid4().hex


def decode_event(response: interaction_service_pb2.AttachResponse) -> AttachEvent | None:
    """One ``AttachResponse`` → a typed event; ``None`` for frames a reader ignores (``answer_outcome``)."""
    frame = response.WhichOneof("frame")
    if frame == "snapshot":
        snapshot = response.snapshot
        return Snapshot(
            pending=tuple(InteractionView.from_proto(i) for i in snapshot.pending),
            resume_token=snapshot.resume_token,
        )
    if frame == "event":
        event = response.event.event
        view = InteractionView.from_proto(event.interaction)
        token = response.event.resume_token
        if event.kind == interaction_pb2.EVENT_KIND_OPENED:
            return Opened(view, token)
        if event.kind == interaction_pb2.EVENT_KIND_ANSWERED:
            return Answered(view, token)
        if event.kind == interaction_pb2.EVENT_KIND_CLOSED:
            return Closed(view, view.close_reason, token)
        if event.kind == interaction_pb2.EVENT_KIND_DELIVERY:
            return DeliveryRecorded(view, token)
        return None
    return None


class InteractionClient:
    """Async client of the Interaction service for surfaces.

    Construct with an open ``grpc.aio.Channel`` (the client does not own it) or use
    :meth:`connect` (the client owns the channel; close with :meth:`close` or ``async with``).
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        token: str | None = None,
        backoff: Backoff | None = None,
        timeout: float = 10.0,
        owns_channel: bool = False,
        host_id: str = "",
        surface_kind: str = "",
    ) -> None:
        self.host_id = host_id
        """The Runtime Host addressed on a tier serving several (empty: the tier's only Host)."""
        self.surface_kind = surface_kind
        """Sent on Attach's subscribe (``"web"``, ``"tui"``, ...) so ``maka status`` can say what is attached."""
        self._channel = channel
        self._stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        self._metadata: tuple[tuple[str, str], ...] = bearer_metadata(token)
        self._backoff = backoff or Backoff()
        self._timeout = timeout
        self._owns_channel = owns_channel
        self.reconnects = 0
        """How many times :meth:`attach` re-opened its stream (for status displays and tests)."""

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        token: str | None = None,
        backoff: Backoff | None = None,
        host_id: str = "",
        surface_kind: str = "",
    ) -> InteractionClient:
        """Open a channel to ``target`` (``host:port``) with :func:`services.core.channels.open_channel`
        (keepalive, TLS from ``MAKA_TLS_*`` when configured, bearer token on every call); call inside the
        running loop. ``token`` defaults to :func:`surface_token_from_env`.
        """
        channel = open_channel(target, token=token if token is not None else surface_token_from_env())
        return cls(channel, backoff=backoff, owns_channel=True, host_id=host_id, surface_kind=surface_kind)

    async def close(self) -> None:
        """Close the channel when this client opened it."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> InteractionClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- unary ----------------------------------------------------------------------------------

    async def answer(
        self,
        interaction_id: str,
        answer: Answer,
        *,
        submission_id: str | None = None,
        session_id: str = "",
    ) -> InteractionView:
        """Commit ``answer`` (``accept`` with values, ``decline`` or ``cancel``) to a pending Interaction.

        Returns the Interaction as it stands after the answer. ``submission_id`` defaults to a fresh
        id; retrying with the same id returns the first outcome. ``session_id`` (optional) must match
        the Interaction's session. Raises :class:`InteractionError`: ``INVALID_ANSWER``
        (INVALID_ARGUMENT, with violations), ``NOT_FOUND``, ``CLOSED`` (FAILED_PRECONDITION),
        ``ALREADY_SETTLED`` (ABORTED), ``UNAVAILABLE``.
        """
        request = interaction_service_pb2.AnswerRequest(
            interaction_id=interaction_id,
            session_id=session_id,
            submission_id=submission_id or new_submission_id(),
            answer=answer_to_proto(answer),
            host_id=self.host_id,
        )
        try:
            response = await self._stub.Answer(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise InteractionError.from_rpc(error) from None
        return InteractionView.from_proto(response.interaction)

    async def list_pending(self, session_ids: Sequence[str] = ()) -> list[InteractionView]:
        """The pending Interactions of ``session_ids`` (empty: every session the caller may see).

        Raises :class:`InteractionError` (``UNAVAILABLE``, ``PERMISSION_DENIED``, ...).
        """
        request = interaction_service_pb2.ListPendingRequest(session_ids=list(session_ids), host_id=self.host_id)
        try:
            response = await self._stub.ListPending(
                request, metadata=self._metadata, timeout=self._timeout, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as error:
            raise InteractionError.from_rpc(error) from None
        return [InteractionView.from_proto(i) for i in response.pending]

    async def list_surfaces(self) -> tuple[list[SurfaceView], int]:
        """The surfaces attached to the Host that watch a session the caller may see, and how many more
        the service left out (its cap). Raises :class:`InteractionError`."""
        request = interaction_service_pb2.ListSurfacesRequest(host_id=self.host_id)
        try:
            response = await self._stub.ListSurfaces(
                request, metadata=self._metadata, timeout=self._timeout, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as error:
            raise InteractionError.from_rpc(error) from None
        return [SurfaceView.from_proto(s) for s in response.surfaces], response.omitted

    async def get(self, interaction_id: str, *, session_id: str = "") -> InteractionView:
        """One Interaction, pending or settled (within retention). Raises :class:`InteractionError` (``NOT_FOUND``)."""
        request = interaction_service_pb2.GetInteractionRequest(
            interaction_id=interaction_id, session_id=session_id, host_id=self.host_id
        )
        try:
            response = await self._stub.GetInteraction(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise InteractionError.from_rpc(error) from None
        return InteractionView.from_proto(response.interaction)

    # --- Attach -----------------------------------------------------------------------------------

    async def attach(
        self, session_ids: Sequence[str] = (), resume_token: str = ""
    ) -> AsyncGenerator[AttachEvent, None]:
        """Yield the attached sessions' projection forever, reconnecting as needed.

        First a :class:`Snapshot` (or, when ``resume_token`` is still valid, the events after it),
        then live :class:`Opened` / :class:`Answered` / :class:`Closed` events. When the stream drops
        (UNAVAILABLE, server shutdown, ...) it yields :class:`Disconnected`, waits the backoff delay
        and re-subscribes with the last token seen. Raises :class:`InteractionError` for errors a
        reconnect cannot fix (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT, NOT_FOUND,
        FAILED_PRECONDITION, UNIMPLEMENTED). Stop by breaking out or cancelling the consumer.
        """
        token = resume_token
        attempt = 0
        first_connection = True
        while True:
            if not first_connection:
                self.reconnects += 1
            first_connection = False
            error: ErrorDetail | None = None
            try:
                # Wait (bounded) for a ready replica instead of failing fast while round_robin's subchannels
                # are in backoff (docs/design.md#grpc-for-a-replicated-tier); none ready → reconnect.
                await asyncio.wait_for(self._channel.channel_ready(), READY_TIMEOUT)
            except TimeoutError:
                error = ErrorDetail(grpc.StatusCode.UNAVAILABLE, "", "no Interaction replica is ready", "", {}, ())
            if error is not None:
                attempt += 1
                delay = self._backoff.delay(attempt)
                yield Disconnected(error=error, retry_in=delay, attempt=attempt)
                await asyncio.sleep(delay)
                continue
            call = self._stub.Attach(metadata=self._metadata)
            try:
                await call.write(
                    interaction_service_pb2.AttachRequest(
                        subscribe=interaction_service_pb2.Subscribe(
                            session_ids=list(session_ids),
                            resume_token=token,
                            host_id=self.host_id,
                            surface_kind=self.surface_kind,
                        )
                    )
                )
                while True:
                    response = await call.read()
                    if not isinstance(response, interaction_service_pb2.AttachResponse):
                        # grpc.aio.EOF: the stream ended. A refusal that raced our first read (e.g.
                        # UNAUTHENTICATED from the auth interceptor) also ends as EOF: read the status.
                        error = await _final_status(call)
                        break
                    attempt = 0
                    event = decode_event(response)
                    if event is None:
                        continue
                    if not isinstance(event, Disconnected) and event.resume_token:
                        token = event.resume_token
                    yield event
            except grpc.aio.AioRpcError as rpc_error:
                error = error_from_rpc(rpc_error)
            except asyncio.InvalidStateError:
                # The server finished the call before our subscribe was written: its status says why.
                error = await _final_status(call)
            finally:
                call.cancel()
            if error is not None and error.code in _FATAL_CODES:
                raise InteractionError(error)
            attempt += 1
            delay = self._backoff.delay(attempt)
            log.info(
                "attach_reconnecting",
                extra={"attempt": attempt, "code": error.code.name if error else "EOF", "delay_s": round(delay, 3)},
            )
            yield Disconnected(error=error, retry_in=delay, attempt=attempt)
            await asyncio.sleep(delay)
