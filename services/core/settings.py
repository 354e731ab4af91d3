"""Settings shared by every service: typed, read from ``MAKA_*`` environment variables.

Each service has one ``Settings`` class (pydantic-settings) whose attribute docstrings document
every variable; docs/configuration.md#configuration-reference lists them. Common fields live in
:class:`GrpcServerSettings`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from services.core.auth import Role


class LoopSettings(BaseSettings):
    """Which event loop a service process runs on (read by :mod:`services.core.runner` before the loop exists)."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    """Event loop of the service: ``uvloop`` (libuv; less CPU per message) or ``asyncio`` (the standard one)."""


class OidcSettings(BaseSettings):
    """Bearer JWTs from an OpenID Connect issuer, accepted beside the tokens file (docs/security.md,
    "Sign-in for people"); the web surface also signs people in with them."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    oidc_issuer: str = ""
    """OpenID Connect issuer URL (e.g. ``https://id.example.com/realms/team``): bearer JWTs signed by a key of
    its JWKS (found by discovery; an unknown ``kid`` refetches it) are accepted; empty = off. Written exactly as
    the issuer's ``iss`` claim; ``http://`` only for a loopback host."""
    oidc_audiences: Annotated[list[str], NoDecode] = []
    """The ``aud`` values a bearer JWT may carry (comma-separated or a JSON list). A gRPC service accepts JWTs
    only when this and ``oidc_issuer`` are set (so the web's sign-in settings alone, in a shared environment,
    turn nothing on for the services); the web surface accepts its ``oidc_client_id`` for sign-in."""
    oidc_name_claim: str = "email"
    """The claim that names the person (``email``, ``preferred_username``, ``sub``): the principal's name. With
    ``email`` a token is accepted only when its ``email_verified`` is true (``bearer token refused: email not
    verified`` otherwise); choose ``preferred_username`` or ``sub`` for an issuer that has no verified email."""
    oidc_groups_claim: str = "groups"
    """The claim listing the person's groups (a list of strings, or one string)."""
    oidc_roles: dict[str, list[str]] = {}
    """Roles granted per group, a JSON object, e.g. ``{"release-managers": ["surface"], "ci": ["caller"]}``;
    the group ``*`` grants to every signed-in person. A person with no role is refused every RPC that needs one.
    ``admin`` cannot be granted to a group (refused at start-up): it holds every role and every session, which only a
    tokens-file entry may."""
    oidc_clock_skew_seconds: int = Field(default=60, ge=0, le=600)
    """Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""

    @field_validator("oidc_audiences", mode="before")
    @classmethod
    def _split_audiences(cls, value: object) -> object:
        return comma_or_json_list(value)

    @field_validator("oidc_issuer")
    @classmethod
    def _check_issuer(cls, value: str) -> str:
        issuer = value.strip()
        if issuer:
            check_issuer_url(issuer)
        return issuer

    @field_validator("oidc_roles")
    @classmethod
    def _check_roles(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        known = [role.value for role in Role if role is not Role.ADMIN]
        for group, names in value.items():
            if Role.ADMIN.value in names:
                raise ValueError(
                    f"MAKA_OIDC_ROLES[{group!r}]: a group may not be granted 'admin' (it holds every role and every"
                    f" session: the group would see and stop every person's calls and forms); grant it {known}"
                )
            if unknown := [name for name in names if name not in known]:
                raise ValueError(f"MAKA_OIDC_ROLES[{group!r}]: unknown role {unknown[0]!r}; use {known}")
        return value


def check_issuer_url(issuer: str) -> None:
    """Raise ``ValueError`` unless ``issuer`` is an ``https://`` URL (``http://`` only on a loopback host)."""
    parts = urlsplit(issuer)
    loopback = (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")
    if not parts.hostname or parts.scheme not in ("https", "http") or (parts.scheme == "http" and not loopback):
        raise ValueError(f"MAKA_OIDC_ISSUER must be an https:// URL (http:// only on loopback), got {issuer!r}")


class GrpcServerSettings(LoopSettings, OidcSettings):
    """How a service's gRPC server listens and shuts down."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    listen: str = "127.0.0.1:0"
    """``host:port`` to bind; port 0 picks a free one (written to ``port_file`` when set)."""
    port_file: Path | None = None
    """Where to write the bound port once serving (used by ``maka up`` and tests)."""
    grace_seconds: float = 5.0
    """Graceful-shutdown grace: in-flight RPCs get this long after NOT_SERVING before cancellation."""
    max_message_bytes: int = 4 * 1024 * 1024
    """Largest gRPC message accepted or sent."""
    log_level: str = "INFO"
    """Python logging level for the service's structured logs."""
    tls_cert_file: Path | None = None
    """PEM server certificate; with ``tls_key_file`` the server speaks TLS."""
    tls_key_file: Path | None = None
    """PEM private key for ``tls_cert_file``."""
    tls_client_ca_file: Path | None = None
    """PEM CA bundle; when set, clients must present a certificate signed by it (mutual TLS)."""
    metrics_listen: str = ""
    """``host:port`` for the Prometheus ``/metrics`` endpoint; empty disables it."""
    auth_tokens_file: Path | None = None
    """JSON tokens file (see :mod:`services.core.auth`); unset = no authentication (loopback default)."""
    auth_tokens_dir: Path | None = None
    """Directory of more tokens files, one per unit: ``<dir>/<unit>/tokens.json`` (each team's Secret mounted
    into the Interaction tier at ``<dir>/<team>``), added to ``auth_tokens_file``'s. Set: authentication is on
    even when no unit is there. Read at start, like the file."""
    otel_exporter: str = ""
    """OpenTelemetry span exporter: ``console``, ``otlp`` (OTLP/gRPC, batched) or empty (tracing off)."""
    otel_endpoint: str = ""
    """OTLP/gRPC collector address for ``otel_exporter=otlp``, e.g. ``http://otel-collector:4317``
    (``http://`` = plaintext); empty = ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``localhost:4317``."""
    max_connection_age_seconds: float = Field(default=0.0, ge=0)
    """Close each client connection after about this long (GOAWAY), so long-lived streams move to new
    replicas after a scale-out; clients resume transparently. 0 = never."""
    max_connection_age_grace_seconds: float = Field(default=30.0, ge=0)
    """How long streams of a connection past its age may still run before they are cancelled."""


class DrainBudgetSettings(BaseSettings):
    """The drain budget of a Host's processes on SIGTERM (docs/design.md#drain-vs-crash): the broker and the MCP
    front door read the same variables, so ``MAKA_DRAIN_SECONDS=auto`` derives the same budget in both."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    execution_timeout_seconds: float = 120.0
    """Provider execution budget of one leg; suspended while a nested form is pending (RFC criterion 10);
    each progress notification re-arms it."""
    form_wait_seconds: float = 0.0
    """Bounded wait of one pending form; 0 uses the Interaction service default."""
    form_wait_max_seconds: float = Field(default=590.0, gt=0)
    """The longest a form of this Host can wait: the Interaction tier's ``MAKA_FORM_WAIT_MAX_SECONDS`` (keep
    the two equal); the ``auto`` drain budget derives from it."""
    grace_seconds: float = 5.0
    """The time the ``auto`` drain budget leaves the last result to reach its caller: a gRPC service's
    graceful-shutdown grace (give a Host's processes the broker's value)."""
    drain_seconds: Annotated[float, Field(ge=0)] | Literal["auto"] = 0.0
    """On SIGTERM: how long calls in flight may go on finishing; ``auto`` = until every call is done, bounded by
    :meth:`drain_budget_seconds`. 0 = no drain."""

    def longest_form_wait_seconds(self) -> float:
        """The longest a pending form of this Host can wait: its own ``form_wait_seconds`` when set
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


class ClientTlsSettings(BaseSettings):
    """How this process dials other services: TLS roots and an optional client certificate (mTLS)."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    tls_ca_file: Path | None = None
    """PEM CA bundle to verify servers; when set, outgoing channels use TLS."""
    tls_client_cert_file: Path | None = None
    """PEM client certificate presented to servers that require mutual TLS."""
    tls_client_key_file: Path | None = None
    """PEM private key of ``tls_client_cert_file``."""
    tls_server_name: str = ""
    """Override of the TLS server name checked against the certificate (e.g. ``localhost``)."""


def comma_or_json_list(value: object) -> object:
    """A ``mode="before"`` validator's reading of a list setting: ``a,b`` or a JSON array from the
    environment; anything else is left for pydantic to check."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            parsed: object = json.loads(text)
            return parsed
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def settings_problem(error: ValidationError) -> str:
    """One line naming every ``MAKA_*`` setting ``error`` refused and why (never the whole value, no traceback)."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        named = "".join(str(part) for part in item["loc"][:1])
        if named and not message.startswith("MAKA_"):
            message = f"MAKA_{named.upper()}: {message}"
        problems.append(message)
    return "; ".join(problems) or "invalid settings"
