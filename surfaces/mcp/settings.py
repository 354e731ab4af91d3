"""Settings of the MCP front door (``python -m surfaces.mcp.main``), from ``MAKA_*`` variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from services.core.settings import DrainBudgetSettings, OidcSettings, comma_or_json_list


class McpSettings(OidcSettings, DrainBudgetSettings):
    """Where the MCP endpoint listens, which broker it calls, which browsers may reach it, and how it drains
    (the broker's budget variables, :class:`~services.core.settings.DrainBudgetSettings`)."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    broker_target: str = "127.0.0.1:50052"
    """``host:port`` of the Capability broker the endpoint lists and calls Tools through."""
    interaction_target: str = "127.0.0.1:50051"
    """``host:port`` of the Interaction service, where the answers of clients that declare form elicitation go
    (as a surface, with ``MAKA_SURFACE_TOKEN``)."""
    caller_token: SecretStr = SecretStr("")
    """Bearer token of the broker's ``caller`` role (empty sends none)."""
    surface_token: SecretStr = SecretStr("")
    """Bearer token of the ``surface`` role the answers of clients that declare form elicitation are sent to the
    Interaction service with (empty sends none)."""
    host_id: str = ""
    """The Host whose broker this endpoint calls (deploy/k8s: the pod name, as the broker's ``MAKA_HOST_ID``):
    the Host its clients' answers are for on an Interaction tier serving several (empty: the tier's only
    Host). The Host's manifests build its public name from it."""
    mcp_listen: str = "127.0.0.1:8766"
    """``host:port`` the MCP endpoint binds (path ``/mcp``); loopback by default. Port 0 picks a free one."""
    mcp_port_file: Path | None = None
    """Where to write the bound port once serving (for port 0)."""
    mcp_session: str = "default"
    """The prefix of the Maka sessions the endpoint's calls run in (the forms' session on every surface): each
    client gets its own, ``PREFIX.PRINCIPAL`` at 2026-07-28 and ``PREFIX.PRINCIPAL.MCP-SESSION`` at 2025-11-25
    (``local`` for the principal of an open endpoint); a token scoped to named sessions runs in ``PREFIX``."""
    mcp_allowed_origins: Annotated[list[str], NoDecode] = []
    """Extra ``Origin`` values browsers may send (comma-separated or a JSON list); loopback origins are always
    allowed, every other origin is refused (DNS rebinding protection)."""
    mcp_allowed_hosts: Annotated[list[str], NoDecode] = []
    """Extra ``Host`` header values the endpoint answers (comma-separated or a JSON list) besides loopback and the
    host of ``mcp_resource_url``; its metadata and ``401`` challenges answer only these too (any other: ``421``)."""
    mcp_state_key: SecretStr = SecretStr("")
    """Key of the HMAC-SHA256 that protects the ``requestState`` the endpoint gives 2026-07-28 clients (any
    string; replicas behind one URL must share it). Empty: a random key per process, so a retry that reaches
    another process, or this one after a restart, gets ``-32602`` ``invalid_request_state``."""
    mcp_state_ttl_seconds: float = Field(default=600.0, gt=0)
    """How long a ``requestState`` stays valid; a call whose client does not retry within it is stopped."""
    mcp_reattach_grace_seconds: float = Field(default=30.0, ge=0)
    """How long a call whose HTTP stream closed keeps running for its client to come back: at 2025-11-25 a
    ``GET`` with ``Last-Event-ID`` resuming the stream, at 2026-07-28 the retry with the call's ``requestState``
    (when the client was sent one). Past it the call is stopped (nothing stays pending); 0 stops it at once."""
    mcp_keepalive_seconds: float = Field(default=2.5, gt=0)
    """How often a silent SSE response stream (a ``tools/call`` waiting on a form, both eras) gets a keepalive
    comment line, so a client whose HTTP read timeout is short (httpx's default 5 s, the Python SDK's client) keeps
    waiting; a 2026-07-28 call that runs this long commits its response to ``text/event-stream``."""
    auth_tokens_file: Path | None = None
    """The stack's tokens file (``MAKA_AUTH_TOKENS_FILE``, :mod:`services.core.auth`): when set, ``/mcp`` needs a
    bearer token of the ``caller`` role and the endpoint serves protected-resource metadata
    (:mod:`surfaces.mcp.auth`)."""
    mcp_resource_url: str = ""
    """The endpoint's public URL behind an ingress (the ``resource`` of its metadata; its host is an allowed
    ``Host``); empty: the request's URL."""
    web_url: str = ""
    """Base URL of the web surface, named in progress notifications as where to answer a form (empty: the CLI)."""
    log_level: str = "INFO"
    """Log level of the process."""
    drain_seconds: Annotated[float, Field(ge=0)] | Literal["auto"] = 0.0
    """On SIGTERM: how long the endpoint keeps serving while its calls in flight (attached or waiting for their
    client's reattach) finish; ``/readyz`` answers 503 ``draining`` at once, ``/healthz`` stays 200, new calls
    still run (through a pool of Hosts, on a ready one). The process exits as soon as no call is in flight; past
    the budget its calls are stopped (nothing stays pending). ``auto`` = the broker's budget derived from the
    same variables (``MAKA_FORM_WAIT_MAX_SECONDS``, ``MAKA_FORM_WAIT_SECONDS``, ``MAKA_EXECUTION_TIMEOUT_SECONDS``,
    ``MAKA_GRACE_SECONDS``: give it the broker's). 0 = no drain: calls stopped at once (``maka up``)."""

    # Isolation of the endpoint's clients from each other (one principal cannot starve the others).
    mcp_max_calls_per_client: int = Field(default=16, ge=1)
    """How many ``tools/call`` one principal (bearer token; ``local`` on an open endpoint) may have running at
    once, of both protocol eras, waiting on a form or detached included: a further call is a Tool error
    (``isError``, ``RESOURCE_EXHAUSTED: ...``) and starts nothing. An agent rarely runs more than a few at once;
    the provider's live invocations (256 per server) are shared by every caller."""
    mcp_max_sessions_per_client: int = Field(default=32, ge=1)
    """How many 2025-11-25 sessions (``Mcp-Session-Id``) one principal may hold open: its ``initialize`` past
    it closes the principal's oldest idle session (no request in flight), and is refused (``429``, a JSON-RPC
    error body) when every one is busy."""
    mcp_session_idle_seconds: float = Field(default=600.0, gt=0)
    """How long a 2025-11-25 session with no request in flight (no call, no open ``GET`` stream) is kept before
    it is closed; its id then answers ``404 Session not found`` and the client opens a new one."""

    @field_validator("mcp_allowed_origins", "mcp_allowed_hosts", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        return comma_or_json_list(value)

    def listen_host_port(self) -> tuple[str, int]:
        """``mcp_listen`` split into ``(host, port)``; raises ``ValueError`` without a numeric port."""
        host, sep, port = self.mcp_listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"MAKA_MCP_LISTEN must be host:port, got {self.mcp_listen!r}")
        return host.strip("[]") or "127.0.0.1", int(port)
