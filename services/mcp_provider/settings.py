"""Settings of the MCP provider service (``MAKA_*`` environment variables)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from services.core.backoff import Backoff
from services.core.settings import DrainBudgetSettings, GrpcServerSettings


class Settings(GrpcServerSettings, DrainBudgetSettings):
    """The MCP provider: which broker to register with, which MCP servers to connect, loop pacing, and how
    it drains (the broker's budget variables, :class:`~services.core.settings.DrainBudgetSettings`)."""

    broker_target: str = "127.0.0.1:50052"
    """``host:port`` of the Capability broker's ``CapabilityBrokerService``."""
    mcp_config: Path | None = None
    """Path to an ``mcpServers`` JSON file (the format MCP hosts use, plus an optional ``era``)."""
    mcp_config_applied: Path | None = None
    """Where to keep a copy of the last config applied (written, mode 0600, at each start and reload that
    applies). A start whose ``mcp_config`` is invalid then runs this copy and reports the file's problems as
    a rejected reload, instead of exiting (``maka up`` sets it in its state dir, so a provider restarted
    after a rejected reload keeps serving). Unset: a bad file stops the provider."""
    broker_token: str = ""
    """Bearer token sent to the broker as ``authorization: Bearer <token>``; empty sends none."""
    reconnect_initial_seconds: float = 0.5
    """First backoff delay after an MCP connection or broker stream fails; doubles per failure."""
    reconnect_max_seconds: float = 30.0
    """Largest backoff delay."""
    max_rounds: int = 10
    """``tools/call`` retries of one logical invocation after the first leg (the SDK's default of 10)."""
    state_only_pacing_ms: int = 50
    """Delay before retrying a state-only ``InputRequiredResult``; doubles per consecutive state-only round."""
    state_only_pacing_max_ms: int = 250
    """Cap of the state-only pacing delay (the SDK's 250 ms)."""
    call_timeout_seconds: float = 300.0
    """Read timeout of one MCP ``tools/call`` leg, in seconds; each progress notification re-arms it."""
    max_call_seconds: float = 3600.0
    """Longest one ``tools/call`` leg may run however often it reports progress, in seconds."""
    heartbeat_seconds: float = 10.0
    """Interval of ``ProviderHeartbeat`` frames on each broker ``Connect`` stream."""
    host_id: str = "local"
    """The Runtime Host this provider serves: OAuth tokens are stored per Host and server."""
    oauth_redirect_uri: str = "http://127.0.0.1:8765/oauth/callback"
    """OAuth redirect URI registered for every server: the web surface's ``/oauth/callback`` (``maka up``
    sets it from the web port; ``maka auth login`` listens there itself when no web surface runs)."""
    oauth_token_dir: Path | None = None
    """Directory of the encrypted OAuth token files; with ``oauth_key_file`` tokens survive restarts."""
    oauth_key_file: Path | None = None
    """File holding the base64 AES-256 key that encrypts OAuth tokens at rest (a Secret in Kubernetes);
    unset keeps tokens in memory only."""
    oauth_key_optional: bool = False
    """When ``oauth_key_file`` does not exist, keep tokens in memory (logged ``oauth_key_absent``) instead of
    refusing to start: for a Kubernetes Secret volume marked ``optional: true``. A file that exists but is not
    a base64 32-byte key is still refused."""
    oauth_client_metadata_url: str = ""
    """HTTPS URL of this Host's OAuth client ID metadata document, used as ``client_id`` where the
    authorization server supports it; empty uses dynamic client registration."""
    reload_drain_seconds: float = 60.0
    """On a config reload, how long a removed server's calls in flight may run before it closes."""
    drain_seconds: Annotated[float, Field(ge=0)] | Literal["auto"] = 0.0
    """On SIGTERM: how long calls in flight may go on finishing before the broker streams and MCP
    connections close (set it with the broker's ``drain_seconds`` in a Host pod); the provider stops waiting
    as soon as none is in flight. ``auto`` = the broker's budget derived from the same variables
    (``MAKA_FORM_WAIT_MAX_SECONDS``, ``MAKA_FORM_WAIT_SECONDS``, ``MAKA_EXECUTION_TIMEOUT_SECONDS``,
    ``MAKA_GRACE_SECONDS``: give it the broker's, as ``maka up`` does). 0 = no drain."""


def reconnect_backoff(initial_seconds: float, max_seconds: float) -> Backoff:
    """The jittered reconnect backoff of an MCP connection, a broker ``Connect`` stream or the status report
    (``reconnect_initial_seconds`` doubling per failure up to ``reconnect_max_seconds``)."""
    return Backoff(initial=min(initial_seconds, max_seconds), maximum=max_seconds)
