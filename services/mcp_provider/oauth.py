"""OAuth 2.1 sign-in for Streamable HTTP MCP servers: the Host-owned parts only (docs/security.md "OAuth").

The protocol work (protected-resource and authorization-server metadata discovery, PKCE, dynamic client
registration, client ID metadata documents, scope selection and step-up, refresh, resource indicators,
issuer checks) is the SDK's :class:`mcp.client.auth.OAuthClientProvider`, installed as the ``httpx`` auth
of the server's connection. What the Host owns is here:

- :class:`TokenVault` — durable token storage per Host and server: one file per server, AES-256-GCM
  encrypted with a key read from a file (a Kubernetes Secret), the Host id, server name and URL bound
  in as associated data. Nothing is stored in plaintext; nothing here logs a token.
- :class:`StoredTokens` — the SDK's ``TokenStorage`` over the vault (tokens and client registration).
- :class:`SignInFlow` — the SDK's ``redirect_handler``/``callback_handler``: the authorization URL is
  published as a sign-in prompt (never opened or fetched here), and the flow waits until a surface
  delivers the redirect's ``code``/``state``/``iss`` (broker ``CompleteSignIn``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl, ValidationError

from services.core.key_file import KeyFileError
from services.core.key_file import read_key_file as read_key_file_of

log = logging.getLogger("maka.mcp_provider.oauth")

NONCE_BYTES = 12

OAuthConfigError = KeyFileError
"""The OAuth key file is missing, unreadable or not a base64 32-byte key (the provider refuses to start)."""


def read_key_file(path: Path) -> bytes:
    """The 32-byte OAuth key in ``path`` (base64). Raises :class:`OAuthConfigError`."""
    return read_key_file_of(path, "an OAuth")


class TokenVault:
    """Encrypted records (``{"tokens": ..., "client_info": ...}``) per server under ``directory``.

    File name: ``<host>--<server>.tokens`` (both are ``[A-Za-z0-9_.-]``). Content: nonce ‖ AES-GCM
    ciphertext; associated data ``maka-oauth/v1|host|server|url``, so a file copied to another Host,
    server or URL does not decrypt (it reads as "no tokens": the user signs in again).
    """

    def __init__(self, directory: Path, key: bytes, host_id: str) -> None:
        self._directory = directory
        self._aead = AESGCM(key)
        self._host_id = host_id

    def _path(self, server: str) -> Path:
        return self._directory / f"{self._host_id}--{server}.tokens"

    def _aad(self, server: str, url: str) -> bytes:
        return f"maka-oauth/v1|{self._host_id}|{server}|{url}".encode()

    def load(self, server: str, url: str) -> dict[str, Any]:
        """The stored record, or ``{}`` when none (or it does not decrypt for this Host/server/URL)."""
        try:
            blob = self._path(server).read_bytes()
        except FileNotFoundError:
            return {}
        try:
            plain = self._aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], self._aad(server, url))
            record = json.loads(plain)
        except (InvalidTag, ValueError):
            log.warning("oauth_tokens_unreadable", extra={"server": server})
            return {}
        return record if isinstance(record, dict) else {}

    def save(self, server: str, url: str, record: dict[str, Any]) -> None:
        """Encrypt and write ``record`` atomically (temporary file, fsync, rename; mode 0600)."""
        self._directory.mkdir(parents=True, exist_ok=True)
        nonce = secrets.token_bytes(NONCE_BYTES)
        blob = nonce + self._aead.encrypt(nonce, json.dumps(record).encode(), self._aad(server, url))
        path = self._path(server)
        temporary = path.with_suffix(f".tmp-{secrets.token_hex(4)}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    def delete(self, server: str) -> None:
        """Forget ``server``'s record."""
        self._path(server).unlink(missing_ok=True)


class StoredTokens:
    """The SDK's ``TokenStorage`` for one server: in memory, written through to a :class:`TokenVault`.

    Without a vault (no key file configured) tokens live in memory only and a restart signs in again.
    ``preregistered`` seeds the client registration (a pre-registered OAuth client from the config).
    """

    def __init__(
        self,
        server: str,
        url: str,
        vault: TokenVault | None,
        *,
        preregistered: OAuthClientInformationFull | None = None,
    ) -> None:
        self._server = server
        self._url = url
        self._vault = vault
        record = vault.load(server, url) if vault is not None else {}
        self._tokens: OAuthToken | None = _model(OAuthToken, record.get("tokens"))
        self._client_info: OAuthClientInformationFull | None = (
            _model(OAuthClientInformationFull, record.get("client_info")) or preregistered
        )
        self._preregistered = preregistered

    @property
    def signed_in(self) -> bool:
        """True when tokens are stored."""
        return self._tokens is not None

    @property
    def client_info(self) -> OAuthClientInformationFull | None:
        """The client registration in use (dynamic, metadata document or pre-registered)."""
        return self._client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens
        self._persist()
        log.info("oauth_tokens_stored", extra={"server": self._server})

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info
        self._persist()

    def clear(self) -> None:
        """Sign out: forget the tokens (and a dynamic registration; a pre-registered client stays)."""
        self._tokens = None
        self._client_info = self._preregistered
        if self._vault is not None:
            self._vault.delete(self._server)

    def _persist(self) -> None:
        if self._vault is None:
            return
        record: dict[str, Any] = {}
        if self._tokens is not None:
            record["tokens"] = self._tokens.model_dump(mode="json", exclude_none=True)
        if self._client_info is not None:
            record["client_info"] = self._client_info.model_dump(mode="json", exclude_none=True)
        self._vault.save(self._server, self._url, record)


def _model(kind: Any, value: object) -> Any:
    if not isinstance(value, dict):
        return None
    try:
        return kind.model_validate(value)
    except ValidationError:
        return None


class SignInFlow:
    """One server's pending sign-in: the SDK's redirect and callback handlers (see module docstring).

    ``on_change`` is awaited whenever :attr:`authorization_url` changes (a prompt appears or goes).
    """

    def __init__(self, server: str, on_change: Callable[[], Awaitable[None]]) -> None:
        self.server = server
        self._on_change = on_change
        self.authorization_url: str | None = None
        """The URL a person must open, while a sign-in is pending."""
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def pending(self) -> bool:
        """True while the flow waits for a redirect."""
        return self.authorization_url is not None

    async def redirect(self, authorization_url: str) -> None:
        """``redirect_handler``: publish the prompt. The URL is never opened or fetched here."""
        states = parse_qs(urlsplit(authorization_url).query).get("state", [])
        self._state = states[0] if states else None
        self._result = asyncio.get_running_loop().create_future()
        self.authorization_url = authorization_url
        log.info("oauth_sign_in_required", extra={"server": self.server})
        await self._on_change()

    async def callback(self) -> AuthorizationCodeResult:
        """``callback_handler``: wait for :meth:`complete`; the prompt goes away either way."""
        assert self._result is not None, "redirect() first"
        try:
            return await self._result
        finally:
            self.authorization_url = None
            self._state = None
            self._result = None
            await self._on_change()

    def complete(self, code: str, state: str, iss: str = "", error: str = "") -> bool:
        """Deliver the authorization response. False (nothing changes) unless ``state`` is the pending one.

        An ``error`` response fails the SDK's flow (the connection retries with backoff and asks again).
        """
        result, expected = self._result, self._state
        if result is None or result.done() or expected is None or not secrets.compare_digest(state, expected):
            return False
        if error:
            result.set_exception(OAuthFlowError(f"the authorization server refused: {error[:64]}"))
        else:
            result.set_result(AuthorizationCodeResult(code=code, state=state, iss=iss or None))
        log.info("oauth_sign_in_completed", extra={"server": self.server, "refused": bool(error)})
        return True


@dataclass(frozen=True)
class OAuthSettings:
    """Host-wide OAuth client settings (from the provider's Settings)."""

    redirect_uri: str
    """Where the authorization server sends the browser back: the web surface's ``/oauth/callback``
    (or the loopback listener of ``maka auth login`` on the same address)."""
    vault: TokenVault | None = None
    client_metadata_url: str | None = None
    """An HTTPS client ID metadata document URL; used as ``client_id`` where the server supports it."""
    client_name: str = "Maka Runtime"


@dataclass(frozen=True)
class PreRegisteredClient:
    """An OAuth client registered with the authorization server beforehand (``mcpServers.<name>.oauth``)."""

    client_id: str
    client_secret: str | None = None
    scope: str | None = None


class ServerAuth:
    """Everything OAuth for one HTTP server: storage, the sign-in flow and the SDK's httpx auth."""

    def __init__(
        self,
        server: str,
        url: str,
        settings: OAuthSettings,
        on_change: Callable[[], Awaitable[None]],
        *,
        client: PreRegisteredClient | None = None,
    ) -> None:
        redirect = AnyUrl(settings.redirect_uri)
        preregistered = None
        if client is not None:
            preregistered = OAuthClientInformationFull(
                client_id=client.client_id,
                client_secret=client.client_secret,
                redirect_uris=[redirect],
                token_endpoint_auth_method="client_secret_basic" if client.client_secret else "none",
            )
        self.storage = StoredTokens(server, url, settings.vault, preregistered=preregistered)
        self.flow = SignInFlow(server, on_change)
        self.provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name=settings.client_name,
                redirect_uris=[redirect],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=client.scope if client is not None else None,
            ),
            storage=self.storage,
            redirect_handler=self.flow.redirect,
            callback_handler=self.flow.callback,
            client_metadata_url=settings.client_metadata_url,
        )

    def sign_out(self) -> None:
        """Forget the stored tokens; the next request signs in again."""
        self.storage.clear()
        self.provider.context.clear_tokens()
        self.provider.context.client_info = self.storage.client_info
