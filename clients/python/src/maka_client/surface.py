"""The surface's client of the Interaction service: ``pending()``, ``answer()`` and ``attach()``
(the live projection of pending forms, resumed with its token after a drop)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import grpc
import grpc.aio

from maka_client._channel import TlsOptions, bearer, open_channel
from maka_client._codes import ClientErrorReason
from maka_client._errors import RETRYABLE, MakaError
from maka_client._gen.maka.form.v1 import form_pb2
from maka_client._gen.maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from maka_client.broker import ReattachPolicy
from maka_client.events import Action, Reattaching, _time

DEFAULT_TARGET = "127.0.0.1:50051"
TARGET_ENV = "MAKA_INTERACTION_TARGET"
TOKEN_ENV = "MAKA_SURFACE_TOKEN"

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


FormEvent: TypeAlias = FormSnapshot | FormOpened | FormAnswered | FormClosed | Reattaching

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
        reattach: backoff of :meth:`attach` reconnects.
        surface_kind: what this surface is, as ``maka status`` lists it (``Subscribe.surface_kind``).
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: TlsOptions | None = None,
        reattach: ReattachPolicy | None = None,
        surface_kind: str = "maka-client-py",
    ) -> None:
        self.target = target
        self.surface_kind = surface_kind
        self.reattach = reattach or ReattachPolicy()
        self.metadata = bearer(token)
        self._channel = open_channel(target, tls)
        self.stub = interaction_service_pb2_grpc.InteractionServiceStub(self._channel)

    @classmethod
    def from_env(cls, target: str | None = None, **kwargs: Any) -> SurfaceClient:
        """``target`` or ``$MAKA_INTERACTION_TARGET``, token ``$MAKA_SURFACE_TOKEN``, TLS from ``$MAKA_TLS_*``."""
        kwargs.setdefault("token", os.environ.get(TOKEN_ENV) or None)
        kwargs.setdefault("tls", TlsOptions.from_env())
        return cls(target or os.environ.get(TARGET_ENV) or DEFAULT_TARGET, **kwargs)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> SurfaceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def pending(self, session_ids: Sequence[str] = (), *, timeout: float = 10.0) -> list[Form]:
        """The pending forms of ``session_ids`` (empty = every session this surface may see)."""
        try:
            response = await self.stub.ListPending(
                interaction_service_pb2.ListPendingRequest(session_ids=list(session_ids)),
                metadata=self.metadata,
                timeout=timeout,
            )
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return [Form.from_proto(i) for i in response.pending]

    async def get(self, interaction_id: str, *, session_id: str = "", timeout: float = 10.0) -> Form:
        """One form, pending or settled."""
        try:
            response = await self.stub.GetInteraction(
                interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id, session_id=session_id),
                metadata=self.metadata,
                timeout=timeout,
            )
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return Form.from_proto(response.interaction)

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
        try:
            response = await self.stub.Answer(
                interaction_service_pb2.AnswerRequest(
                    interaction_id=interaction_id,
                    session_id=session_id,
                    submission_id=submission_id or f"sub-{uuid.uuid4().hex}",
                    answer=answer,
                ),
                metadata=self.metadata,
                timeout=timeout,
            )
        except grpc.aio.AioRpcError as error:
            raise MakaError.from_rpc(error) from None
        return Form.from_proto(response.interaction)

    async def attach(self, session_ids: Sequence[str] = (), resume_token: str = "") -> AsyncGenerator[FormEvent, None]:
        """The live projection of ``session_ids``: a :class:`FormSnapshot` (or the events after a
        still-valid ``resume_token``), then :class:`FormOpened` / :class:`FormAnswered` / :class:`FormClosed`.
        A dropped stream yields :class:`Reattaching` and resumes with the last token; errors a
        reconnect cannot fix raise :class:`MakaError`. Runs until the consumer stops."""
        token = resume_token
        attempt = 0
        while True:
            call = self.stub.Attach(metadata=self.metadata)
            code = "EOF"
            try:
                await call.write(
                    interaction_service_pb2.AttachRequest(
                        subscribe=interaction_service_pb2.Subscribe(
                            session_ids=list(session_ids), resume_token=token, surface_kind=self.surface_kind
                        )
                    )
                )
                while True:
                    response = await call.read()
                    if not isinstance(response, interaction_service_pb2.AttachResponse):
                        break
                    attempt = 0
                    event = _decode_attach(response)
                    if event is None:
                        continue
                    token = event.resume_token or token
                    yield event
            except grpc.aio.AioRpcError as error:
                if error.code() not in RETRYABLE:
                    raise MakaError.from_rpc(error) from None
                code = error.code().name
            finally:
                call.cancel()
            attempt += 1
            delay = self.reattach.delay(attempt)
            yield Reattaching(code, attempt, delay)
            await asyncio.sleep(delay)


def _decode_attach(
    response: interaction_service_pb2.AttachResponse,
) -> FormSnapshot | FormOpened | FormAnswered | FormClosed | None:
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
    return None
