"""Every Redis key of the Interaction service (docs/design.md#redis-layout), built only here.

All keys of one Host share the hash tag ``{host_id}`` so every Lua script touches a single Redis
Cluster slot. Layout:

- ``maka:{H}:epoch`` — STRING, the Host epoch counter (INCR per broker start; fencing token).
- ``maka:{H}:ix:{id}`` — HASH, one Interaction: ``pb`` (``maka.interaction.v1.Interaction`` bytes),
  ``state``, ``session``, ``epoch``, ``invocation``, ``reason``, ``submission``, and once answered
  ``delivery`` (``pending`` | ``delivered`` | ``lost``) and ``delivery_reason``.
- ``maka:{H}:leases:{epoch}`` — ZSET, pending id → lease deadline (ms since the Unix epoch).
- ``maka:{H}:pending`` — ZSET, every pending id of the Host → bounded-wait deadline (ms).
- ``maka:{H}:inv:{invocation_id}`` — STRING, the pending id of an invocation (one at a time), or the fence
  ``!settled`` once the broker closed the invocation by id (``fence_invocation.lua``: no later open).
- ``maka:{H}:session:{sid}:pending`` — ZSET, the session's pending ids → creation time (ms).
- ``maka:{H}:session:{sid}:events`` — STREAM of projection changes (fields ``kind``, ``pb``).
- ``maka:{H}:events`` — STREAM of every session's projection changes (for callers that see all sessions).
- ``maka:{H}:settled`` — STREAM of settlements of the whole Host (fields ``id``, ``epoch``, ``pb``).
- ``maka:{H}:history`` — ZSET, settled ids of the Host → settlement time (ms): ``ListHistory``'s order,
  trimmed by ``settle.lua`` / ``restart_batch.lua`` to the history retention and cap.
- ``maka:{H}:history:entries`` — HASH, settled id → ``maka.interaction.v1.HistoryEntry`` bytes (no answer
  value, no ``requestState``, no token; ``deliver.lua`` updates the delivery).
- ``maka:{H}:undelivered`` — ZSET, answered ids whose delivery is still pending → answer time (ms).
- ``maka:{H}:surfaces`` — HASH, the Host's attached surfaces: Attach stream id → ``"{expires ms}:"`` +
  ``maka.interaction.v1.AttachedSurface`` bytes, refreshed by the replica holding the stream
  (:mod:`services.interaction.presence`; docs/design.md#attached-surfaces).
- ``maka:{T}:wake:{replica}:{lane}`` — STREAM, wakes one fan-out lane of one replica (see :func:`wake_key`).
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_SESSIONS = "*"
"""The Attach scope of a caller that sees every session: follows :meth:`Keys.host_events`."""


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one Host."""

    host_id: str

    @property
    def _prefix(self) -> str:
        return f"maka:{{{self.host_id}}}"

    def epoch(self) -> str:
        """The Host epoch counter."""
        return f"{self._prefix}:epoch"

    def record(self, interaction_id: str) -> str:
        """One Interaction's hash."""
        return f"{self._prefix}:ix:{interaction_id}"

    def leases(self, epoch: int) -> str:
        """Lease deadlines of the pending forms of ``epoch``."""
        return f"{self._prefix}:leases:{epoch}"

    def pending(self) -> str:
        """Every pending id of the Host, scored by its bounded-wait deadline."""
        return f"{self._prefix}:pending"

    def invocation(self, invocation_id: str) -> str:
        """The pending id of one invocation."""
        return f"{self._prefix}:inv:{invocation_id}"

    def session_pending(self, session_id: str) -> str:
        """The session's pending ids (projection)."""
        return f"{self._prefix}:session:{session_id}:pending"

    def session_events(self, session_id: str) -> str:
        """The session's event Stream."""
        return f"{self._prefix}:session:{session_id}:events"

    def host_events(self) -> str:
        """The Host-wide event Stream (every session's changes)."""
        return f"{self._prefix}:events"

    def events(self, scope: str) -> str:
        """The event Stream of ``scope``: a session id, or :data:`ALL_SESSIONS` for the Host-wide Stream."""
        return self.host_events() if scope == ALL_SESSIONS else self.session_events(scope)

    def settled(self) -> str:
        """The Host-wide settled Stream read by HostLink handlers."""
        return f"{self._prefix}:settled"

    def surfaces(self) -> str:
        """The Host's attached surfaces (presence entries with their own expiry; see the module docstring)."""
        return f"{self._prefix}:surfaces"

    def undelivered(self) -> str:
        """Answered ids whose delivery to the provider is not yet recorded (``deliver.lua``)."""
        return f"{self._prefix}:undelivered"

    def history(self) -> str:
        """The Host's settled ids by settlement time (``ListHistory``; docs/design.md#history)."""
        return f"{self._prefix}:history"

    def history_entries(self) -> str:
        """The Host's history entries: settled id → ``HistoryEntry`` bytes (never an answer value)."""
        return f"{self._prefix}:history:entries"

    def fence(self) -> str:
        """A counter the replication probe increments so that its ``WAIT`` covers every earlier write of the
        Host's master (docs/design.md#durable-fences); read by no one."""
        return f"{self._prefix}:fence"


def hash_tag(key: str) -> str:
    """The hash tag of ``key`` (the text between its first ``{`` and the next ``}``; the key itself without one)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


def wake_key(tag: str, replica_id: str, lane: int) -> str:
    """A fan-out lane's wake-up Stream in the slot of ``tag`` (docs/design.md#fan-out): one ``XADD`` ends its
    blocking ``XREAD`` so newly subscribed Streams are read at once. Short-lived (``PEXPIRE``), read by no one else."""
    return f"maka:{{{tag}}}:wake:{replica_id}:{lane}"
