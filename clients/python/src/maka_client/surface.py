"""The surface's client of the Interaction service: ``pending()``, ``answer()``, ``attach()`` (the live
projection of pending forms, resumed with its token after a drop) and ``list_history()`` (settled forms: who
answered, never a value)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

import grpc
import grpc.aio

from maka_client._channel import TlsOptions, bearer, open_channel, state_dir_address, state_dir_token
from maka_client._codes import ClientErrorReason
from maka_client._errors import ATTACH_FATAL, MakaError
from maka_client._gen.maka.form.v1 import form_pb2
from maka_client._gen.maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from maka_client._resume import resumable
from maka_client.broker import ReattachPolicy
from maka_client.events import Action, Reattaching, _time

log = logging.getLogger("maka_client.surface")

DEFAULT_TARGET = "127.0.0.1:50051"
TARGET_ENV = "MAKA_INTERACTION_TARGET"
TOKEN_ENV = "MAKA_SURFACE_TOKEN"
READY_TIMEOUT = 2.0
"""Seconds an :meth:`SurfaceClient.attach` (re)connect waits for a ready replica before it reattaches later."""

AnswerValue: TypeAlias = str | int | float | bool | Sequence[str]


@dataclass(frozen=True)
class FormField:
    """One field of a form: ``kind`` is ``string``, ``number``, ``integer``, ``boolean``,
    ``single_select`` or ``multi_select``; ``options`` the select values."""

    name: str
    label: str
    description: str
    required: bool
    kind: str
    options: tuple[str, ...]


def _enum_name(wrapper: Any, prefix: str, value: int) -> str:
    name: str = wrapper.Name(value)
    return name.removeprefix(prefix).lower()


@dataclass(frozen=True)
class AnsweredBy:
    """Who committed an answer: the principal's name (a token's name, never the token; an OIDC subject),
    its kind (``token``, ``anonymous``, ``oidc``), the surface kind it answered through, the issuer of a
    person's verified token, and ``via``: the surface token that answered for a signed-in person."""

    principal: str
    principal_kind: str
    surface_kind: str
    issuer: str = ""
    via: str = ""

    @classmethod
    def from_proto(cls, message: interaction_pb2.AnsweredBy) -> AnsweredBy:
        return cls(
            principal=message.principal,
            principal_kind=_enum_name(interaction_pb2.PrincipalKind, "PRINCIPAL_KIND_", message.principal_kind),
            surface_kind=message.surface_kind,
            issuer=message.issuer,
            via=message.via,
        )


@dataclass(frozen=True)
class HistoryEntry:
    """One settled form (``ListHistory``): ids, Tool, provenance, outcome, who answered and when, and whether the
    answer reached the Tool (``delivery``: ``pending``, ``delivered``, ``lost``; empty when not answered). Never
    an answer value."""

    interaction_id: str
    host_id: str
    session_id: str
    turn_id: str
    invocation_id: str
    tool_name: str
    """Qualified ``SERVER:TOOL`` as the model called it."""
    provider: str
    """The provider as the broker registered it (trusted)."""
    claimed_server: str
    """The server the provider claims (display only, untrusted)."""
    state: str
    """``answered`` or ``closed``."""
    action: Action | None
    close_reason: str
    answered_by: AnsweredBy | None
    created_at: datetime | None
    settled_at: datetime | None
    delivery: str
    delivery_lost_reason: str
    delivery_recorded_at: datetime | None

    @classmethod
    def from_proto(cls, message: interaction_service_pb2.HistoryEntry) -> HistoryEntry:
        answered = message.state == interaction_pb2.INTERACTION_STATE_ANSWERED
        lost = message.delivery == interaction_pb2.DELIVERY_STATE_LOST
        requester = message.requester
        return cls(
            interaction_id=message.interaction_id,
            host_id=message.host_id,
            session_id=message.session_id,
            turn_id=message.turn_id,
            invocation_id=message.invocation_id,
            tool_name=message.tool_name,
            provider=requester.provider_display_name or requester.provider_id,
            claimed_server=requester.claimed_server,
            state=_enum_name(interaction_pb2.InteractionState, "INTERACTION_STATE_", message.state),
            action=Action(_enum_name(form_pb2.Action, "ACTION_", message.action)) if answered else None,
            close_reason=_enum_name(interaction_pb2.CloseReason, "CLOSE_REASON_", message.close_reason),
            answered_by=AnsweredBy.from_proto(message.answered_by) if message.HasField("answered_by") else None,
            created_at=_time(message, "created_at"),
            settled_at=_time(message, "settled_at"),
            delivery=_enum_name(interaction_pb2.DeliveryState, "DELIVERY_STATE_", message.delivery) if answered else "",
            delivery_lost_reason=(
                _enum_name(interaction_pb2.CloseReason, "CLOSE_REASON_", message.delivery_lost_reason) if lost else ""
            ),
            delivery_recorded_at=_time(message, "delivery_recorded_at"),
        )


@dataclass(frozen=True)
class HistoryPage:
    """One ``list_history`` page: newest first; ``next_page_token`` (empty: no older entry) asks for the next."""

    entries: tuple[HistoryEntry, ...]
    next_page_token: str


@dataclass(frozen=True)
class Form:
    """One Interaction (pending or settled): its binding, form, state and expiry."""

    interaction_id: str
    session_id: str
    turn_id: str
    invocation_id: str
    tool_name: str
    message: str
    fields: tuple[FormField, ...]
    state: str
    """``pending``, ``answered`` or ``closed``."""
    action: Action | None
    close_reason: str
    expires_at: datetime | None
    proto: interaction_pb2.Interaction = field(default_factory=interaction_pb2.Interaction, repr=False, compare=False)
    """The ``maka.interaction.v1.Interaction`` as received (for surfaces that decode the whole form)."""
    answered_by: AnsweredBy | None = None
    """Once answered: who answered (principal and surface kind)."""

    @classmethod
    def from_proto(cls, message: interaction_pb2.Interaction) -> Form:
        fields = []
        for f in message.form.fields:
            kind = f.WhichOneof("kind") or "string"
            options: tuple[str, ...] = ()
            if kind == "single_select":
                options = tuple(o.value for o in f.single_select.options)
            elif kind == "multi_select":
                options = tuple(o.value for o in f.multi_select.options)
            fields.append(FormField(f.name, f.label, f.description, f.required, kind, options))
        action = None
        if message.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
            action = Action(form_pb2.Action.Name(message.answer.action).removeprefix("ACTION_").lower())
        return cls(
            interaction_id=message.interaction_id,
            session_id=message.binding.session_id,
            turn_id=message.binding.turn_id,
            invocation_id=message.binding.invocation_id,
            tool_name=message.binding.tool_name,
            message=message.form.message,
            fields=tuple(fields),
            state=interaction_pb2.InteractionState.Name(message.state).removeprefix("INTERACTION_STATE_").lower(),
            action=action,
            close_reason=interaction_pb2.CloseReason.Name(message.close_reason).removeprefix("CLOSE_REASON_").lower(),
            expires_at=_time(message, "expires_at"),
            proto=message,
            answered_by=AnsweredBy.from_proto(message.answered_by) if message.HasField("answered_by") else None,
        )


@dataclass(frozen=True)
class FormSnapshot:
    """Every pending form of the attached sessions (replaces what was shown)."""

    pending: tuple[Form, ...]
    resume_token: str


@dataclass(frozen=True)
class FormOpened:
    form: Form
    resume_token: str


@dataclass(frozen=True)
class FormAnswered:
    form: Form
    resume_token: str


@dataclass(frozen=True)
class FormClosed:
    form: Form
    resume_token: str


@dataclass(frozen=True)
class FormDeliveryRecorded:
    """A committed answer's delivery became ``delivered`` or ``lost`` (``form.proto.delivery``)."""

    form: Form
    resume_token: str


@dataclass(frozen=True)
class AttachedSurface:
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

    @classmethod
    def from_proto(cls, message: interaction_service_pb2.AttachedSurface) -> AttachedSurface:
        return cls(
            principal=message.principal,
            kind=message.kind,
            session_ids=tuple(message.session_ids),
            all_sessions=message.all_sessions,
            session_count=message.session_count,
            attached_at=_time(message, "attached_at"),
            host_id=message.host_id,
            replica_id=message.replica_id,
        )


FormEvent: TypeAlias = FormSnapshot | FormOpened | FormAnswered | FormClosed | FormDeliveryRecorded | Reattaching

_ACTIONS = {
    Action.ACCEPT: form_pb2.ACTION_ACCEPT,
    Action.DECLINE: form_pb2.ACTION_DECLINE,
    Action.CANCEL: form_pb2.ACTION_CANCEL,
}


def _value(field: FormField | None, name: str, value: AnswerValue) -> form_pb2.Value:
    kind = field.kind if field is not None else ""
    if isinstance(value, bool):
        return form_pb2.Value(boolean_value=value)
    if isinstance(value, int) and kind != "number":
        return form_pb2.Value(integer_value=value)
    if isinstance(value, int | float):
        return form_pb2.Value(number_value=float(value))
    if isinstance(value, str):
        return form_pb2.Value(string_value=value)
    if all(isinstance(item, str) for item in value):
        return form_pb2.Value(string_list_value=form_pb2.StringList(values=list(value)))
    raise MakaError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"value of {name!r} must be a string, number, boolean or list of strings",
        reason=ClientErrorReason.INVALID_ARGUMENT,
    )


class SurfaceClient:
    """Client of ``maka.interaction.v1.InteractionService`` for surfaces (show and answer forms).

    Args:
        target: ``host:port`` of the Interaction service.
        token: bearer token of the ``surface`` role; None sends none.
        tls: TLS / mutual TLS options; None is plaintext.
        reattach: backoff of :meth:`attach` reconnects (it never gives up).
        surface_kind: what this surface is, as ``maka status`` lists it (``Subscribe.surface_kind``).
        host_id: the Runtime Host addressed on a tier serving several (empty: the tier's only Host).
        channel: an open channel to use instead of opening one to ``target`` (e.g. the runtime's own
            channel with its balancing and retry policy); ``close()`` leaves it open for its owner.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: TlsOptions | None = None,
        reattach: ReattachPolicy | None = None,
        surface_kind: str = "maka-client-py",
        host_id: str = "",
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.target = target
        self.surface_kind = surface_kind
        self.host_id = host_id
        self.reattach = reattach or ReattachPolicy()
        self.metadata = bearer(token)
        self._owns_channel = channel is None
        self._channel = channel if channel is not None else open_channel(target, tls)
        self.stub = interaction_service_pb2_grpc.InteractionServiceStub(self._channel)
        self.reconnects = 0
        """How many times :meth:`attach` re-opened its stream (for status displays and tests)."""

    @classmethod
    def from_env(cls, target: str | None = None, **kwargs: Any) -> SurfaceClient:
        """``target``, else ``$MAKA_INTERACTION_TARGET``, else the Interaction service of the local stack's
        ``endpoints.json`` (in ``$MAKA_STATE_DIR``, default ``./.state``), else ``127.0.0.1:50051``; token
        ``$MAKA_SURFACE_TOKEN`` (else, for the service of ``endpoints.json``, the owner's token it names), TLS from
        ``$MAKA_TLS_*``."""
        local = None if target or os.environ.get(TARGET_ENV) else state_dir_address("interaction")
        kwargs.setdefault("token", os.environ.get(TOKEN_ENV) or (state_dir_token() if local else None))
        kwargs.setdefault("tls", TlsOptions.from_env())
        return cls(target or os.environ.get(TARGET_ENV) or local or DEFAULT_TARGET, **kwargs)

    async def close(self) -> None:
        """Close the channel when this client opened it."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> SurfaceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def pending(self, session_ids: Sequence[str] = (), *, timeout: float = 10.0) -> list[Form]:
        """The pending forms of ``session_ids`` (empty = every session this surface may see)."""
        request = interaction_service_pb2.ListPendingRequest(session_ids=list(session_ids), host_id=self.host_id)
        try:
            response = await self.stub.ListPending(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return [Form.from_proto(i) for i in response.pending]

    async def get(self, interaction_id: str, *, session_id: str = "", timeout: float = 10.0) -> Form:
        """One form, pending or settled (within retention). ``NOT_FOUND`` when there is none."""
        request = interaction_service_pb2.GetInteractionRequest(
            interaction_id=interaction_id, session_id=session_id, host_id=self.host_id
        )
        try:
            response = await self.stub.GetInteraction(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return Form.from_proto(response.interaction)

    async def list_surfaces(self, *, timeout: float = 10.0) -> tuple[list[AttachedSurface], int]:
        """The surfaces attached to the Host that watch a session this surface may see, and how many
        more the service left out (its cap)."""
        request = interaction_service_pb2.ListSurfacesRequest(host_id=self.host_id)
        try:
            response = await self.stub.ListSurfaces(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return [AttachedSurface.from_proto(s) for s in response.surfaces], response.omitted

    async def list_history(
        self,
        session_ids: Sequence[str] = (),
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float = 10.0,
    ) -> HistoryPage:
        """Settled forms of ``session_ids`` (empty = every session this surface may see), newest first: who
        answered, the action, the close reason and the delivery, never a value. ``page_size`` 0 lets the
        service choose (50; at most 500); pass the page's ``next_page_token`` for older entries."""
        request = interaction_service_pb2.ListHistoryRequest(
            session_ids=list(session_ids), host_id=self.host_id, page_size=page_size, page_token=page_token
        )
        try:
            response = await self.stub.ListHistory(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return HistoryPage(tuple(HistoryEntry.from_proto(e) for e in response.entries), response.next_page_token)

    async def answer(
        self,
        interaction_id: str,
        action: Action | str,
        values: Mapping[str, AnswerValue] | None = None,
        *,
        session_id: str = "",
        submission_id: str | None = None,
        timeout: float = 10.0,
    ) -> Form:
        """Commit ``accept`` (with ``values``, typed by the form's field kinds), ``decline`` or ``cancel``.

        Idempotent per ``submission_id`` (a fresh one by default). Raises :class:`MakaError` with the
        stable reason (``INVALID_ANSWER`` with violations, ``ALREADY_SETTLED``, ``NOT_FOUND``, ...).
        """
        chosen = Action(action)
        answer = form_pb2.Answer(action=_ACTIONS[chosen])
        if values:
            form = await self.get(interaction_id, session_id=session_id, timeout=timeout)
            kinds = {f.name: f for f in form.fields}
            session_id = session_id or form.session_id
            for name, value in values.items():
                answer.values[name].CopyFrom(_value(kinds.get(name), name, value))
        return await self.send_answer(
            interaction_id, answer, session_id=session_id, submission_id=submission_id, timeout=timeout
        )

    async def send_answer(
        self,
        interaction_id: str,
        answer: form_pb2.Answer,
        *,
        session_id: str = "",
        submission_id: str | None = None,
        timeout: float = 10.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> Form:
        """Commit an answer already encoded as ``maka.form.v1.Answer`` (what :meth:`answer` sends).

        Idempotent per ``submission_id`` (a fresh one by default); ``session_id`` (optional) must match
        the Interaction's session; ``metadata`` is added to this call's (e.g. ``x-maka-acts-for``). Raises
        :class:`MakaError` as :meth:`answer` does.
        """
        request = interaction_service_pb2.AnswerRequest(
            interaction_id=interaction_id,
            session_id=session_id,
            submission_id=submission_id or new_submission_id(),
            answer=answer,
            host_id=self.host_id,
            surface_kind=self.surface_kind,
        )
        try:
            response = await self.stub.Answer(request, metadata=(*self.metadata, *metadata), timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return Form.from_proto(response.interaction)

    async def attach(self, session_ids: Sequence[str] = (), resume_token: str = "") -> AsyncGenerator[FormEvent, None]:
        """The live projection of ``session_ids``: a :class:`FormSnapshot` (or the events after a
        still-valid ``resume_token``), then :class:`FormOpened` / :class:`FormAnswered` / :class:`FormClosed`
        / :class:`FormDeliveryRecorded`. Before each (re)connect it waits up to :data:`READY_TIMEOUT` s for
        a ready replica. A dropped stream yields :class:`Reattaching` and resumes with the last token
        (RFC criterion 9: a surface that reconnects in the same Host epoch gets the pending form back);
        errors a reconnect cannot fix (``UNAUTHENTICATED``, ``PERMISSION_DENIED``, ``INVALID_ARGUMENT``,
        ``NOT_FOUND``, ``FAILED_PRECONDITION``, ``UNIMPLEMENTED``) raise :class:`MakaError`. Runs until
        the consumer stops."""

        def open_stream(token: str) -> AsyncIterator[interaction_service_pb2.AttachResponse]:
            subscribe = interaction_service_pb2.Subscribe(
                session_ids=list(session_ids), resume_token=token, host_id=self.host_id, surface_kind=self.surface_kind
            )
            return _attach_once(self.stub.Attach(metadata=self.metadata), subscribe)

        stream = resumable(
            open_stream,
            token_of=_token_of,
            backoff=self.reattach.backoff,
            retryable=lambda failure: failure is None or failure.code() not in ATTACH_FATAL,
            resume_token=resume_token,
            ready=self._ready,
        )
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, Reattaching):
                    self.reconnects += 1
                    log.info(
                        "attach_reconnecting",
                        extra={
                            "attempt": item.attempt,
                            "code": item.code,
                            # SUBSCRIBER_OVERFLOW (fell behind: resume with the token) or SHUTTING_DOWN
                            # (the replica drains: another one serves the resume); "" for a plain drop
                            "reason": str(item.error.reason) if item.error is not None else "",
                            "delay_s": round(item.delay, 3),
                        },
                    )
                    yield item
                    continue
                event = decode_attach(item)
                if event is not None:
                    yield event

    async def _ready(self) -> bool:
        # Wait (bounded) for a ready replica instead of failing fast while round_robin's subchannels are in
        # backoff (docs/design.md#grpc-for-a-replicated-tier); none ready → reconnect.
        try:
            await asyncio.wait_for(self._channel.channel_ready(), READY_TIMEOUT)
        except TimeoutError:
            return False
        return True


def new_submission_id() -> str:
    """A fresh client-chosen submission id (retrying with the same id returns the same outcome)."""
    return f"sub-{uuid.uuid4().hex}"


def _token_of(response: interaction_service_pb2.AttachResponse) -> str:
    frame = response.WhichOneof("frame")
    if frame == "snapshot":
        return response.snapshot.resume_token
    if frame == "event":
        return response.event.resume_token
    return ""


async def _attach_once(
    call: grpc.aio.StreamStreamCall[interaction_service_pb2.AttachRequest, interaction_service_pb2.AttachResponse],
    subscribe: interaction_service_pb2.Subscribe,
) -> AsyncGenerator[interaction_service_pb2.AttachResponse, None]:
    """One ``Attach`` stream: subscribe, yield its frames; raise its final status unless it ended OK."""
    try:
        try:
            await call.write(interaction_service_pb2.AttachRequest(subscribe=subscribe))
            while True:
                response = await call.read()
                if not isinstance(response, interaction_service_pb2.AttachResponse):
                    break  # grpc.aio.EOF; a refusal that raced the first read also ends here: read the status
                yield response
        except asyncio.InvalidStateError:
            pass  # the server finished the call before the subscribe was written: its status says why
        code = await call.code()
        if code != grpc.StatusCode.OK:
            raise grpc.aio.AioRpcError(
                code, grpc.aio.Metadata(), await call.trailing_metadata(), details=await call.details()
            )
    finally:
        call.cancel()


def decode_attach(
    response: interaction_service_pb2.AttachResponse,
) -> FormSnapshot | FormOpened | FormAnswered | FormClosed | FormDeliveryRecorded | None:
    """The typed event of one ``AttachResponse`` (None for frames a reader ignores, e.g. ``answer_outcome``)."""
    frame = response.WhichOneof("frame")
    if frame == "snapshot":
        pending = tuple(Form.from_proto(i) for i in response.snapshot.pending)
        return FormSnapshot(pending, response.snapshot.resume_token)
    if frame != "event":
        return None
    kind = response.event.event.kind
    form = Form.from_proto(response.event.event.interaction)
    token = response.event.resume_token
    if kind == interaction_pb2.EVENT_KIND_OPENED:
        return FormOpened(form, token)
    if kind == interaction_pb2.EVENT_KIND_ANSWERED:
        return FormAnswered(form, token)
    if kind == interaction_pb2.EVENT_KIND_CLOSED:
        return FormClosed(form, token)
    if kind == interaction_pb2.EVENT_KIND_DELIVERY:
        return FormDeliveryRecorded(form, token)
    return None
