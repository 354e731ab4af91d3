"""Settings of the web surface (``maka web`` / ``python -m surfaces.web.main``), from ``MAKA_*`` variables."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from services.core.settings import OidcSettings, comma_or_json_list


class WebSettings(OidcSettings):
    """How the web surface listens, which Interaction service it reads, and who may use it (the OIDC settings
    it shares with the services say which issuer signs people in and which groups grant the ``surface`` role)."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    interaction_target: str = "127.0.0.1:50051"
    """``host:port`` of the Interaction service (``maka web`` reads it from ``endpoints.json`` when unset)."""
    host_id: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]{0,128}$")
    """The Host whose forms this page shows, on an Interaction tier serving several; empty = the tier's only
    Host, or the only one the surface token names. ``host_ids`` (a pool) replaces it."""
    host_ids: str = Field(default="", pattern=r"^[A-Za-z0-9_.,*-]{0,4096}$")
    """The pool of Hosts this page follows (docs/design.md#surfaces-follow-the-pool): comma-separated Host ids,
    or ``*`` for every Host the surface token may use (``ListHosts``, listed again every 30 s so a scaled-out Host
    appears). Each form then shows its Host and is answered there; empty = one Host (``host_id``)."""
    broker_target: str = ""
    """``host:port`` of the Capability broker, for OAuth sign-in prompts and ``/oauth/callback``, the server
    status and the activity list (``GetStatus``); empty hides them (``maka up`` sets it, ``maka web`` reads
    it from ``endpoints.json`` when unset)."""
    web_listen: str = "127.0.0.1:8765"
    """``host:port`` the web page binds; loopback by default. Port 0 picks a free one (see ``web_port_file``)."""
    web_port_file: Path | None = None
    """Where to write the bound port once serving (for port 0)."""
    surface_token: SecretStr = SecretStr("")
    """Surface bearer token. When set, the page needs a login (a persistent HttpOnly SameSite=Strict cookie for
    ``web_session_seconds``) or ``Authorization: Bearer``, and the token is sent to the Interaction service as the
    surface role."""
    sessions: Annotated[list[str], NoDecode] = []
    """Session ids whose forms are shown (comma-separated or a JSON list); empty = every visible session."""
    log_level: str = "INFO"
    """Python logging level."""
    web_secret_file: Path | None = None
    """File holding the shared secret (at least 32 bytes) from which every replica derives the same
    CSRF token, so N replicas serve one page without sticky sessions (a Kubernetes Secret). Unset = a
    random secret per process, which is right for one replica only."""
    web_session_key_file: Path | None = None
    """File holding the key (at least 32 bytes) that signs the login cookie of a sign-in with the surface token, so
    the sign-in survives a change of that token and of the process: ``maka up`` sets it to ``STATE/web-session.key``
    (made once, mode 0600, kept across restarts of the same state dir), so the owner's browser stays signed in
    across restarts although each run has a new owner token. Unset = the cookie is signed with the surface token,
    and changing the token signs every browser out. Deleting the file signs every browser out."""
    web_session_seconds: int = Field(default=14 * 24 * 3600, ge=60, le=90 * 24 * 3600)
    """How long a sign-in with the surface token lasts: the login cookie's ``Max-Age`` (a persistent cookie, so it
    survives a browser restart) and the expiry signed into it (the server refuses it after that, whatever the
    browser keeps). Default 14 days."""
    web_owner_tokens_file: Path | None = None
    """The tokens file that holds the token this page asks for (``maka up`` sets ``STATE/tokens.json``): the sign-in
    page and the page's signed-out notice then name the owner token, that file and the ready line's ``?token=``
    link instead of ``MAKA_SURFACE_TOKEN``. Only shown, never read by the page."""
    web_undo_seconds: float = Field(default=5.0, ge=0, le=60)
    """How long the page waits after Dismiss before it sends ``cancel``; until then Undo restores the form with
    its draft and nothing is sent (leaving the page within it sends the dismissal at once). 0 sends at once."""
    web_public_origin: str = ""
    """The origin browsers use, e.g. ``https://maka.example.com`` behind a TLS-terminating ingress.
    When set, unsafe requests must carry exactly this ``Origin`` (and its host is an allowed Host)."""
    web_allow_unauthenticated_remote: bool = False
    """Serve a non-loopback ``web_listen`` (``0.0.0.0``, a LAN address) without ``surface_token``. Off: such a
    bind is refused at start, since anyone who reaches the address could read and answer every form. Turn it on
    only when something else in front (a proxy with its own sign-in, a private network) guards the page."""
    web_login_attempts_per_minute: int = Field(default=10, ge=1, le=10_000)
    """Failed sign-ins with the surface token (``POST /login``, a wrong ``?token=``) one client may make per minute
    (a token bucket of that size); more are answered ``429`` with ``Retry-After``. A client is a local user on
    loopback (the uid owning the connection's socket, so another user of the machine never spends the owner's
    attempts), else a client address."""
    oidc_client_id: str = ""
    """The page's client id at the OpenID Connect issuer; with ``oidc_issuer`` people sign in there
    (authorization code + PKCE; redirect URI ``<origin>/oidc/callback``, post-logout URI
    ``<origin>/oidc/signed-out``). Only people whose groups ``oidc_roles`` grants ``surface`` get in."""
    oidc_client_secret_file: Path | None = None
    """File holding the client secret (a confidential client, ``client_secret_basic``); unset = a public client
    (PKCE only)."""
    oidc_scopes: str = "openid email profile"
    """Scopes asked for at sign-in (space-separated); must yield ``oidc_name_claim`` and ``oidc_groups_claim``."""
    oidc_session_seconds: int = Field(default=8 * 3600, ge=60, le=30 * 24 * 3600)
    """How long a sign-in lasts before the page sends the person to the issuer again."""
    web_forwarded_allow_ips: str = ""
    """Comma-separated proxy addresses (or ``*``) whose ``X-Forwarded-Proto``/``X-Forwarded-For`` are
    trusted, so the page sees the browser's scheme and sets ``Secure`` cookies. Empty = no proxy headers."""

    @field_validator("web_public_origin")
    @classmethod
    def _check_origin(cls, value: str) -> str:
        text = value.strip().rstrip("/")
        if not text:
            return ""
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
            raise ValueError(f"MAKA_WEB_PUBLIC_ORIGIN must be scheme://host[:port], got {value!r}")
        return f"{parts.scheme}://{parts.netloc.lower()}"

    def shared_secret(self) -> bytes | None:
        """The bytes of ``web_secret_file`` (surrounding whitespace removed), or None when unset.

        Raises ``ValueError`` when the file cannot be read or holds fewer than 32 bytes.
        """
        if self.web_secret_file is None:
            return None
        try:
            secret = self.web_secret_file.read_bytes().strip()
        except OSError as error:
            raise ValueError(f"MAKA_WEB_SECRET_FILE {self.web_secret_file}: {error.strerror}") from None
        if len(secret) < 32:
            raise ValueError(f"MAKA_WEB_SECRET_FILE {self.web_secret_file}: needs at least 32 bytes")
        return secret

    def session_key(self) -> bytes | None:
        """The bytes of ``web_session_key_file`` (surrounding whitespace removed), or None when unset.

        Raises ``ValueError`` when the file cannot be read or holds fewer than 32 bytes.
        """
        if self.web_session_key_file is None:
            return None
        try:
            key = self.web_session_key_file.read_bytes().strip()
        except OSError as error:
            raise ValueError(f"MAKA_WEB_SESSION_KEY_FILE {self.web_session_key_file}: {error.strerror}") from None
        if len(key) < 32:
            raise ValueError(f"MAKA_WEB_SESSION_KEY_FILE {self.web_session_key_file}: needs at least 32 bytes")
        return key

    @property
    def oidc_sign_in(self) -> bool:
        """True when people sign in with OpenID Connect (``oidc_issuer`` and ``oidc_client_id`` set)."""
        return bool(self.oidc_issuer and self.oidc_client_id)

    def oidc_client_secret(self) -> str:
        """The client secret from ``oidc_client_secret_file`` (stripped), or empty for a public client.

        Raises ``ValueError`` when the file is set but cannot be read or is empty.
        """
        if self.oidc_client_secret_file is None:
            return ""
        try:
            secret = self.oidc_client_secret_file.read_text().strip()
        except OSError as error:
            raise ValueError(f"MAKA_OIDC_CLIENT_SECRET_FILE {self.oidc_client_secret_file}: {error.strerror}") from None
        if not secret:
            raise ValueError(f"MAKA_OIDC_CLIENT_SECRET_FILE {self.oidc_client_secret_file}: empty")
        return secret

    @field_validator("sessions", mode="before")
    @classmethod
    def _split_sessions(cls, value: object) -> object:
        return comma_or_json_list(value)

    def listen_host_port(self) -> tuple[str, int]:
        """``web_listen`` split into ``(host, port)``; ``[::1]:8765`` style IPv6 is accepted.

        Raises ``ValueError`` for a value without a numeric port, and for a non-loopback address without
        ``surface_token`` unless ``web_allow_unauthenticated_remote`` is on.
        """
        host, sep, port = self.web_listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"MAKA_WEB_LISTEN must be host:port, got {self.web_listen!r}")
        host = host.strip("[]") or "127.0.0.1"
        if (
            not is_loopback(host)
            and not self.surface_token.get_secret_value()
            and not self.oidc_sign_in
            and not self.web_allow_unauthenticated_remote
        ):
            raise ValueError(
                f"refusing to serve the web page on {self.web_listen} (not a loopback address) without sign-in: "
                "set MAKA_SURFACE_TOKEN or MAKA_OIDC_ISSUER and MAKA_OIDC_CLIENT_ID, or "
                "MAKA_WEB_ALLOW_UNAUTHENTICATED_REMOTE=true if something in front guards it"
            )
        return host, int(port)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
