"""Settings of the Interaction service (``MAKA_*`` environment variables)."""

from __future__ import annotations

from pydantic import Field, model_validator

from services.core.settings import GrpcServerSettings


class Settings(GrpcServerSettings):
    """How the Interaction service reaches Redis and times its forms."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL (``redis://``, ``rediss://`` or ``unix://``). Ship it with AOF on."""
    host_id: str = Field(default="local", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    """The Runtime Host this service serves: the Redis hash tag ``maka:{host_id}:...``."""
    lease_seconds: float = Field(default=30.0, gt=0)
    """Lease of a pending form; the broker's HostLink heartbeat renews it, the reaper closes it as ``lease_expired``."""
    form_wait_seconds: float = Field(default=300.0, gt=0)
    """Default bounded wait of a pending form before it closes as ``timed_out``."""
    form_wait_max_seconds: float = Field(default=590.0, gt=0)
    """Largest wait a broker may ask for; below the 600 s the official MCP SDKs give ``requestState``."""
    retention_seconds: float = Field(default=86400.0, gt=0)
    """How long settled records and event streams are kept (Redis TTL, garbage collection only)."""
    events_maxlen: int = Field(default=10000, gt=0)
    """Approximate length cap (``XADD MAXLEN ~``) of each session event Stream and the settled Stream."""
    redis_timeout_seconds: float = Field(default=2.5, gt=1.0)
    """Socket read timeout of each Redis command, in seconds (an unreachable Redis then fails fast as
    UNAVAILABLE / ``STORE_UNAVAILABLE`` instead of hanging); must exceed the 1 s ``XREAD`` block of the
    Attach and HostLink followers."""
    reaper_interval_seconds: float = Field(default=1.0, gt=0)
    """How often the reaper looks for expired leases and waits, and the Redis health probe runs."""

    @model_validator(mode="after")
    def _wait_within_max(self) -> Settings:
        if self.form_wait_seconds > self.form_wait_max_seconds:
            raise ValueError("form_wait_seconds must not exceed form_wait_max_seconds")
        return self
