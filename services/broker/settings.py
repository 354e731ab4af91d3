"""Capability broker settings (``MAKA_*`` environment variables)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from services.core.settings import GrpcServerSettings


class Settings(GrpcServerSettings):
    """How the broker serves providers and callers and reaches the Interaction service."""

    interaction_target: str = "127.0.0.1:50051"
    """``host:port`` of the Interaction service (its ``HostLink`` stream)."""
    host_id: str = "local"
    """The Runtime Host this broker is; sent in HostLink's hello (the Interaction tier must serve it and the
    broker token must name it)."""
    execution_timeout_seconds: float = 120.0
    """Provider execution budget of one leg; suspended while a nested form is pending (RFC criterion 10);
    each progress notification re-arms it."""
    max_execution_seconds: float = 3600.0
    """Most provider execution (outside forms) of one invocation however often progress re-arms the
    timer; 0 = progress does not re-arm."""
    heartbeat_seconds: float = 5.0
    """HostLink lease renewal interval, and the provider heartbeat interval (silent for 3x = lost)."""
    form_wait_seconds: float = 0.0
    """Bounded wait of one pending form; 0 uses the Interaction service default."""
    max_invocations_per_provider: int = 256
    """Live invocations one provider registration may hold; more fail RESOURCE_EXHAUSTED."""
    stream_queue_size: int = 256
    """Bound of each per-stream outgoing queue (provider streams, CallTool streams, HostLink)."""
    call_keepalive_seconds: float = 15.0
    """A ``CallTool``/``WatchCall`` stream silent this long gets a ``status`` event (below L7 proxy idle timeouts)."""
    reattach_grace_seconds: float = 30.0
    """How long a call with no caller attached keeps running before it is stopped as Stop is; 0 stops at once."""
    form_wait_max_seconds: float = Field(default=590.0, gt=0)
    """The longest a form of this Host can wait: the Interaction tier's ``MAKA_FORM_WAIT_MAX_SECONDS`` (keep
    the two equal); the ``auto`` drain budget derives from it."""
    drain_seconds: Annotated[float, Field(ge=0)] | Literal["auto"] = 0.0
    """On SIGTERM, after turning NOT_SERVING for new calls (the named health service; ``""`` stays SERVING
    until the drain ends): how long calls in flight (and their forms) may go on
    finishing while new calls are refused ``HOST_UNAVAILABLE``; what is left then settles ``lost``.
    ``auto`` = until every call is done, bounded by :meth:`drain_budget_seconds` (the longest form
    wait + one provider leg + ``grace_seconds``). 0 = no drain (``maka up``). Keep preStop + drain +
    2 x ``grace_seconds`` (settling what is left, then the server's stop) below the pod's termination grace."""
    advertise_address: str = ""
    """Where callers reach THIS Host for ``WatchCall`` (a per-Host address such as
    ``team-a-host-0.team-a-host:50052``), sent in every ``CallAccepted.host_address`` so a caller that
    started the call through a pool's address reattaches to the Host that owns it; empty = "the target you
    used" (one Host, or a proxy that routes by Host)."""
    interaction_token: str = ""
    """Bearer token presented to the Interaction service; empty sends none."""

    def longest_form_wait_seconds(self) -> float:
        """The longest a pending form of this broker can wait: its own ``form_wait_seconds`` when set
        (the tier caps it at its maximum), else the tier's maximum."""
        if self.form_wait_seconds > 0:
            return min(self.form_wait_seconds, self.form_wait_max_seconds)
        return self.form_wait_max_seconds

    def drain_budget_seconds(self) -> float:
        """How long a drain may wait for the calls in flight: ``drain_seconds`` when a number; for ``auto``
        the longest form wait (a form opened just before SIGTERM) + one provider leg after its answer
        (``execution_timeout_seconds``) + ``grace_seconds`` for the last result to reach its caller."""
        if self.drain_seconds == "auto":
            return self.longest_form_wait_seconds() + self.execution_timeout_seconds + self.grace_seconds
        return self.drain_seconds
