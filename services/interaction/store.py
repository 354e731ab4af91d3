"""Redis persistence of Interactions: one Lua script per transition (docs/design.md#lua-scripts).

:class:`InteractionStore` runs every command of one Host (the event Streams are followed by the
replica-wide :mod:`services.interaction.fanout`). It builds keys through
:mod:`services.interaction.keys`, runs the scripts in ``scripts/*.lua`` (``register_script``:
EVALSHA, reloaded after a Redis restart), and turns connection failures into
:class:`~services.interaction.errors.StoreUnavailable` (UNAVAILABLE / STORE_UNAVAILABLE). It never
logs payloads: records hold form copy as opaque protobuf bytes, and answers sealed by its
:class:`~services.interaction.sealing.AnswerSealer` (every Interaction written is sealed, every one read
back unsealed here, before anything else sees it: docs/security.md "Answer values at rest"). Its reads
that run no script are :class:`~services.interaction.store_reads.StoreReads`; every call goes through
:func:`~services.interaction.store_calls.store_call`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

import redis.asyncio
import redis.commands.core
import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from maka.interaction.v1 import interaction_pb2
from services.interaction.errors import AnswerUnsealable, StoreUnavailable
from services.interaction.history import history_entry
from services.interaction.keys import Keys
from services.interaction.sealing import AnswerSealer
from services.interaction.store_calls import as_text as _s
from services.interaction.store_calls import store_call as _store_call
from services.interaction.store_reads import StoreReads

log = logging.getLogger("maka.interaction.store")

DEFAULT_COMMAND_SLOTS = 24
"""Commands in flight of a store built without a shared limiter (below redis-py's pool of the settings)."""


def script_text(name: str) -> str:
    """The Lua source of ``scripts/<name>`` (what ``register_script`` sends; its SHA1 names it in Redis)."""
    return resources.files("services.interaction").joinpath("scripts", name).read_text(encoding="utf-8")


class Mode(StrEnum):
    """Which transition ``settle.lua`` performs (and which precondition it checks)."""

    ANSWER = "answer"
    """A user answer: refused after the wait or lease ran out."""
    CLOSE = "close"
    """The broker closes with a reason; its link epoch must be current."""
    LEASE = "lease"
    """The reaper: only when the lease deadline has passed."""
    TIMEOUT = "timeout"
    """The reaper: only when the bounded wait has passed."""
    RESTART = "restart"
    """A new Host epoch began: only for records of older epochs."""


class DeliveryMode(StrEnum):
    """Which delivery report ``deliver.lua`` records (and which precondition it checks)."""

    BROKER = "broker"
    """The broker of the current epoch reports delivered or lost."""
    RESTART = "restart"
    """A new Host epoch began: an older epoch's undelivered answer is lost (``host_restarted``)."""


@dataclass(frozen=True, slots=True)
class Record:
    """A stored Interaction plus the state fields the scripts compare."""

    interaction: interaction_pb2.Interaction
    state: str
    """``pending`` | ``answered`` | ``closed``."""
    session_id: str
    epoch: int
    invocation_id: str
    submission_id: str


class ScriptCode(StrEnum):
    """The first element of every Lua script's reply (services/interaction/scripts/*.lua)."""

    OK = "OK"
    SAME = "SAME"
    ANSWERED = "ANSWERED"
    CLOSED = "CLOSED"
    NOT_FOUND = "NOT_FOUND"
    STALE = "STALE"
    STALE_EPOCH = "STALE_EPOCH"
    EXPIRED = "EXPIRED"
    NOT_DUE = "NOT_DUE"
    DONE = "DONE"
    NOT_ANSWERED = "NOT_ANSWERED"
    ALREADY_PENDING = "ALREADY_PENDING"
    COLLISION = "COLLISION"


@dataclass(frozen=True, slots=True)
class SettleResult:
    """What ``settle.lua`` answered: ``code`` plus the stored record bytes or a reason when relevant."""

    code: ScriptCode
    """OK | SAME | ANSWERED | CLOSED | NOT_FOUND | STALE | STALE_EPOCH | EXPIRED | NOT_DUE."""
    reason: str = ""
    """CLOSED: the stored close reason; EXPIRED: which deadline passed; STALE_EPOCH: current epoch."""
    stored: interaction_pb2.Interaction | None = None
    """SAME / ANSWERED / CLOSED: the record as stored."""


@dataclass(frozen=True, slots=True)
class Fence:
    """The durability fence after an epoch increment or a committed answer
    (docs/design.md#durable-fences): ``WAIT replicas timeout_ms`` on the connection that wrote; 0 replicas =
    no fence."""

    replicas: int = 0
    timeout_ms: int = 2000


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """How long and how many history entries a Host keeps (``history_retention_seconds``, ``history_max_entries``;
    docs/design.md#history): every settlement trims entries past either bound."""

    retention_ms: int = 7 * 86_400_000
    max_entries: int = 10_000


class NotReplicated(StoreUnavailable):
    """UNAVAILABLE / STORE_UNAVAILABLE: the write happened but fewer replicas than required acknowledged it
    in time; retrying (the same submission id, or a fresh hello) is safe."""


def _record(fields: dict[bytes, bytes], sealer: AnswerSealer) -> Record | None:
    if not fields or b"pb" not in fields:
        return None
    return Record(
        interaction=sealer.unseal(interaction_pb2.Interaction.FromString(fields[b"pb"])),
        state=_s(fields.get(b"state", b"")),
        session_id=_s(fields.get(b"session", b"")),
        epoch=int(fields.get(b"epoch", b"0")),
        invocation_id=_s(fields.get(b"invocation", b"")),
        submission_id=_s(fields.get(b"submission", b"")),
    )


class InteractionStore(StoreReads):
    """Typed access to one Host's Interaction keys in Redis.

    ``retention_ms`` is the TTL of settled records and of event Streams (garbage collection only);
    ``events_maxlen`` caps each Stream with ``XADD MAXLEN ~``. Every method raises
    :class:`StoreUnavailable` when Redis cannot be reached.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis | RedisCluster,
        keys: Keys,
        *,
        retention_ms: int,
        events_maxlen: int,
        limiter: asyncio.Semaphore | None = None,
        fence: Fence = Fence(),
        sealer: AnswerSealer | None = None,
        history: HistoryPolicy = HistoryPolicy(),
    ) -> None:
        self.client = client
        self.history = history
        """Retention and cap of the Host's history (``settle.lua``, ``restart_batch.lua`` trim it)."""
        self.sealer = sealer if sealer is not None else AnswerSealer(None)
        """Seals answers written, unseals answers read (no key: plaintext, for unit tests)."""
        self.keys = keys
        self.retention_ms = retention_ms
        self.events_maxlen = events_maxlen
        self.limiter = limiter if limiter is not None else asyncio.Semaphore(DEFAULT_COMMAND_SLOTS)
        """Bounds the commands in flight (shared by every Host's store of one replica): with the fan-out's
        follower connections, the replica never opens more than ``redis_pool_size`` connections."""
        self.fence = fence
        self._open = client.register_script(script_text("open.lua"))
        self._settle = client.register_script(script_text("settle.lua"))
        self._heartbeat = client.register_script(script_text("heartbeat.lua"))
        self._begin = client.register_script(script_text("begin_epoch.lua"))
        self._restart_batch = client.register_script(script_text("restart_batch.lua"))
        self._read_records = client.register_script(script_text("read_records.lua"))
        self._deliver = client.register_script(script_text("deliver.lua"))
        self._fence_invocation = client.register_script(script_text("fence_invocation.lua"))

    @_store_call
    async def ping(self) -> bool:
        """True when Redis answers PING."""
        return bool(await self.client.ping())

    @_store_call
    async def put_surfaces(self, entries: Mapping[str, bytes], ttl_ms: int) -> None:
        """Write presence entries (stream id → value) and keep the Host's surfaces hash alive ``ttl_ms``."""
        mapping: dict[Any, Any] = dict(entries)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.keys.surfaces(), mapping=mapping)
        pipe.pexpire(self.keys.surfaces(), ttl_ms)
        await pipe.execute()

    @_store_call
    async def remove_surfaces(self, stream_ids: Sequence[str]) -> None:
        """Delete presence entries (a stream that ended, or entries found expired)."""
        if stream_ids:
            await self.client.hdel(self.keys.surfaces(), *stream_ids)

    @_store_call
    async def surfaces(self) -> dict[str, bytes]:
        """Every presence entry of the Host, expired ones included (the caller filters)."""
        raw: dict[Any, Any] = await self.client.hgetall(self.keys.surfaces())
        return {_s(key): bytes(value) for key, value in raw.items()}

    @_store_call
    async def current_epoch(self) -> int:
        """The current Host epoch (0 before the first broker started)."""
        value = await self.client.get(self.keys.epoch())
        return int(value) if value is not None else 0

    @_store_call
    async def begin_epoch(self) -> tuple[int, int]:
        """Increment the Host epoch (fences every older epoch). Returns ``(new epoch, pending)``:
        ``pending`` counts the forms pending at that instant, all of older epochs (``begin_epoch.lua``)."""
        epoch, pending = await self._fenced(self._begin, [self.keys.epoch(), self.keys.pending()], [])
        return int(epoch), int(pending)

    async def _fenced(
        self, script: redis.commands.core.AsyncScript, keys: list[str], args: list[Any], *, always: bool = True
    ) -> Any:
        """Run ``script``; with a fence, pipeline ``WAIT`` after it on the same connection (WAIT counts the
        replicas that acknowledged that connection's writes) and raise :class:`NotReplicated` when too few
        did. ``always=False`` fences only a result whose first element is ``OK`` (a committed answer)."""
        if self.fence.replicas <= 0:
            return await script(keys=keys, args=args)
        target: dict[str, Any] = {}
        if isinstance(self.client, RedisCluster):
            await self.client.initialize()
            target["target_nodes"] = self.client.get_node_from_key(keys[0])
        for _attempt in range(3):
            pipe = self.client.pipeline(transaction=False)
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.fence.replicas, self.fence.timeout_ms, **target)
            result, acked = await pipe.execute(raise_on_error=False)
            if isinstance(result, redis.exceptions.NoScriptError):
                await self.client.script_load(script.script)  # a restarted or promoted Redis forgot it
                continue
            if isinstance(result, Exception):
                raise result
            if not always and ScriptCode(_s(result[0])) is not ScriptCode.OK:
                return result
            if isinstance(acked, Exception) or int(acked) < self.fence.replicas:
                log.warning(
                    "wait_fence_short",
                    extra={
                        "required": self.fence.replicas,
                        "acked": -1 if isinstance(acked, Exception) else int(acked),
                        "timeout_ms": self.fence.timeout_ms,
                    },
                )
                raise NotReplicated()
            return result
        raise StoreUnavailable()

    @property
    def fenced(self) -> bool:
        """Whether writes wait for replicas (``MAKA_REDIS_WAIT_REPLICAS`` > 0)."""
        return self.fence.replicas > 0

    @_store_call
    async def durable_record(self, interaction_id: str) -> Record | None:
        """The record as the Host's master holds it, returned only once that master's required replicas have
        acknowledged it (docs/design.md#durable-fences): ``HGETALL``, ``INCR`` of the fence key and ``WAIT``,
        pipelined on one connection. Replication is ordered, so the ``WAIT`` covers the write the read
        observed, whichever client made it. A failover between an earlier read and this one shows here as
        a record that differs (its settlement was rolled back). Raises :class:`NotReplicated` when too few
        replicas acknowledged in time. Without a fence it is :meth:`get`.
        """
        key = self.keys.record(interaction_id)
        if not self.fenced:
            return _record(await self.client.hgetall(key), self.sealer)  # type: ignore[arg-type]
        target: dict[str, Any] = {}
        if isinstance(self.client, RedisCluster):
            await self.client.initialize()
            target["target_nodes"] = self.client.get_node_from_key(key)
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(key)
        pipe.incr(self.keys.fence())
        pipe.execute_command("WAIT", self.fence.replicas, self.fence.timeout_ms, **target)
        fields, _, acked = await pipe.execute(raise_on_error=False)
        for reply in (fields, acked):
            if isinstance(reply, Exception):
                raise reply
        if int(acked) < self.fence.replicas:
            raise NotReplicated()
        return _record(fields, self.sealer)

    @_store_call
    async def open(
        self,
        interaction: interaction_pb2.Interaction,
        *,
        lease_deadline_ms: int,
        wait_deadline_ms: int,
        created_ms: int,
    ) -> tuple[ScriptCode, str]:
        """Store a new pending Interaction and emit its ``opened`` event.

        Returns ``("OK", stream id)``, ``("STALE_EPOCH", current)``, ``("ALREADY_PENDING", id)`` or
        ``("COLLISION", "")``.
        """
        b = interaction.binding
        interaction = self.sealer.seal(interaction)
        event = interaction_pb2.InteractionEvent(kind=interaction_pb2.EVENT_KIND_OPENED, interaction=interaction)
        result = await self._open(
            keys=[
                self.keys.epoch(),
                self.keys.record(interaction.interaction_id),
                self.keys.leases(interaction.host_epoch),
                self.keys.pending(),
                self.keys.invocation(b.invocation_id),
                self.keys.session_pending(b.session_id),
                self.keys.session_events(b.session_id),
                self.keys.host_events(),
            ],
            args=[
                interaction.host_epoch,
                interaction.interaction_id,
                interaction.SerializeToString(),
                event.SerializeToString(),
                b.session_id,
                b.invocation_id,
                lease_deadline_ms,
                wait_deadline_ms,
                created_ms,
                self.events_maxlen,
                self.retention_ms,
            ],
        )
        code = ScriptCode(_s(result[0]))
        return code, _s(result[1]) if len(result) > 1 else ""

    @_store_call
    async def get(self, interaction_id: str) -> Record | None:
        """The stored record, or None when unknown or expired."""
        fields: dict[bytes, bytes] = await self.client.hgetall(self.keys.record(interaction_id))  # type: ignore[assignment]
        return _record(fields, self.sealer)

    @_store_call
    async def get_many(self, interaction_ids: Sequence[str]) -> list[Record | None]:
        """:meth:`get` for each id in one read-only script call (``read_records.lua``); None where unknown, or
        where the stored answer does not unseal (logged ``answer_unsealable``): one such record never fails a
        batch (the reaper's sweeps), and it is never returned without its answer."""
        if not interaction_ids:
            return []
        flat: list[bytes | None] = await self._read_records(keys=[self.keys.record(i) for i in interaction_ids])
        out: list[Record | None] = []
        for index in range(0, len(flat), 6):
            state, session, epoch, invocation, submission, pb = flat[index : index + 6]
            if pb is None:
                out.append(None)
                continue
            try:
                interaction = self._stored(pb)
            except AnswerUnsealable:
                out.append(None)
                continue
            out.append(
                Record(
                    interaction=interaction,
                    state=_s(state or b""),
                    session_id=_s(session or b""),
                    epoch=int(epoch or b"0"),
                    invocation_id=_s(invocation or b""),
                    submission_id=_s(submission or b""),
                )
            )
        return out

    @_store_call
    async def restart_batch(self, closures: Sequence[tuple[Record, interaction_pb2.Interaction]]) -> list[str]:
        """Run ``restart_batch.lua``: close each ``(record, new)`` pair as ``host_restarted`` in one script call.

        ``new`` is the record's Interaction as closed (state, close reason, settled time). A pair is
        written only if the stored record is still pending, of the same session and epoch, and its
        epoch is older than the current one (the checks of ``settle.lua``'s restart mode); others are
        skipped. Emits the ``closed`` event on the session and Host-wide Streams and the settled-Stream
        entry for each form it closes. Returns the ids it closed, in order.
        """
        if not closures:
            return []
        keys = [
            self.keys.epoch(),
            self.keys.pending(),
            self.keys.settled(),
            self.keys.host_events(),
            self.keys.history(),
            self.keys.history_entries(),
        ]
        now_ms = max((closed.settled_at.ToMilliseconds() for _, closed in closures), default=0)
        args: list[str | int | bytes] = [
            self.retention_ms,
            self.events_maxlen,
            now_ms,
            self.history.retention_ms,
            self.history.max_entries,
        ]
        for record, closed in closures:
            entry = history_entry(closed, self.keys.host_id).SerializeToString()
            new = self.sealer.seal(closed)
            event = interaction_pb2.InteractionEvent(kind=interaction_pb2.EVENT_KIND_CLOSED, interaction=new)
            keys += [
                self.keys.record(record.interaction.interaction_id),
                self.keys.leases(record.epoch),
                self.keys.invocation(record.invocation_id),
                self.keys.session_pending(record.session_id),
                self.keys.session_events(record.session_id),
            ]
            args += [
                record.interaction.interaction_id,
                record.session_id,
                record.epoch,
                new.SerializeToString(),
                event.SerializeToString(),
                entry,
            ]
        return [_s(v) for v in await self._restart_batch(keys=keys, args=args)]

    @_store_call
    async def settle(
        self,
        mode: Mode,
        record: Record,
        new: interaction_pb2.Interaction,
        *,
        state: str,
        reason: str,
        submission_id: str,
        now_ms: int,
        caller_epoch: int | None = None,
    ) -> SettleResult:
        """Run ``settle.lua``: commit ``new`` (answered or closed) only if ``record`` is still pending
        and ``mode``'s precondition holds. See :class:`SettleResult` for the outcomes.
        """
        kind = interaction_pb2.EVENT_KIND_ANSWERED if state == "answered" else interaction_pb2.EVENT_KIND_CLOSED
        entry = history_entry(new, self.keys.host_id)  # before sealing: it keeps the answer's action, no value
        new = self.sealer.seal(new)
        event = interaction_pb2.InteractionEvent(kind=kind, interaction=new)
        keys = [
            self.keys.epoch(),
            self.keys.record(record.interaction.interaction_id),
            self.keys.leases(record.epoch),
            self.keys.pending(),
            self.keys.invocation(record.invocation_id),
            self.keys.session_pending(record.session_id),
            self.keys.session_events(record.session_id),
            self.keys.settled(),
            self.keys.host_events(),
            self.keys.undelivered(),
            self.keys.history(),
            self.keys.history_entries(),
        ]
        args: list[Any] = [
            mode.value,
            record.interaction.interaction_id,
            record.session_id,
            record.epoch,
            new.SerializeToString(),
            event.SerializeToString(),
            state,
            reason,
            submission_id,
            now_ms,
            self.retention_ms,
            self.events_maxlen,
            "" if caller_epoch is None else caller_epoch,
            entry.SerializeToString(),
            self.history.retention_ms,
            self.history.max_entries,
        ]
        if mode is Mode.ANSWER:  # a committed answer is fenced before it is acknowledged
            result = await self._fenced(self._settle, keys, args, always=False)
        else:
            result = await self._settle(keys=keys, args=args)
        code = ScriptCode(_s(result[0]))
        if code in (ScriptCode.SAME, ScriptCode.ANSWERED):
            return SettleResult(code, stored=self._stored(result[1]))
        if code is ScriptCode.CLOSED:
            return SettleResult(code, reason=_s(result[1]), stored=self._stored(result[2]))
        if code in (ScriptCode.EXPIRED, ScriptCode.STALE_EPOCH):
            return SettleResult(code, reason=_s(result[1]))
        return SettleResult(code)

    @_store_call
    async def deliver(
        self,
        mode: DeliveryMode,
        record: Record,
        new: interaction_pb2.Interaction,
        *,
        outcome: str,
        lost_reason: str,
        caller_epoch: int | None = None,
    ) -> SettleResult:
        """Run ``deliver.lua``: record ``new``'s delivery (``outcome`` ``delivered`` | ``lost``) only if
        ``record`` is answered with delivery still pending and ``mode``'s precondition holds.

        Codes: OK | DONE (already recorded; ``reason`` = the stored delivery, ``stored``) |
        NOT_ANSWERED (``reason`` = state, ``stored``) | NOT_FOUND | STALE_EPOCH (``reason`` = current) | NOT_DUE.
        """
        entry = history_entry(new, self.keys.host_id)
        new = self.sealer.seal(new)
        event = interaction_pb2.InteractionEvent(kind=interaction_pb2.EVENT_KIND_DELIVERY, interaction=new)
        result = await self._deliver(
            keys=[
                self.keys.epoch(),
                self.keys.record(record.interaction.interaction_id),
                self.keys.undelivered(),
                self.keys.session_events(record.session_id),
                self.keys.host_events(),
                self.keys.history_entries(),
            ],
            args=[
                mode.value,
                record.interaction.interaction_id,
                record.epoch,
                outcome,
                new.SerializeToString(),
                event.SerializeToString(),
                lost_reason,
                "" if caller_epoch is None else caller_epoch,
                self.retention_ms,
                self.events_maxlen,
                entry.SerializeToString(),
            ],
        )
        code = ScriptCode(_s(result[0]))
        if code in (ScriptCode.DONE, ScriptCode.NOT_ANSWERED):
            return SettleResult(code, reason=_s(result[1]), stored=self._stored(result[2]))
        if code is ScriptCode.STALE_EPOCH:
            return SettleResult(code, reason=_s(result[1]))
        return SettleResult(code)

    def _stored(self, pb: bytes) -> interaction_pb2.Interaction:
        """A stored Interaction's bytes, unsealed."""
        return self.sealer.unseal(interaction_pb2.Interaction.FromString(pb))

    def event_entry(self, fields: dict[bytes, bytes]) -> interaction_pb2.InteractionEvent:
        """An event Stream entry (docs/design.md#redis-layout), its Interaction unsealed (the fan-out decoder;
        an entry that does not unseal is skipped there with a log)."""
        return self.sealer.unseal_event(interaction_pb2.InteractionEvent.FromString(fields[b"pb"]))

    def settled_entry(self, fields: dict[bytes, bytes]) -> tuple[int, interaction_pb2.Interaction]:
        """A settled Stream entry: ``(epoch, Interaction)``, unsealed."""
        return int(fields[b"epoch"]), self._stored(fields[b"pb"])

    @_store_call
    async def fence_invocation(self, epoch: int, invocation_id: str) -> tuple[ScriptCode, str]:
        """Run ``fence_invocation.lua``: no later open for ``invocation_id`` commits. Returns
        ``("OK", pending id or "")`` or ``("STALE_EPOCH", current)``."""
        # Fenced like a committed answer: a failover must not forget that the invocation settled.
        result = await self._fenced(
            self._fence_invocation,
            [self.keys.epoch(), self.keys.invocation(invocation_id)],
            [epoch, self.retention_ms],
            always=False,
        )
        return ScriptCode(_s(result[0])), _s(result[1])

    @_store_call
    async def forget_undelivered(self, interaction_id: str) -> None:
        """Drop an id from the undelivered set (its record expired after retention)."""
        await self.client.zrem(self.keys.undelivered(), interaction_id)

    @_store_call
    async def heartbeat(self, epoch: int, deadline_ms: int) -> tuple[ScriptCode, int]:
        """Renew every lease of ``epoch``. Returns ``("OK", renewed)`` or ``("STALE_EPOCH", current)``."""
        result = await self._heartbeat(keys=[self.keys.epoch(), self.keys.leases(epoch)], args=[epoch, deadline_ms])
        return ScriptCode(_s(result[0])), int(_s(result[1]))
