"""People sign in from the terminal: ``maka login`` / ``maka logout`` and the stored sign-in every ``maka`` command
and the TUI present as their bearer token (docs/security.md, "Sign-in for people").

:func:`login` runs the OpenID Connect authorization code flow with PKCE (S256) for a native app (RFC 8252): a
one-shot listener on ``127.0.0.1`` at an ephemeral port receives the redirect; Authlib's ``AsyncOAuth2Client``
builds the authorization URL and exchanges the code (no OAuth of ours); the sign-in's ``state`` is compared in
constant time, ``iss`` checked when the issuer returns it (RFC 9207), and the ID token verified by
:class:`services.core.jwt_auth.JwtVerifier` (the issuer's JWKS, ``iss``, ``aud`` = the CLI's client id, ``exp``,
and this sign-in's ``nonce``).

The ID token is what the gRPC services verify (``aud`` = the client id, which ``MAKA_OIDC_AUDIENCES`` must list),
so it is what a command sends as ``authorization: Bearer``; access tokens are often opaque or meant for another
audience. :class:`Credentials` keeps one sign-in per issuer in ``$XDG_CONFIG_HOME/maka/credentials.json`` (mode
0600, in a 0700 folder; ``MAKA_CREDENTIALS_FILE`` moves it). :func:`current` hands out the stored ID token,
renewed with the refresh token (Authlib) once it has expired; a sign-in that cannot be renewed raises
:class:`SignInExpired` ("run `maka login`"). :func:`logout` forgets the sign-in and, best effort, revokes the
refresh token and ends the session at the issuer (RP-initiated logout, POST). Tokens, codes and verifiers are
never printed or logged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hmac
import json
import logging
import os
import secrets
import time
import webbrowser
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.core.jwt_auth import JwtRefused, JwtVerifier, OidcConfig
from services.core.messages import person_sign_in_expired
from services.core.settings import OidcSettings
from surfaces.common.callback_page import answer_page
from surfaces.common.target import TOKEN_VARIABLES, owner_token_env

log = logging.getLogger("maka.cli.login")

CALLBACK_PATH = "/callback"
EXPIRY_MARGIN_SECONDS = 30.0
"""A stored ID token this close to its ``exp`` counts as expired (it could expire on its way)."""
HTTP_TIMEOUT_SECONDS = 10.0


class LoginSettings(OidcSettings):
    """How ``maka login`` signs a person in (the issuer is ``MAKA_OIDC_ISSUER``, which also says whose sign-in every
    ``maka`` command presents)."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    oidc_cli_client_id: str = ""
    """The issuer's client id of the ``maka`` command (a public client, redirect URI ``http://127.0.0.1/callback``
    with any port, RFC 8252). Its ID tokens carry it as ``aud``: list it in the services' ``MAKA_OIDC_AUDIENCES``."""
    oidc_cli_scopes: str = "openid email profile"
    """Scopes ``maka login`` asks for: they must yield the name and groups claims, and a refresh token (some
    issuers want ``offline_access`` for that)."""
    credentials_file: Path | None = None
    """Where ``maka login`` keeps sign-ins (mode 0600); unset = ``$XDG_CONFIG_HOME/maka/credentials.json``
    (``~/.config/maka/credentials.json``)."""
    login_timeout_seconds: float = Field(default=300.0, gt=0, le=3600)
    """How long ``maka login`` waits for the browser to come back."""


class LoginFailed(Exception):
    """``maka login`` did not sign anyone in; ``code`` is the stable reason, ``str()`` says why (never a token)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SignInExpired(Exception):
    """The stored sign-in has expired and could not be renewed; ``str()`` says to run ``maka login``."""


# --- the credentials file -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignIn:
    """One person's sign-in at one issuer, as stored. ``person`` is the name claim; ``expires_at`` the ID token's
    ``exp`` (seconds since the epoch)."""

    issuer: str
    client_id: str
    person: str
    subject: str
    id_token: str
    refresh_token: str
    expires_at: float
    signed_in_at: float

    def expired(self, now: float | None = None) -> bool:
        """True when the ID token is expired or about to (:data:`EXPIRY_MARGIN_SECONDS`)."""
        return (time.time() if now is None else now) >= self.expires_at - EXPIRY_MARGIN_SECONDS

    def describe(self, now: float | None = None) -> dict[str, Any]:
        """What ``maka status`` shows: who, where, until when; never a token."""
        return {
            "person": self.person,
            "issuer": self.issuer,
            "clientId": self.client_id,
            "expiresAt": self.expires_at,
            "expired": self.expired(now),
            "renewable": bool(self.refresh_token),
        }


def default_credentials_path() -> Path:
    """``$XDG_CONFIG_HOME/maka/credentials.json`` (``~/.config`` when the variable is unset or relative)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "maka" / "credentials.json"


class Credentials:
    """The credentials file: ``{"version": 1, "sign_ins": {issuer: SignIn}}``, written atomically with mode 0600 in
    a 0700 folder. :meth:`locked` serialises a read-renew-write across ``maka`` processes (``flock``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def from_settings(cls, settings: LoginSettings) -> Credentials:
        return cls(settings.credentials_file or default_credentials_path())

    def load(self) -> dict[str, SignIn]:
        """Every stored sign-in by issuer (none when the file is missing or unreadable as ours)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            log.warning("login.credentials_unreadable", extra={"path": str(self.path)})
            return {}
        entries = data.get("sign_ins") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        known = set(SignIn.__dataclass_fields__)
        found: dict[str, SignIn] = {}
        for issuer, entry in entries.items():
            if isinstance(entry, dict) and known <= set(entry):
                with contextlib.suppress(TypeError, ValueError):
                    found[issuer] = SignIn(**{name: entry[name] for name in known})
        return found

    def get(self, issuer: str) -> SignIn | None:
        return self.load().get(issuer)

    def put(self, sign_in: SignIn) -> None:
        entries = self.load()
        entries[sign_in.issuer] = sign_in
        self._write(entries)

    def remove(self, issuer: str) -> SignIn | None:
        entries = self.load()
        removed = entries.pop(issuer, None)
        if removed is not None:
            self._write(entries)
        return removed

    def _write(self, entries: dict[str, SignIn]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        body = json.dumps({"version": 1, "sign_ins": {k: asdict(v) for k, v in entries.items()}}, indent=2)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(body)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on ``<file>.lock`` (two commands renewing at once would spend one refresh token
        twice)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


# --- the sign-in ------------------------------------------------------------------------------------------------


def _verifier(issuer: str, client_id: str, settings: OidcSettings) -> JwtVerifier:
    config = OidcConfig(
        issuer=issuer,
        audiences=frozenset({client_id}),
        name_claim=settings.oidc_name_claim,
        groups_claim=settings.oidc_groups_claim,
        clock_skew_seconds=settings.oidc_clock_skew_seconds,
    )
    return JwtVerifier(config)


def _client(client_id: str, *, scope: str = "", redirect_uri: str | None = None) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=client_id,
        token_endpoint_auth_method="none",  # a native app is a public client (RFC 8252 8.4); PKCE binds the code
        scope=scope or None,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=HTTP_TIMEOUT_SECONDS,
    )


class _Redirect:
    """The one-shot loopback listener (RFC 8252 7.3): the first request to ``/callback`` that carries this
    sign-in's ``state`` is the answer; anything else gets 400/404 and changes nothing. The browser's page waits
    for :meth:`finish` (the outcome of the code exchange)."""

    def __init__(self, state: str) -> None:
        self._state = state
        self.answer: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        self._outcome: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def finish(self, status: int, text: str) -> None:
        if not self._outcome.done():
            self._outcome.set_result((status, text))

    async def close(self) -> None:
        self.finish(500, "The sign-in ended.")
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_page(reader, writer, self._respond)

    async def _respond(self, method: str, target: str) -> tuple[int, str]:
        parts = urlsplit(target)
        query = {name: values[0] for name, values in parse_qs(parts.query).items() if values}
        if method != "GET" or parts.path != CALLBACK_PATH:
            return 404, "Not found."
        if self.answer.done() or not hmac.compare_digest(query.get("state", "").encode(), self._state.encode()):
            return 400, "This sign-in is not pending."
        self.answer.set_result(query)
        return await asyncio.wait_for(asyncio.shield(self._outcome), HTTP_TIMEOUT_SECONDS * 3)


def open_browser(url: str) -> bool:
    """Open ``url`` in the user's browser when one is available; False otherwise (the URL is printed anyway)."""
    try:
        return webbrowser.get().open(url)
    except webbrowser.Error:
        return False


async def _metadata(verifier: JwtVerifier) -> dict[str, Any]:
    try:
        metadata = await verifier.keys.metadata()
    except JwtRefused:
        raise LoginFailed("ISSUER_UNREACHABLE", f"{verifier.config.issuer} did not answer OpenID discovery") from None
    if not isinstance(metadata.get("authorization_endpoint"), str) or not isinstance(
        metadata.get("token_endpoint"), str
    ):
        raise LoginFailed("ISSUER_UNREACHABLE", f"{verifier.config.issuer}'s discovery names no code flow endpoints")
    return metadata


async def login(
    settings: LoginSettings,
    *,
    issuer: str,
    client_id: str,
    show_url: Callable[[str], None],
    browser: Callable[[str], bool] | None = open_browser,
    timeout: float | None = None,
) -> SignIn:
    """Sign a person in at ``issuer`` as ``client_id`` (see the module docstring) and store the sign-in.

    ``show_url`` gets the authorization URL (always); ``browser`` opens it (None: never). Raises
    :class:`LoginFailed` (``ISSUER_UNREACHABLE``, ``TIMED_OUT``, ``REFUSED``, ``NOT_VERIFIED``)."""
    verifier = _verifier(issuer, client_id, settings)
    metadata = await _metadata(verifier)
    state, nonce, code_verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), generate_token(64)
    redirect = _Redirect(state)
    await redirect.start()
    try:
        async with _client(client_id, scope=settings.oidc_cli_scopes, redirect_uri=redirect.redirect_uri) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"], state=state, nonce=nonce, code_verifier=code_verifier
            )
            show_url(url)
            if browser is not None:
                browser(url)
            wait = settings.login_timeout_seconds if timeout is None else timeout
            try:
                answer = await asyncio.wait_for(asyncio.shield(redirect.answer), wait)
            except TimeoutError:
                raise LoginFailed("TIMED_OUT", f"nobody finished the sign-in within {wait:g} s") from None
            try:
                sign_in = await _finish(client, verifier, metadata, answer, code_verifier=code_verifier, nonce=nonce)
            except LoginFailed as failed:
                redirect.finish(403, f"Sign-in failed: {failed}")
                raise
            redirect.finish(200, f"Signed in to Maka as {sign_in.person}. You can close this tab.")
    finally:
        await redirect.close()
    credentials = Credentials.from_settings(settings)
    with credentials.locked():
        credentials.put(sign_in)
    log.info("login.signed_in", extra={"person": sign_in.person, "issuer": issuer})
    return sign_in


async def _finish(
    client: AsyncOAuth2Client,
    verifier: JwtVerifier,
    metadata: dict[str, Any],
    answer: dict[str, str],
    *,
    code_verifier: str,
    nonce: str,
) -> SignIn:
    issuer = verifier.config.issuer
    if answer.get("error"):
        raise LoginFailed("REFUSED", f"{issuer} refused the sign-in ({answer['error'][:64]})")
    if "iss" in answer and answer["iss"] != issuer:
        raise LoginFailed("REFUSED", "the answer came from another issuer")
    try:
        token = await client.fetch_token(
            metadata["token_endpoint"],
            grant_type="authorization_code",
            code=answer.get("code", ""),
            code_verifier=code_verifier,
        )
    except (AuthlibBaseError, httpx.HTTPError, ValueError) as error:
        raise LoginFailed("REFUSED", f"{issuer} did not exchange the code ({type(error).__name__})") from None
    return await _signed_in(verifier, token, nonce=nonce)


async def _signed_in(
    verifier: JwtVerifier, token: dict[str, Any], *, nonce: str | None, previous: SignIn | None = None
) -> SignIn:
    """The :class:`SignIn` of a token response whose ID token verifies (and, on a renewal, names the same person)."""
    client_id = next(iter(verifier.config.audiences))
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise LoginFailed("NOT_VERIFIED", f"{verifier.config.issuer} sent no ID token (is `openid` among the scopes?)")
    try:
        claims = await verifier.claims(id_token, audiences=[client_id], nonce=nonce)
        principal = verifier.principal(claims)
    except JwtRefused as refused:
        raise LoginFailed("NOT_VERIFIED", f"the ID token did not verify: {refused}") from None
    subject = str(claims.get("sub", ""))
    if previous is not None and subject != previous.subject:
        raise LoginFailed("NOT_VERIFIED", "the renewed ID token names another person")
    refresh = token.get("refresh_token")
    return SignIn(
        issuer=verifier.config.issuer,
        client_id=client_id,
        person=principal.name,
        subject=subject,
        id_token=id_token,
        refresh_token=refresh if isinstance(refresh, str) else (previous.refresh_token if previous else ""),
        expires_at=float(claims["exp"]),
        signed_in_at=previous.signed_in_at if previous else time.time(),
    )


async def renew(settings: OidcSettings, sign_in: SignIn) -> SignIn:
    """``sign_in`` with a fresh ID token from its refresh token. Raises :class:`SignInExpired` when the issuer
    does not renew it (no refresh token, refused, no ID token in the answer, or one that does not verify)."""
    expired = SignInExpired(person_sign_in_expired(sign_in.person, sign_in.issuer))
    if not sign_in.refresh_token:
        raise expired
    verifier = _verifier(sign_in.issuer, sign_in.client_id, settings)
    try:
        metadata = await _metadata(verifier)
        async with _client(sign_in.client_id) as client:
            token = await client.refresh_token(metadata["token_endpoint"], refresh_token=sign_in.refresh_token)
        renewed = await _signed_in(verifier, dict(token), nonce=None, previous=sign_in)
    except (LoginFailed, AuthlibBaseError, httpx.HTTPError, ValueError) as error:
        log.info("login.renew_failed", extra={"issuer": sign_in.issuer, "error": type(error).__name__})
        raise expired from None
    if renewed.expired():
        raise expired
    log.info("login.renewed", extra={"person": renewed.person, "issuer": renewed.issuer})
    return renewed


async def current(settings: LoginSettings, issuer: str, *, now: float | None = None) -> SignIn | None:
    """The stored sign-in at ``issuer`` with an ID token that has not expired (renewed and stored when it had), or
    None when nobody signed in there. Raises :class:`SignInExpired`."""
    credentials = Credentials.from_settings(settings)
    if credentials.get(issuer) is None:
        return None
    with credentials.locked():
        sign_in = credentials.get(issuer)  # again, under the lock: another command may have renewed it
        if sign_in is None:
            return None
        if not sign_in.expired(now):
            return sign_in
        renewed = await renew(settings, sign_in)
        credentials.put(renewed)
        return renewed


@dataclass(frozen=True)
class SignedOut:
    """What :func:`logout` did: the sign-in it forgot, and whether the issuer was told (revocation, end session)."""

    sign_in: SignIn
    revoked: bool
    ended_session: bool


async def logout(settings: LoginSettings, issuer: str) -> SignedOut | None:
    """Forget the sign-in at ``issuer`` (None when there was none); then, best effort, revoke its refresh token
    (RFC 7009, when discovery lists ``revocation_endpoint``) and end the session at the issuer (RP-initiated logout
    with ``id_token_hint`` in a POST body, when it lists ``end_session_endpoint``)."""
    credentials = Credentials.from_settings(settings)
    with credentials.locked():
        removed = credentials.remove(issuer)
    if removed is None:
        return None
    revoked = ended = False
    verifier = _verifier(issuer, removed.client_id, settings)
    with contextlib.suppress(JwtRefused):
        metadata = await verifier.keys.metadata()
        revocation, end_session = metadata.get("revocation_endpoint"), metadata.get("end_session_endpoint")
        if isinstance(revocation, str) and removed.refresh_token:
            with contextlib.suppress(AuthlibBaseError, httpx.HTTPError, ValueError):
                async with _client(removed.client_id) as client:
                    response = await client.revoke_token(
                        revocation, token=removed.refresh_token, token_type_hint="refresh_token"
                    )
                    revoked = response.status_code == 200
        if isinstance(end_session, str):
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False) as http:
                    response = await http.post(
                        end_session, data={"id_token_hint": removed.id_token, "client_id": removed.client_id}
                    )
                    ended = response.status_code < 400
    log.info("login.signed_out", extra={"person": removed.person, "issuer": issuer})
    return SignedOut(removed, revoked, ended)


# --- what commands send -------------------------------------------------------------------------------------------


def token_env(args: argparse.Namespace, settings: LoginSettings | None = None) -> dict[str, str]:
    """The token variables a ``maka`` command should see, for each of :data:`TOKEN_VARIABLES` that is unset: the ID
    token of the person signed in at ``MAKA_OIDC_ISSUER`` (the issuer the command's services trust), else the local
    stack's owner token (:func:`surfaces.common.target.owner_token_env`). Raises :class:`SignInExpired`."""
    unset = [name for name in TOKEN_VARIABLES if not os.environ.get(name)]
    if not unset:
        return {}
    person = signed_in_token(settings)
    if person:
        return dict.fromkeys(unset, person)
    return owner_token_env(args)


def signed_in_token(settings: LoginSettings | None = None) -> str | None:
    """The ID token of the person signed in at ``MAKA_OIDC_ISSUER`` (renewed when it had expired), or None when no
    issuer is configured or nobody signed in there. Raises :class:`SignInExpired`. For synchronous callers (the
    ``maka`` entry point, before the command's own event loop)."""
    settings = settings or LoginSettings()
    if not settings.oidc_issuer:
        return None
    sign_in = asyncio.run(current(settings, settings.oidc_issuer))
    return sign_in.id_token if sign_in is not None else None


__all__ = [
    "Credentials",
    "LoginFailed",
    "LoginSettings",
    "SignIn",
    "SignInExpired",
    "SignedOut",
    "current",
    "login",
    "logout",
    "renew",
    "signed_in_token",
    "token_env",
]
