"""Capability broker settings (``MAKA_*`` environment variables)."""

from __future__ import annotations

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
    drain_seconds: float = Field(default=0.0, ge=0)
    """On SIGTERM, after turning NOT_SERVING: how long calls in flight (and their forms) may go on
    finishing while new calls are refused ``HOST_UNAVAILABLE``; what is left then settles ``lost``.
    0 = no drain (``maka up``). Keep preStop + drain + 2 x ``grace_seconds`` (settling what is left, then the
    server's stop) below the pod's termination grace."""
    interaction_token: str = ""
    """Bearer token presented to the Interaction service; empty sends none."""
