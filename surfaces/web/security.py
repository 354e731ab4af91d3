"""Access control and browser hardening of the web surface (docs/design.md#tokens, docs/security.md).

- **Headers** on every response: a strict Content-Security-Policy (``default-src 'self'``, no
  ``unsafe-inline``, no framing), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``.
- **Surface token** (when configured): ``Authorization: Bearer <token>``, or the cookie set by the
  ``/login`` step (HttpOnly, SameSite=Strict, persistent for ``MAKA_WEB_SESSION_SECONDS``; its value is
  ``<expiry>.<HMAC>`` under a key derived from ``MAKA_WEB_SESSION_KEY_FILE`` when set, so a sign-in outlives a new
  token, else from the token; never the token; the server refuses it once expired).
  Unauthenticated ``/api/*`` gets 401 JSON (``UNAUTHENTICATED``); pages redirect to ``/login``. A page
  ``GET`` carrying the token as ``?token=`` (the URL ``maka up`` prints, as Jupyter's) gets the cookie and a
  redirect to the same path without the query, so the token leaves the address bar.
- **CSRF**: every unsafe request authenticated by cookie or by nothing (no token configured) must
  come from this origin (``Origin`` equal to the configured public origin, else to the request's own
  origin as the trusted proxy headers describe it, or, when the browser sends none or ``null``,
  ``Sec-Fetch-Site: same-origin``); ``/api/`` POSTs must also carry ``X-Maka-CSRF`` (from
  ``GET /api/session``) and a JSON body. Bearer-authenticated requests are not ambient credentials and
  skip the origin check. The CSRF token is an HMAC of a shared secret (``MAKA_WEB_SECRET_FILE``), so
  every replica of the surface accepts the token any replica handed out; without a secret it is random
  per process.
- **Host allow-list** (a DNS rebinding defence, :func:`allowed_hosts`): on any loopback bind (``127.0.0.0/8``,
  ``::1``, ``localhost``) only the loopback names, the bound address and the public origin's host are served;
  an ``Origin`` must then match that allowed ``Host``. A non-loopback bind needs the surface token
  (``surfaces/web/settings.py``), which a rebinding page never holds.
- **Login rate limit** (:class:`LoginLimiter`): failed sign-ins with the surface token (``POST /login`` and a
  page ``GET`` with a wrong ``?token=``) are a token bucket per client (:func:`surfaces.web.peer.login_client`:
  per local user, by the uid owning the client's socket, on loopback; per address otherwise). An empty bucket
  is ``429`` with ``Retry-After``, answered before the token is compared, so guesses stay bounded; another local
  user spends only their own bucket, never the owner's.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from surfaces.web.peer import login_client

if TYPE_CHECKING:
    from surfaces.web.oidc import OidcSignIn, SignedIn

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The page's CSP: only same-origin static files, no inline script or style, no framing."""

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

COOKIE_NAME = "maka_surface"
DEFAULT_SESSION_SECONDS = 14 * 24 * 3600
"""How long a sign-in with the surface token lasts unless ``MAKA_WEB_SESSION_SECONDS`` says otherwise."""
CSRF_HEADER = "X-Maka-CSRF"
_PUBLIC_PATHS = ("/login", "/static/", "/oauth/callback", "/oidc/")
"""``/oauth/callback`` is reached by the authorization server's redirect, a cross-site navigation that
carries no SameSite=Strict cookie; what protects it is the unguessable OAuth ``state`` the broker matches.
``/oidc/`` is where people sign in (:mod:`surfaces.web.oidc`): its callback is protected the same way, by
the ``state`` in the sign-in's own encrypted cookie."""
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
"""Host names every loopback bind serves."""


def allowed_hosts(bind_host: str, public_origin: str, *, loopback: bool) -> list[str]:
    """The ``Host`` names the surface serves: on a loopback bind the loopback names, the bound address itself
    (``127.0.0.2``) and the public origin's host; any host on a non-loopback bind (signed in)."""
    if not loopback:
        return ["*"]
    hosts = [*LOOPBACK_NAMES, bind_host.lower()]
    public_host = urlsplit(public_origin).hostname if public_origin else None
    if public_host:
        hosts.append(public_host)
    return list(dict.fromkeys(hosts))


class LoginLimiter:
    """Failed logins per client (a local user or an address, :func:`surfaces.web.peer.login_client`): a token
    bucket of ``per_minute`` attempts refilled over a minute.

    At most ``max_clients`` clients are remembered (the least recently seen is forgotten first), so a flood of
    addresses cannot grow memory without bound.
    """

    def __init__(self, per_minute: int, *, max_clients: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, client: str, now: float) -> float:
        tokens, since = self._buckets.get(client, (self.capacity, now))
        return min(self.capacity, tokens + (now - since) * self.rate)

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again (0: it may try now)."""
        level = self._level(client, self._clock())
        return 0 if level >= 1 else max(1, math.ceil((1 - level) / self.rate))

    def failed(self, client: str) -> None:
        """Take one attempt from ``client``'s bucket."""
        now = self._clock()
        self._buckets[client] = (max(0.0, self._level(client, now) - 1), now)
        self._buckets.move_to_end(client)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)

    def refusal(self, request: Request) -> Response | None:
        """``429 RATE_LIMITED`` with ``Retry-After`` while ``request``'s client has no attempt left, else None."""
        wait = self.retry_after(login_client(request.scope))
        if not wait:
            return None
        limited = error_json(429, "RATE_LIMITED", f"too many failed logins; try again in {wait} s")
        limited.headers["Retry-After"] = str(wait)
        return limited

    def failed_request(self, request: Request) -> None:
        """Take one attempt from the bucket of ``request``'s client."""
        self.failed(login_client(request.scope))


def error_json(status: int, reason: str, message: str) -> JSONResponse:
    """The ``/api/`` error body: ``{"error": {"reason", "message", "violations": []}}``."""
    return JSONResponse({"error": {"reason": reason, "message": message, "violations": []}}, status_code=status)


class Guard:
    """Decides who may use the surface: the surface token (login cookie or bearer) and, with ``people``, the
    session cookie of a person signed in with OpenID Connect. No token and no ``people`` means open (loopback
    default)."""

    def __init__(
        self,
        token: str,
        *,
        secret: bytes | None = None,
        session_key: bytes | None = None,
        session_seconds: int = DEFAULT_SESSION_SECONDS,
        public_origin: str = "",
        people: OidcSignIn | None = None,
        limiter: LoginLimiter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token = token
        self.limiter = limiter
        """Failed sign-ins with the token, per client (``POST /login`` and ``?token=``)."""
        self.public_origin = public_origin
        self.people = people
        self.session_seconds = session_seconds
        """How long a sign-in with the token lasts: the login cookie's ``Max-Age`` and the expiry signed into it."""
        self._clock = clock
        self._person_csrf_key = hmac.new(secret or secrets.token_bytes(32), b"maka-web-csrf-person-v1", hashlib.sha256)
        # What a login cookie is signed with: the session key when one is kept (``maka up``: STATE/web-session.key,
        # so a sign-in outlives the per-run token), else the token itself (changing the token signs everyone out).
        self._binding = ""
        if session_key:
            self._binding = hmac.new(session_key, b"maka-web-session-v2", hashlib.sha256).hexdigest()
        elif token:
            self._binding = hmac.new(token.encode(), b"maka-web-session-v1", hashlib.sha256).hexdigest()
        # One token per deployment (secret) and login key (the binding): replicas agree without
        # sharing state, and rotating the secret or what signs the logins invalidates every old one.
        self.csrf_token = (
            hmac.new(secret, b"maka-web-csrf-v1|" + self._binding.encode(), hashlib.sha256).hexdigest()
            if secret
            else secrets.token_urlsafe(32)
        )

    @property
    def enabled(self) -> bool:
        """True when a surface token or OpenID Connect sign-in is configured."""
        return bool(self.token) or self.people is not None

    def _mac(self, expires: str) -> str:
        return hmac.new(self._binding.encode(), b"maka-web-login-v2|" + expires.encode(), hashlib.sha256).hexdigest()

    def cookie_value(self) -> str:
        """A new login cookie's value, ``<expiry>.<HMAC>``: its expiry (Unix seconds, :attr:`session_seconds` from
        now) signed with the login key, so the cookie never holds the token and the server enforces the bound."""
        expires = str(int(self._clock()) + self.session_seconds)
        return f"{expires}.{self._mac(expires)}"

    def check_token(self, candidate: str) -> bool:
        """Constant-time comparison of ``candidate`` with the configured token."""
        return bool(self.token) and hmac.compare_digest(candidate.encode(), self.token.encode())

    def bearer(self, request: Request) -> bool:
        """True when the request carries ``Authorization: Bearer <the token>``."""
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and self.check_token(value.strip())

    def signed_in(self, response: Response, request: Request) -> Response:
        """``response`` with the login cookie set: persistent for :attr:`session_seconds` (``Max-Age``, so it
        outlives a browser restart), HttpOnly, SameSite=Strict, Secure over https."""
        response.set_cookie(
            COOKIE_NAME,
            self.cookie_value(),
            max_age=self.session_seconds,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def has_token_cookie(self, request: Request) -> bool:
        """True when the request carries the surface token's login cookie."""
        value = request.cookies.get(COOKIE_NAME, "")
        expires, _, mac = value.partition(".")
        if not self.token or not self._binding or not expires.isdigit() or len(expires) > 12:
            return False
        left = int(expires) - self._clock()
        # expired, or signed for longer than a sign-in now lasts (the setting was lowered): not valid
        return 0 < left <= self.session_seconds + 60 and hmac.compare_digest(mac.encode(), self._mac(expires).encode())

    def person(self, request: Request) -> SignedIn | None:
        """The person signed in with OpenID Connect on this request, or None."""
        return self.people.person(request) if self.people is not None else None

    def has_cookie(self, request: Request) -> bool:
        """True when the request carries the login cookie or a signed-in person's session cookie."""
        return self.has_token_cookie(request) or self.person(request) is not None

    def csrf_for(self, request: Request) -> str:
        """The CSRF token of this request's login: per sign-in for a person (derived from the shared secret and
        the session's random id, so every replica agrees), else the deployment's :attr:`csrf_token`."""
        if not self.has_token_cookie(request) and not self.bearer(request):
            person = self.person(request)
            if person is not None:
                key = self._person_csrf_key.copy()
                key.update(person.sid.encode())
                return key.hexdigest()
        return self.csrf_token

    def same_origin(self, request: Request) -> bool:
        """True when the browser says the request comes from this origin."""
        origin = request.headers.get("origin")
        if origin is not None and origin != "null":
            own = self.public_origin or f"{request.url.scheme}://{request.headers.get('host', '')}"
            return hmac.compare_digest(origin.lower().encode(), own.lower().encode())
        return request.headers.get("sec-fetch-site") == "same-origin"

    def check(self, request: Request) -> Response | None:
        """The refusal for ``request`` (401/303/403), or None when it may proceed."""
        path = request.url.path
        is_api = path.startswith("/api/")
        by_bearer = self.bearer(request)
        public = any(path == p or (p.endswith("/") and path.startswith(p)) for p in _PUBLIC_PATHS)
        query_token = request.query_params.get("token")
        if self.token and request.method == "GET" and not is_api and query_token is not None:
            refused = self.limiter.refusal(request)
            if refused is not None:
                return refused
            if self.check_token(query_token):
                return self.signed_in(RedirectResponse(path, status_code=303), request)
            self.limiter.failed_request(request)
        if self.enabled and not public and not by_bearer and not self.has_cookie(request):
            if is_api:
                return error_json(401, "UNAUTHENTICATED", "log in or send Authorization: Bearer <surface token>")
            return RedirectResponse("/login", status_code=303)
        if request.method in _UNSAFE and not by_bearer:
            if not self.same_origin(request):
                return error_json(403, "CSRF_REJECTED", "cross-origin request refused")
            if is_api and not hmac.compare_digest(
                request.headers.get(CSRF_HEADER, "").encode(), self.csrf_for(request).encode()
            ):
                return error_json(403, "CSRF_REJECTED", f"missing or wrong {CSRF_HEADER} header")
        return None


class GuardMiddleware:
    """Pure ASGI middleware (safe for streaming SSE): :meth:`Guard.check`, then the security headers
    (and ``Cache-Control: no-store`` under ``/api/``) on every HTTP response."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_api = str(scope.get("path", "")).startswith("/api/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
                if is_api and "cache-control" not in headers:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        refusal = self.guard.check(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)
