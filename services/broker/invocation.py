"""One logical Tool invocation, its states and the one table of their legal moves; the live invocations.

Rules (docs/design.md#capability-broker, docs/design.md#lifecycle):

- An invocation runs ``RUNNING`` → (``OPENING`` → ``AWAITING`` → ``RUNNING``)* → exactly one terminal
  state: ``SUCCEEDED``, ``FAILED``, ``LOST``, ``STOPPED``; an ``OPENING`` whose form was refused as invalid
  goes back to ``RUNNING``. :data:`MOVES` is that table; any other move raises :class:`IllegalMove`.
- Only the transition methods of :class:`Invocation` change its state (``tests/test_code_shape.py`` checks
  that no other module assigns it).
- :class:`LiveInvocations` indexes the live ones (by id, by pending form), remembers which connection a
  settled one belonged to (to tell a late frame from an unknown one) and keeps the recent ones for activity
  lists (:func:`call_summary`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from google.protobuf import timestamp_pb2

from maka.broker.v1 import broker_pb2
from maka.interaction.v1 import interaction_pb2
from services.broker.call_log import CallLog
from services.broker.model import Registration


class InvocationState(StrEnum):
    """Where one logical Tool invocation is."""

    RUNNING = "running"
    OPENING = "opening"
    """The provider asked for a form; the Interaction service has not confirmed it yet."""
    AWAITING = "awaiting_interaction"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    STOPPED = "stopped"


TERMINAL = frozenset({InvocationState.SUCCEEDED, InvocationState.FAILED, InvocationState.LOST, InvocationState.STOPPED})

MOVES: dict[InvocationState, frozenset[InvocationState]] = {
    InvocationState.RUNNING: frozenset({InvocationState.OPENING}) | TERMINAL,
    InvocationState.OPENING: frozenset({InvocationState.AWAITING, InvocationState.RUNNING}) | TERMINAL,
    InvocationState.AWAITING: frozenset({InvocationState.RUNNING}) | TERMINAL,
    **{state: frozenset[InvocationState]() for state in TERMINAL},
}
"""State → the states it may move to: the invocation's whole state machine."""


class IllegalMove(Exception):
    """A transition :data:`MOVES` does not allow (a broker bug: nothing is changed)."""

    def __init__(self, invocation_id: str, state: InvocationState, to: InvocationState) -> None:
        super().__init__(f"invocation {invocation_id}: {state.value} → {to.value} is no legal move")
        self.state = state
        self.to = to


@dataclass(eq=False)
class Invocation:
    """One logical Tool invocation (possibly several provider legs around nested forms)."""

    invocation_id: str
    session_id: str
    turn_id: str
    tool_use_id: str
    qualified_name: str
    arguments_json: str
    registration: Registration | None
    log: CallLog
    owner: str = ""
    """The principal that started it (only it may reattach)."""
    made_for: interaction_pb2.Person | None = None
    """The person the call is made for, from the caller's authentication (:func:`made_for`); None for machines.
    Every form it opens carries it (``Binding.made_for``)."""
    call_id: str = ""
    _state: InvocationState = field(default=InvocationState.RUNNING, init=False)
    terminal: broker_pb2.CallToolResponse | None = None
    timer: asyncio.TimerHandle | None = None
    timer_generation: int = 0
    run_started: float = 0.0
    """Monotonic time the running execution timer was armed."""
    run_spent: float = 0.0
    """Seconds of provider execution (timer running) of earlier legs: the max-total budget's use."""
    correlation_id: str = ""
    interaction_id: str = ""
    late_form_close: interaction_pb2.CloseReason.ValueType = interaction_pb2.CloseReason.CLOSE_REASON_INVOCATION_SETTLED
    """How to close a form whose open completes after the invocation settled (and why an undelivered
    answer was lost)."""
    undelivered: str = ""
    """The answered form whose InteractionResult went to the provider, receipt not yet confirmed."""
    tasks: set[asyncio.Task[Any]] = field(default_factory=lambda: set[asyncio.Task[Any]]())
    interaction_expires_at: timestamp_pb2.Timestamp | None = None
    """When the pending form's bounded wait ends (for ``status`` events)."""
    watchers: int = 0
    """Caller streams following this invocation now (CallTool, WatchCall)."""
    grace: asyncio.TimerHandle | None = None
    """Armed while nobody is attached: stops the invocation when the reattach grace ends."""
    outcome_delivered: bool = False
    """A caller stream has sent the terminal event (what a drain waits for besides settlement)."""
    interaction_ids: list[str] = field(default_factory=lambda: list[str]())
    """Every form this invocation asked for (activity lists)."""
    started_at: float = field(default_factory=time.time)
    ended_at: float = 0.0

    @property
    def state(self) -> InvocationState:
        return self._state

    @property
    def is_terminal(self) -> bool:
        return self._state in TERMINAL

    @property
    def form_bound(self) -> bool:
        """A form is being opened or is pending (``OPENING`` or ``AWAITING``)."""
        return self._state in (InvocationState.OPENING, InvocationState.AWAITING)

    def move(self, to: InvocationState) -> InvocationState:
        """Move to ``to`` when :data:`MOVES` allows it; returns the state it left. Raises IllegalMove."""
        previous = self._state
        if to not in MOVES[previous]:
            raise IllegalMove(self.invocation_id, previous, to)
        self._state = to
        return previous

    def ask_form(self, correlation_id: str) -> None:
        """``RUNNING`` → ``OPENING``: the provider asked for a form (its correlation id is echoed back)."""
        self.move(InvocationState.OPENING)
        self.correlation_id = correlation_id

    def form_refused(self) -> None:
        """``OPENING`` → ``RUNNING``: the Interaction service refused the form as the provider's to fix."""
        self.move(InvocationState.RUNNING)

    def await_form(self, interaction: interaction_pb2.Interaction) -> None:
        """``OPENING`` → ``AWAITING``: the form ``interaction`` is pending."""
        self.move(InvocationState.AWAITING)
        self.interaction_id = interaction.interaction_id
        self.interaction_expires_at = interaction.expires_at if interaction.HasField("expires_at") else None
        self.interaction_ids.append(interaction.interaction_id)

    def drop_form(self) -> None:
        """The pending form is no longer pending (it settled, or the Host epoch ended); the state stays."""
        self.interaction_id = ""
        self.interaction_expires_at = None

    def resume(self) -> None:
        """``AWAITING`` → ``RUNNING``: the form was answered and the answer goes to the provider."""
        self.move(InvocationState.RUNNING)

    def end_as(self, to: InvocationState) -> InvocationState:
        """Move to terminal ``to``; returns the state it left. Raises IllegalMove (also when already settled)."""
        if to not in TERMINAL:
            raise IllegalMove(self.invocation_id, self._state, to)
        return self.move(to)

    def emit(self, event: broker_pb2.CallToolResponse) -> None:
        """Log a lifecycle event for the caller (never dropped; progress may be). Nothing is logged
        once the invocation settled: its terminal event is the last one."""
        if self.terminal is None:
            self.log.append(event)

    def status(self) -> broker_pb2.CallStatus:
        """The keepalive ``status`` of this invocation now (phase, pending form and its expiry)."""
        status = broker_pb2.CallStatus(
            invocation_id=self.invocation_id, phase=broker_pb2.CALL_PHASE_RUNNING, watchers=self.watchers
        )
        if self._state is InvocationState.AWAITING and self.interaction_id:
            status.phase = broker_pb2.CALL_PHASE_AWAITING_INTERACTION
            status.interaction_id = self.interaction_id
            if self.interaction_expires_at is not None:
                status.interaction_expires_at.CopyFrom(self.interaction_expires_at)
        return status


class LiveInvocations:
    """The live invocations (by id, and by the form each awaits), the settled ones' connections, the recent ones.

    Args:
        recent_limit: settled invocations kept for activity lists.
        settled_memory: how many settled invocation ids are remembered to tell late frames from unknown ones.
    """

    def __init__(self, *, recent_limit: int, settled_memory: int) -> None:
        self._by_id: dict[str, Invocation] = {}
        self._by_form: dict[str, Invocation] = {}
        """interaction id of a pending form → the invocation awaiting it."""
        self._settled: OrderedDict[str, str] = OrderedDict()
        """recently settled invocation id → connection id."""
        self._settled_memory = settled_memory
        self.recent: deque[Invocation] = deque(maxlen=recent_limit)
        self.idle = asyncio.Event()
        """Set whenever no invocation is live (what a drain waits for)."""
        self.idle.set()

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, invocation_id: str) -> Invocation | None:
        return self._by_id.get(invocation_id)

    def all(self) -> list[Invocation]:
        """The live invocations, oldest first."""
        return list(self._by_id.values())

    def named(self, session_id: str, turn_id: str, *, all_sessions: bool, invocation_id: str) -> list[Invocation]:
        """The live invocation ``invocation_id``, or those of a turn, a session or (``all_sessions``) the Host."""
        if invocation_id:
            one = self._by_id.get(invocation_id)
            return [one] if one is not None else []
        return [
            inv
            for inv in self._by_id.values()
            if all_sessions or (inv.session_id == session_id and (not turn_id or inv.turn_id == turn_id))
        ]

    def of(self, registration: Registration) -> list[Invocation]:
        """The live invocations bound to ``registration``, oldest first."""
        return [invocation for invocation in self._by_id.values() if invocation.registration is registration]

    def bind(self, invocation: Invocation, registration: Registration) -> None:
        """``invocation`` is live on ``registration``."""
        invocation.registration = registration
        registration.invocations.add(invocation.invocation_id)
        self._by_id[invocation.invocation_id] = invocation
        self.idle.clear()

    def unbind(self, invocation: Invocation) -> None:
        """Move a settled invocation from the live tables to the recent ones."""
        invocation.ended_at = time.time()
        self.recent.appendleft(invocation)
        self._by_id.pop(invocation.invocation_id, None)
        if not self._by_id:
            self.idle.set()
        registration = invocation.registration
        if registration is not None:
            registration.invocations.discard(invocation.invocation_id)
            self._settled[invocation.invocation_id] = registration.stream.connection_id
            while len(self._settled) > self._settled_memory:
                self._settled.popitem(last=False)

    def settled_on(self, invocation_id: str) -> str | None:
        """The connection id of a recently settled invocation, or None."""
        return self._settled.get(invocation_id)

    def awaiting(self, interaction_id: str) -> Invocation | None:
        """The invocation awaiting the pending form ``interaction_id``."""
        return self._by_form.get(interaction_id)

    def form_pending(self, invocation: Invocation) -> None:
        self._by_form[invocation.interaction_id] = invocation

    def form_done(self, interaction_id: str) -> None:
        self._by_form.pop(interaction_id, None)

    def pending_forms(self) -> list[str]:
        """Canonical ids of the forms live invocations await."""
        return list(self._by_form)

    def summaries(self, visible: Callable[[Invocation], bool], limit: int) -> list[broker_pb2.CallSummary]:
        """Live then recently settled invocations ``visible`` accepts, newest first (:func:`call_summary`)."""
        live = sorted(self._by_id.values(), key=lambda i: i.started_at, reverse=True)
        out: list[broker_pb2.CallSummary] = []
        for invocation in [*live, *self.recent]:
            if len(out) >= limit:
                break
            if visible(invocation):
                out.append(call_summary(invocation))
        return out


def _stamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def call_summary(invocation: Invocation) -> broker_pb2.CallSummary:
    """Status only: ids, the Tool name, the state and the failure code; never arguments or results."""
    summary = broker_pb2.CallSummary(
        invocation_id=invocation.invocation_id,
        session_id=invocation.session_id,
        turn_id=invocation.turn_id,
        tool_name=invocation.qualified_name,
        state=invocation.state.value,
        interaction_ids=invocation.interaction_ids,
        start_time=_stamp(invocation.started_at),
    )
    terminal = invocation.terminal
    if terminal is not None:
        kind = terminal.WhichOneof("event")
        if kind == "failure":
            summary.failure_code = terminal.failure.code
        elif kind == "result":
            summary.is_error = terminal.result.is_error
        summary.end_time.CopyFrom(_stamp(invocation.ended_at))
    return summary
