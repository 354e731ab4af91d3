"""People sign in to the web page with OpenID Connect (docs/security.md, "Sign-in for people").

Authorization code flow with PKCE (S256) through Authlib's ``AsyncOAuth2Client``; the issuer's endpoints come
from discovery and its ID tokens are verified by :class:`services.core.jwt_auth.JwtVerifier` (JWKS with
refetch on an unknown ``kid``, ``iss``, ``aud`` = the client id, ``exp`` with clock skew, the ``nonce`` of
this sign-in). Routes (public: the person is not signed in yet):

- ``GET /oidc/login?next=/`` → 303 to the issuer's authorization endpoint. ``next`` (a path of this origin,
  :func:`return_to`; the sign-in page hands on the link target it was opened on,
  ``/#/interaction/<id>``, which the browser never sends) is where the callback returns. The sign-in's
  ``state``, ``nonce``, PKCE verifier and ``next`` travel in a short-lived encrypted cookie
  (``maka_oidc_pending``, SameSite=Lax, path ``/oidc/callback``), so any replica can finish the sign-in another
  started.
- ``GET /oidc/callback?code&state[&iss]`` → checks the state (constant time) and ``iss`` (RFC 9207), exchanges
  the code with the verifier, verifies the ID token, and requires the ``surface`` role
  (``MAKA_OIDC_ROLES`` of the person's groups); then sets the session cookie and sends the browser to the
  page with a same-site navigation (a ``meta refresh`` page: a redirect chain that began at the issuer would
  not carry the SameSite=Strict cookie).
- ``GET /oidc/signed-out`` → where RP-initiated logout returns.

The session cookie ``maka_person`` (HttpOnly, SameSite=Strict, ``Secure`` over https) holds the person's
name, a random session id and an expiry, encrypted and authenticated (JWE ``dir`` + A256GCM, joserfc) with a
key derived from ``MAKA_WEB_SECRET_FILE``: every replica that shares the file reads it, nothing is stored
server-side, and the browser can neither read nor forge it. No token of the issuer is kept: the page acts
for the person with its own service token and names them in ``x-maka-acts-for``
(:data:`services.core.auth.ACTS_FOR_HEADER`). Tokens, codes and verifiers are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import errors as jose_errors
from joserfc import jwe
from joserfc.jwk import OctKey
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from services.core.auth import MAX_GROUPS, Role
from services.core.jwt_auth import JwtRefused, JwtVerifier, OidcConfig, Refusal
from surfaces.web.settings import WebSettings

log = logging.getLogger("maka.web.oidc")

SESSION_COOKIE = "maka_person"
PENDING_COOKIE = "maka_oidc_pending"
CALLBACK_PATH = "/oidc/callback"
PENDING_SECONDS = 600
"""How long a started sign-in may take at the issuer."""
_JWE_HEADER = {"alg": "dir", "enc": "A256GCM"}

MAX_RETURN_TO_CHARS = 2048


def return_to(target: str | None) -> str:
    """``target`` when it is a path of this origin to return to after sign-in (``/``, ``/#/interaction/ID``, the
    link a notification carries), else ``/``: never another origin (``//host``, a backslash, a scheme), nor a
    control character a browser would drop (a tab between two slashes would make ``//host``)."""
    if not target or len(target) > MAX_RETURN_TO_CHARS or not target.isprintable() or "\\" in target:
        return "/"
    if not target.startswith("/") or target.startswith("//"):
        return "/"
    parts = urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target


@dataclass(frozen=True)
class SignedIn:
    """A person signed in to this page: their name (the configured claim) and this sign-in's random id."""

    name: str
    sid: str
    groups: tuple[str, ...] = ()
    """The person's groups (their ID token's groups claim at sign-in), stated to the Interaction service with
    :data:`services.core.auth.ACTS_FOR_GROUPS_HEADER` for approver policies."""
    issuer: str = ""
    """The OpenID Connect issuer the person signed in at (the page's ``MAKA_OIDC_ISSUER``), stated with
    :data:`services.core.auth.ACTS_FOR_ISSUER_HEADER` so history labels their answers an OpenID Connect person's."""


class SealedCookies:
    """Encrypt-and-authenticate small JSON payloads with a key derived from the shared web secret."""

    def __init__(self, secret: bytes) -> None:
        derived = hmac.new(secret, b"maka-web-oidc-cookie-v1", hashlib.sha256).digest()
        self._key = OctKey.import_key(derived)

    def seal(self, purpose: str, payload: dict[str, Any], lifetime: float) -> str:
        body = {**payload, "purpose": purpose, "exp": time.time() + lifetime}
        return jwe.encrypt_compact(_JWE_HEADER, json.dumps(body).encode(), self._key)

    def open(self, purpose: str, value: str) -> dict[str, Any] | None:
        """The payload of ``value`` sealed for ``purpose``, or None (forged, other key, expired, other purpose)."""
        if not value or len(value) > 4096:
            return None
        try:
            plaintext = jwe.decrypt_compact(value, self._key, algorithms=["dir", "A256GCM"]).plaintext
            body = json.loads(plaintext or b"")
        except (jose_errors.JoseError, ValueError, TypeError):
            return None
        if not isinstance(body, dict) or body.get("purpose") != purpose:
            return None
        expiry = body.get("exp")
        if not isinstance(expiry, int | float) or expiry < time.time():
            return None
        return body


class OidcSignIn:
    """The web page's OpenID Connect client (see the module docstring)."""

    def __init__(self, settings: WebSettings, secret: bytes) -> None:
        config = OidcConfig.from_settings(settings, audiences=[settings.oidc_client_id])
        if config is None or not settings.oidc_client_id:
            raise ValueError("OIDC sign-in needs MAKA_OIDC_ISSUER and MAKA_OIDC_CLIENT_ID")
        self.settings = settings
        self.verifier = JwtVerifier(config)
        self.cookies = SealedCookies(secret)
        self.client_secret = settings.oidc_client_secret()

    def person(self, request: Request) -> SignedIn | None:
        """The person this request's session cookie names, or None."""
        body = self.cookies.open("session", request.cookies.get(SESSION_COOKIE, ""))
        if body is None or not isinstance(body.get("name"), str) or not isinstance(body.get("sid"), str):
            return None
        groups = body.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            groups = []
        return SignedIn(name=body["name"], sid=body["sid"], groups=tuple(groups), issuer=self.verifier.config.issuer)

    def _origin(self, request: Request) -> str:
        return self.settings.web_public_origin or str(request.base_url).rstrip("/")

    def _client(self, request: Request) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.settings.oidc_client_id,
            client_secret=self.client_secret or None,
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
            scope=self.settings.oidc_scopes,
            redirect_uri=self._origin(request) + CALLBACK_PATH,
            code_challenge_method="S256",
            timeout=10.0,
        )

    async def login(self, request: Request) -> Response:
        """``GET /oidc/login``: start a sign-in at the issuer."""
        try:
            metadata = await self.verifier.keys.metadata()
        except JwtRefused:
            return _page(503, "Sign-in is not available", "The identity provider did not answer; try again.")
        state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), generate_token(64)
        target = return_to(request.query_params.get("next"))
        async with self._client(request) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier
            )
        response = RedirectResponse(url, status_code=303)
        pending = {"state": state, "nonce": nonce, "verifier": verifier, "next": target}
        response.set_cookie(
            PENDING_COOKIE,
            self.cookies.seal("pending", pending, PENDING_SECONDS),
            max_age=PENDING_SECONDS,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
            path=CALLBACK_PATH,
        )
        log.info("web.oidc_sign_in_started")
        return response

    async def callback(self, request: Request) -> Response:
        """``GET /oidc/callback``: finish the sign-in this browser started (see the module docstring)."""
        query = request.query_params
        pending = self.cookies.open("pending", request.cookies.get(PENDING_COOKIE, ""))
        if pending is None or not hmac.compare_digest(str(pending["state"]).encode(), query.get("state", "").encode()):
            log.info("web.oidc_sign_in_refused", extra={"why": "state"})
            return self._refused(400, "This sign-in is not pending", "Start the sign-in again from the Maka page.")
        if query.get("error"):
            log.info("web.oidc_sign_in_refused", extra={"why": "issuer_error"})
            return self._refused(403, "Sign-in was refused", "The identity provider refused the sign-in.")
        if "iss" in query and query["iss"] != self.verifier.config.issuer:
            log.info("web.oidc_sign_in_refused", extra={"why": "iss"})
            return self._refused(400, "Sign-in was refused", "The answer came from another identity provider.")
        try:
            metadata = await self.verifier.keys.metadata()
            async with self._client(request) as client:
                token = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=query.get("code", ""),
                    code_verifier=pending["verifier"],
                )
            id_token = token.get("id_token")
            if not isinstance(id_token, str):
                raise JwtRefused(Refusal.MALFORMED)
            claims = await self.verifier.claims(
                id_token, audiences=[self.settings.oidc_client_id], nonce=str(pending["nonce"])
            )
            principal = self.verifier.principal(claims)
        except JwtRefused as refused:
            log.info("web.oidc_sign_in_refused", extra={"why": refused.refusal.value})
            if refused.refusal is Refusal.EMAIL_NOT_VERIFIED:
                return self._refused(
                    403, "Sign-in was refused", "Your email address is not verified at the identity provider."
                )
            return self._refused(403, "Sign-in was refused", "The identity provider's answer did not verify.")
        except Exception as error:  # the code exchange: network, an OAuth error answer
            log.info("web.oidc_sign_in_refused", extra={"why": "token_exchange", "error": type(error).__name__})
            return self._refused(502, "Sign-in could not be completed", "The identity provider did not answer.")
        if not principal.has_role(Role.SURFACE):
            log.info("web.oidc_sign_in_refused", extra={"why": "no_surface_role"})
            return self._refused(403, "Not allowed", f"{principal.name} may not use this page (no surface role).")
        target = return_to(str(pending.get("next") or "/"))
        page = _page(200, "Signed in", f"Signed in as {principal.name}.", refresh_to=target)
        session = {
            "name": principal.name,
            "sid": secrets.token_urlsafe(16),
            "groups": sorted(principal.groups)[:MAX_GROUPS],
        }
        page.set_cookie(
            SESSION_COOKIE,
            self.cookies.seal("session", session, self.settings.oidc_session_seconds),
            max_age=self.settings.oidc_session_seconds,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        page.delete_cookie(PENDING_COOKIE, path=CALLBACK_PATH, httponly=True, samesite="lax")
        log.info("web.oidc_signed_in", extra={"person": principal.name})
        return page

    def _refused(self, status: int, title: str, text: str) -> Response:
        page = _page(status, title, text)
        page.delete_cookie(PENDING_COOKIE, path=CALLBACK_PATH, httponly=True, samesite="lax")
        return page

    async def logout_url(self, request: Request) -> str | None:
        """The issuer's RP-initiated logout URL returning to ``/oidc/signed-out``, or None when it has none."""
        try:
            endpoint = (await self.verifier.keys.metadata()).get("end_session_endpoint")
        except JwtRefused:
            return None
        if not isinstance(endpoint, str) or not endpoint:
            return None
        query = urlencode(
            {
                "client_id": self.settings.oidc_client_id,
                "post_logout_redirect_uri": self._origin(request) + "/oidc/signed-out",
            }
        )
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def logout(self, request: Request) -> Response:
        """The answer to ``POST /logout`` of a signed-in person: a page that moves on to the issuer's logout (a
        meta refresh: the page's CSP ``form-action 'self'`` stops a form's redirect to another origin), or to
        ``/oidc/signed-out`` when the issuer has no ``end_session_endpoint``. The caller deletes the cookie."""
        target = await self.logout_url(request) or "/oidc/signed-out"
        return _page(200, "Signing out", "Signing you out at the identity provider…", refresh_to=target)

    async def signed_out(self, request: Request) -> Response:
        """``GET /oidc/signed-out``."""
        return _page(200, "Signed out", "You are signed out of Maka.", link=("/oidc/login", "Sign in again"))


def _page(
    status: int, title: str, text: str, *, refresh_to: str | None = None, link: tuple[str, str] | None = None
) -> HTMLResponse:
    refresh = f'<meta http-equiv="refresh" content="0;url={html.escape(refresh_to)}">' if refresh_to else ""
    anchor = f'<p><a href="{html.escape(link[0])}">{html.escape(link[1])}</a></p>' if link else ""
    if refresh_to:
        anchor = f'<p><a href="{html.escape(refresh_to)}">Continue</a></p>'
    body = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>{refresh}<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="/static/app.css"></head><body><main class="callback">'
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{anchor}</main></body></html>"
    )
    return HTMLResponse(
        body, status_code=status, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    )
