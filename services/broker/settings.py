"""Capability broker settings (``MAKA_*`` environment variables)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from services.core.settings import DrainBudgetSettings, GrpcServerSettings


class Settings(GrpcServerSettings, DrainBudgetSettings):
    """How the broker serves providers and callers and reaches the Interaction service (its drain budget:
    :class:`~services.core.settings.DrainBudgetSettings`, shared with the MCP front door)."""

    interaction_target: str = "127.0.0.1:50051"
    """``host:port`` of the Interaction service (its ``HostLink`` stream)."""
    host_id: str = "local"
    """The Runtime Host this broker is; sent in HostLink's hello (the Interaction tier must serve it and the
    broker token must name it)."""
    max_execution_seconds: float = 3600.0
    """Most provider execution (outside forms) of one invocation however often progress re-arms the
    timer; 0 = progress does not re-arm."""
    heartbeat_seconds: float = 5.0
    """HostLink lease renewal interval, and the provider heartbeat interval (silent for 3x = lost)."""
    max_invocations_per_provider: int = 256
    """Live invocations one provider registration may hold; more fail RESOURCE_EXHAUSTED."""
    stream_queue_size: int = 256
    """Bound of each per-stream outgoing queue (provider streams, CallTool streams, HostLink)."""
    call_keepalive_seconds: float = 15.0
    """A ``CallTool``/``WatchCall`` stream silent this long gets a ``status`` event (below L7 proxy idle timeouts)."""
    reattach_grace_seconds: float = 30.0
    """How long a call with no caller attached keeps running before it is stopped as Stop is; 0 stops at once."""
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
