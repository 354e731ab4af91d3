"""Typed events of one Tool call (docs/clients.md "The event sequence of one call").

A call yields :class:`Accepted`, then any of :class:`Progress`, :class:`AwaitingInteraction`,
:class:`InteractionSettled`, :class:`Status` (keepalive) and :class:`Reattaching` (client-side: the
stream dropped and the client is reattaching), and ends with exactly one :data:`Outcome`:
:class:`Result`, :class:`Failure`, :class:`Lost` or :class:`Stopped`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeAlias

from maka_client._codes import FailureCode, parse_failure_code
from maka_client._errors import MakaError
from maka_client._gen.maka.broker.v1 import broker_pb2
from maka_client._gen.maka.form.v1 import form_pb2
from maka_client._gen.maka.interaction.v1 import interaction_pb2

_FAILURE_CODES = frozenset(broker_pb2.FailureCode.values())


class Phase(StrEnum):
    """Where a live call is (``maka.broker.v1.CallPhase``)."""

    RUNNING = "running"
    AWAITING_INTERACTION = "awaiting_interaction"
    UNSPECIFIED = "unspecified"


class Action(StrEnum):
    """The user's answer to a form (MCP ``ElicitResult.action``)."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


@dataclass(frozen=True)
class Accepted:
    """The broker started (or, for a repeated call id, found) the invocation."""

    invocation_id: str
    provider_id: str
    sequence: int
    host_id: str = ""
    """The Host that owns the call (every reattach goes there)."""
    host_address: str = ""
    """Where that Host is reachable for ``WatchCall``; empty = the target the client used."""


@dataclass(frozen=True)
class Progress:
    """Progress reported by the Tool."""

    progress: float
    total: float | None
    message: str
    sequence: int


@dataclass(frozen=True)
class AwaitingInteraction:
    """A form is pending for the user; answer it in any surface (or with :meth:`SurfaceClient.answer`)."""

    interaction_id: str
    message: str
    field_count: int
    expires_at: datetime | None
    sequence: int


@dataclass(frozen=True)
class InteractionSettled:
    """The form settled: answered (``action``) or closed without an answer (``close_reason``)."""

    interaction_id: str
    action: Action | None
    close_reason: str
    sequence: int


@dataclass(frozen=True)
class Status:
    """Keepalive while the call runs or waits for a form (not logged: repeats the last sequence)."""

    invocation_id: str
    phase: Phase
    interaction_id: str
    interaction_expires_at: datetime | None
    watchers: int
    sequence: int


@dataclass(frozen=True)
class Reattaching:
    """Client-side: the stream dropped (``code``: the status code's name, ``"EOF"`` when it just ended);
    attempt ``attempt`` to reattach follows in ``delay`` s. ``error`` is the decoded status (``None`` for
    ``EOF``)."""

    code: str
    attempt: int
    delay: float
    error: MakaError | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Result:
    """The Tool's final MCP ``CallToolResult`` (``is_error`` when the Tool reported an error)."""

    result: dict[str, Any]
    is_error: bool
    sequence: int

    @property
    def text(self) -> str:
        """The text content blocks joined by newlines (``structuredContent`` as JSON when there are none)."""
        parts = [
            str(block.get("text", ""))
            for block in self.result.get("content", [])
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        if not parts and "structuredContent" in self.result:
            parts.append(json.dumps(self.result["structuredContent"], ensure_ascii=False))
        return "\n".join(parts)


@dataclass(frozen=True)
class Failure:
    """The call failed with a stable code: a :class:`FailureCode` (``UNKNOWN_TOOL``, ...; equal to the
    ``FailureCode`` name without prefix), or a newer server's unknown code as a string."""

    code: FailureCode | str
    message: str
    sequence: int


@dataclass(frozen=True)
class Lost:
    """The provider went away; the outcome is unknown and nothing was replayed."""

    reason: str
    sequence: int


@dataclass(frozen=True)
class Stopped:
    """The call was stopped (Stop, or no caller reattached within the grace); no retry was sent."""

    sequence: int = field(default=0)


Outcome: TypeAlias = Result | Failure | Lost | Stopped
CallEvent: TypeAlias = Accepted | Progress | AwaitingInteraction | InteractionSettled | Status | Reattaching | Outcome
OUTCOMES = (Result, Failure, Lost, Stopped)


def _time(message: Any, name: str) -> datetime | None:
    if not message.HasField(name):
        return None
    stamp = getattr(message, name)
    return datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, tz=UTC)


def _action(value: int) -> Action | None:
    if value == form_pb2.ACTION_UNSPECIFIED:
        return None
    return Action(form_pb2.Action.Name(value).removeprefix("ACTION_").lower())  # type: ignore[arg-type]


def decode(event: broker_pb2.CallToolResponse) -> CallEvent | None:
    """The typed event of one ``CallToolResponse`` (None for an event kind this client does not know)."""
    kind = event.WhichOneof("event")
    seq = event.sequence
    if kind == "accepted":
        accepted = event.accepted
        return Accepted(accepted.invocation_id, accepted.provider_id, seq, accepted.host_id, accepted.host_address)
    if kind == "progress":
        p = event.progress
        return Progress(p.progress, p.total if p.HasField("total") else None, p.message, seq)
    if kind == "awaiting_interaction":
        a = event.awaiting_interaction
        return AwaitingInteraction(a.interaction_id, a.message, a.field_count, _time(a, "expires_at"), seq)
    if kind == "interaction_settled":
        s = event.interaction_settled
        reason = interaction_pb2.CloseReason.Name(s.close_reason).removeprefix("CLOSE_REASON_").lower()
        return InteractionSettled(s.interaction_id, _action(s.action), reason, seq)
    if kind == "status":
        st = event.status
        phase = {
            broker_pb2.CALL_PHASE_RUNNING: Phase.RUNNING,
            broker_pb2.CALL_PHASE_AWAITING_INTERACTION: Phase.AWAITING_INTERACTION,
        }.get(st.phase, Phase.UNSPECIFIED)
        return Status(st.invocation_id, phase, st.interaction_id, _time(st, "interaction_expires_at"), st.watchers, seq)
    if kind == "result":
        try:
            parsed = json.loads(event.result.call_tool_result_json or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return Failure("INVALID_RESULT", "the broker returned a result that is not a JSON object", seq)
        return Result(parsed, event.result.is_error or parsed.get("isError") is True, seq)
    if kind == "failure":
        # a newer server's code this version does not know is kept as its number, never a crash
        name = (
            broker_pb2.FailureCode.Name(event.failure.code)
            if event.failure.code in _FAILURE_CODES
            else str(event.failure.code)
        )
        return Failure(parse_failure_code(name.removeprefix("FAILURE_CODE_")), event.failure.message, seq)
    if kind == "lost":
        return Lost(event.lost.reason, seq)
    if kind == "stopped":
        return Stopped(seq)
    return None
