"""What is read of a Host's forms: one form, pending lists, history pages, Attach and the settled feed.

Rules: a caller sees a form only through the session rule and, for a form made for a person, that person or
an approver (docs/security.md "Who sees a form"; anything else reads as unknown); a resume token replays only
when it still covers every session without loss; a broker is pushed a settlement only once it is durable as
read (docs/design.md#durable-fences). See docs/design.md#fan-out and docs/design.md#history.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2
from services.core.auth import ANONYMOUS, Principal
from services.core.backoff import Backoff
from services.core.form import (
    FormErrorReason,
    Violation,
)
from services.interaction import errors
from services.interaction.fanout import FanOut
from services.interaction.history import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, HistoryCursor
from services.interaction.keys import ALL_SESSIONS
from services.interaction.policy import Policies, PolicyFile, visible
from services.interaction.settings import Settings
from services.interaction.store import InteractionStore, Record

log = logging.getLogger("maka.interaction.authority")
"""The authority's one logger (its parts log under the same name)."""

DURABLE_READ_BACKOFF = Backoff(initial=0.05, maximum=2.0)
"""Waits between durable reads of a settlement while Redis or its replicas catch up."""

_HISTORY_SCAN_BATCH = 200
_HISTORY_SCAN_ROUNDS = 10
"""One ``ListHistory`` reads at most this many batches of entries (then returns a shorter page and its token)."""


@dataclass(frozen=True, slots=True)
class ResumeToken:
    """Where a surface stands in each subscribed session's event Stream.

    Encoded as URL-safe base64 of ``{"v":1,"t":<issued ms>,"p":{session: stream id}}``; opaque to clients.
    """

    positions: dict[str, str]
    issued_ms: int

    def encode(self) -> str:
        """The opaque token string."""
        raw = json.dumps({"v": 1, "t": self.issued_ms, "p": self.positions}, separators=(",", ":"), sort_keys=True)
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(token: str) -> ResumeToken | None:
        """Parse a token; None when it is malformed (a fresh snapshot follows, never an error)."""
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            positions = raw["p"]
            if raw.get("v") != 1 or not isinstance(positions, dict):
                return None
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in positions.items()):
                return None
            return ResumeToken(positions=dict(positions), issued_ms=int(raw["t"]))
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
            return None


@dataclass(frozen=True, slots=True)
class AttachStart:
    """How an Attach stream begins: a snapshot (when ``snapshot`` is set) and the positions to follow from."""

    snapshot: list[interaction_pb2.Interaction] | None
    positions: dict[str, str]


def _same_settlement(stored: interaction_pb2.Interaction, read: interaction_pb2.Interaction) -> bool:
    """Whether ``stored`` is the settlement ``read`` describes (its delivery fields may have moved on since)."""
    return (
        stored.state == read.state
        and stored.settled_at == read.settled_at
        and stored.close_reason == read.close_reason
        and stored.answer == read.answer
    )


def _stream_id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


def may_see(principal: Principal, interaction: interaction_pb2.Interaction, policies: Policies) -> bool:
    """The session rule, and for a form made for a person: that person or an approver ``policies`` name
    (docs/security.md "Who sees a form"). Anything else is indistinguishable from an unknown id."""
    binding = interaction.binding
    return principal.may_see(binding.session_id) and visible(principal, binding.made_for, binding.tool_name, policies)


class Reads:
    """What surfaces and brokers read of a Host's forms: one form, the pending list, history, an Attach's
    snapshot and events, and the settled feed a broker follows."""

    def __init__(
        self,
        store: InteractionStore,
        settings: Settings,
        *,
        now_ms: Callable[[], int],
        policies: PolicyFile,
        fanout: FanOut,
    ) -> None:
        self.store = store
        self.settings = settings
        self.policies = policies
        self.fanout = fanout
        self._now_ms = now_ms

    async def visible_record(
        self, principal: Principal, interaction_id: str, session_id: str | None, *, known: Record | None = None
    ) -> Record:
        """The record of ``interaction_id`` when ``principal`` may see it (and it is of ``session_id`` when
        given); ``known``: the record as this replica stored it, read instead of Redis. Raises
        InteractionNotFound otherwise."""
        record = known
        if record is None:
            record = await self.store.get(interaction_id) if interaction_id else None
        if (
            record is None
            or not may_see(principal, record.interaction, self.policies.current())
            or (session_id is not None and session_id != record.session_id)
        ):
            raise errors.InteractionNotFound(interaction_id)
        return record

    # --- Reads (surfaces) -----------------------------------------------------------------------

    def _sessions(self, principal: Principal, session_ids: Sequence[str]) -> list[str]:
        for sid in session_ids:
            if not sid or sid == ALL_SESSIONS:
                raise errors.SessionNotFound(sid)
            if not principal.may_see(sid):
                raise errors.SessionForbidden(sid)
        return list(dict.fromkeys(session_ids))

    def _scopes(self, principal: Principal, session_ids: Sequence[str]) -> list[str]:
        """Named sessions, or for none: every session the principal may see (``*`` for all)."""
        if session_ids:
            return self._sessions(principal, session_ids)
        if principal.all_sessions:
            return [ALL_SESSIONS]
        if not principal.sessions:
            raise errors.InvalidRequest(
                "the caller may see no session",
                [Violation("/session_ids", FormErrorReason.SCHEMA_INVALID_VALUE, "no visible session")],
            )
        return sorted(principal.sessions)

    async def get(
        self, principal: Principal, interaction_id: str, session_id: str | None = None
    ) -> interaction_pb2.Interaction:
        """One Interaction, pending or settled within retention. Raises InteractionNotFound."""
        return (await self.visible_record(principal, interaction_id, session_id or None)).interaction

    async def list_pending(
        self, principal: Principal, session_ids: Sequence[str] = ()
    ) -> list[interaction_pb2.Interaction]:
        """Pending Interactions of ``session_ids`` (empty: every session the principal may see), oldest first.

        Raises SessionForbidden (PERMISSION_DENIED) for a named session the principal may not see.
        """
        if session_ids:
            pending, _ = await self.store.session_snapshot(self._sessions(principal, session_ids))
            ids = [i for sid in pending for i in pending[sid]]
        else:
            ids = await self.store.pending_ids()
        out: list[interaction_pb2.Interaction] = []
        policies = self.policies.current()
        for interaction_id in ids:
            record = await self.store.get(interaction_id)
            if record is not None and record.state == "pending" and may_see(principal, record.interaction, policies):
                out.append(record.interaction)
        out.sort(key=lambda i: (i.created_at.ToMilliseconds(), i.interaction_id))
        return out

    async def list_history(
        self, principal: Principal, session_ids: Sequence[str] = (), page_size: int = 0, page_token: str = ""
    ) -> tuple[list[interaction_service_pb2.HistoryEntry], str]:
        """Settled forms of ``session_ids`` (empty: every session the principal may see), newest first:
        ``(entries, next page token)`` (docs/design.md#history). ``page_size`` 0 means
        :data:`~services.interaction.history.DEFAULT_PAGE_SIZE`, capped at ``MAX_PAGE_SIZE``; the token is empty
        when no older entry is left. Entries of sessions the principal may not see are skipped, never counted.

        Raises SessionForbidden for a named session the principal may not see, InvalidRequest for a malformed
        page token or a caller that may see no session.
        """
        wanted = set(self._scopes(principal, session_ids))
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        cursor: tuple[int, str] | None = None
        if page_token:
            parsed = HistoryCursor.decode(page_token)
            if parsed is None:
                raise errors.InvalidRequest(
                    "the page token is malformed",
                    [Violation("/page_token", FormErrorReason.SCHEMA_INVALID_VALUE, "not a ListHistory page token")],
                )
            cursor = (parsed.score, parsed.interaction_id)
        out: list[interaction_service_pb2.HistoryEntry] = []
        policies = self.policies.current()
        for _round in range(_HISTORY_SCAN_ROUNDS):
            page = await self.store.history_page(cursor, max(size, _HISTORY_SCAN_BATCH))
            for score, interaction_id, entry in page:
                cursor = (score, interaction_id)
                if (ALL_SESSIONS in wanted or entry.session_id in wanted) and visible(
                    principal, entry.made_for, entry.tool_name, policies
                ):
                    out.append(entry)
                    if len(out) == size:
                        return out, HistoryCursor(*cursor).encode()
            if len(page) < max(size, _HISTORY_SCAN_BATCH):
                return out, ""
        # Many entries of other sessions in a row: hand back what was found and where the scan stopped.
        return out, HistoryCursor(*cursor).encode() if cursor is not None else ""

    # --- Attach (surfaces) ----------------------------------------------------------------------

    async def attach_start(self, principal: Principal, session_ids: Sequence[str], token: str) -> AttachStart:
        """Begin an Attach: replay from ``token`` when it still covers every session without loss,
        otherwise a fresh snapshot of pending forms plus the Stream positions to follow from.

        Empty ``session_ids`` means every session the principal may see (the Host-wide Stream when it
        sees all). Raises SessionForbidden (PERMISSION_DENIED) for a session the principal may not see.
        """
        sessions = self._scopes(principal, session_ids)
        parsed = ResumeToken.decode(token) if token else None
        if parsed is not None and await self._token_valid(parsed, sessions):
            return AttachStart(snapshot=None, positions={sid: parsed.positions[sid] for sid in sessions})
        pending, positions = await self.store.session_snapshot(sessions)
        snapshot: list[interaction_pb2.Interaction] = []
        policies = self.policies.current()
        for sid in sessions:
            for interaction_id in pending[sid]:
                record = await self.store.get(interaction_id)
                if (
                    record is not None
                    and record.state == "pending"
                    and may_see(principal, record.interaction, policies)
                ):
                    snapshot.append(record.interaction)
        return AttachStart(snapshot=snapshot, positions=positions)

    async def _token_valid(self, token: ResumeToken, sessions: Sequence[str]) -> bool:
        if set(token.positions) != set(sessions):
            return False
        if self._now_ms() - token.issued_ms > self.settings.retention_seconds * 1000:
            return False
        for sid in sessions:
            try:
                position = _stream_id(token.positions[sid])
            except ValueError:
                return False
            info = await self.store.stream_info(sid)
            if not info.exists:
                if position != (0, 0):
                    return False
                continue
            trimmed = info.entries_added > info.length
            if position < _stream_id(info.first_id) and (position != (0, 0) or trimmed):
                return False
        return True

    def token(self, positions: dict[str, str]) -> str:
        """The resume token for ``positions`` (issued now)."""
        return ResumeToken(positions=dict(positions), issued_ms=self._now_ms()).encode()

    async def follow_events(
        self, positions: dict[str, str], principal: Principal = ANONYMOUS
    ) -> AsyncIterator[tuple[interaction_pb2.InteractionEvent, str]]:
        """Yield ``(event, resume token)`` for every change after ``positions`` that ``principal`` may see,
        through the replica's fan-out (docs/design.md#fan-out): events of a form made for a person reach only
        that person and its approvers (filtered per subscriber; the policies in force when the event arrives).
        Redis outages are waited out from the last position.

        Raises :class:`~services.interaction.fanout.SubscriberOverflow` when the consumer fell too far
        behind: the caller ends its stream and the client resumes from its last token, losing nothing.
        """
        scopes = {self.store.keys.events(sid): sid for sid in positions}
        current = dict(positions)
        subscription = self.fanout.subscribe(
            {key: positions[sid] for key, sid in scopes.items()}, self.store.event_entry
        )
        try:
            async for key, entry_id, event in subscription:
                current[scopes[key]] = entry_id
                person = event.interaction.binding.made_for.principal
                if person and not may_see(principal, event.interaction, self.policies.current()):
                    continue  # the next visible event's token covers this position
                yield event, self.token(current)
        finally:
            subscription.close()

    # --- HostLink settled feed (broker) ---------------------------------------------------------

    async def settled_position(self) -> str:
        """The Host-wide settled Stream position to follow from (take it before checking watched ids)."""
        return await self.store.settled_position()

    async def settled_of(self, interaction_ids: Sequence[str]) -> list[interaction_pb2.Interaction]:
        """The records among ``interaction_ids`` that are already settled (reported on HostLink hello)."""
        out: list[interaction_pb2.Interaction] = []
        for interaction_id in dict.fromkeys(interaction_ids):
            # durable as read (docs/design.md#durable-fences); a replica that lags fails the hello, which retries
            try:
                record = await self.store.durable_record(interaction_id) if interaction_id else None
            except errors.AnswerUnsealable:
                continue  # logged answer_unsealable: never pushed without its answer, never fails the hello
            if record is not None and record.state != "pending":
                out.append(record.interaction)
        return out

    async def _durable_record(self, interaction_id: str) -> Record | None:
        """The record once it is on the replicas the fence requires, waiting out replicas that lag or are
        down (docs/design.md#durable-fences): a broker never acts on a settlement a failover can roll back."""
        retry = DURABLE_READ_BACKOFF.attempts()
        while True:
            try:
                return await self.store.durable_record(interaction_id)
            except errors.StoreUnavailable:  # NotReplicated included
                await retry.sleep()  # back off while Redis or its replicas catch up

    async def _still_settled(self, interaction: interaction_pb2.Interaction) -> bool:
        """Whether a settlement read from the settled Stream is durable as read; False when a failover
        rolled it back (the form is pending again, or another settlement replaced it)."""
        if not self.store.fenced:
            return True
        try:
            record = await self._durable_record(interaction.interaction_id)
        except errors.AnswerUnsealable:
            return False  # logged answer_unsealable (a replica with another key): not pushed
        same = record is not None and _same_settlement(record.interaction, interaction)
        if not same:
            log.warning("settlement_rolled_back", extra={"interaction_id": interaction.interaction_id})
        return same

    async def follow_settled(self, epoch: int, after: str) -> AsyncIterator[interaction_pb2.Interaction]:
        """Yield every Interaction of ``epoch`` settled after Stream position ``after``, forever.

        Settlements by any replica (answers, closes, the reaper) arrive here through the replica's
        fan-out; Redis outages are waited out from the last position. With a fence, each is yielded only
        once it is on the required replicas and still as read (docs/design.md#durable-fences). Raises
        :class:`~services.interaction.fanout.SubscriberOverflow` like :meth:`follow_events`.
        """
        subscription = self.fanout.subscribe({self.store.keys.settled(): after}, self.store.settled_entry)
        try:
            async for _key, _entry_id, (record_epoch, interaction) in subscription:
                if record_epoch == epoch and await self._still_settled(interaction):
                    yield interaction
        finally:
            subscription.close()
