"""What the web page says about signing in (docs/operations.md#the-web-page-across-restarts): the sign-in page's
text, the hint ``GET /api/session`` hands the page for its signed-out notice, and the
:class:`~surfaces.web.security.Guard` built from the settings.

Under ``maka up`` (``MAKA_WEB_OWNER_TOKENS_FILE`` set) the token to sign in with is the owner token: the ready
line's ``/?token=`` link carries it, and ``STATE/tokens.json`` holds it. Only a web surface run by hand with
``MAKA_SURFACE_TOKEN`` asks for that variable. The login cookie is signed with ``MAKA_WEB_SESSION_KEY_FILE`` when
set (``maka up``: ``STATE/web-session.key``), so the owner's sign-in survives restarts of the same state dir.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from starlette.responses import HTMLResponse

from surfaces.web.oidc import OidcSignIn
from surfaces.web.security import Guard, LoginLimiter
from surfaces.web.settings import WebSettings

STATIC_DIR = Path(__file__).parent / "static"
_SURFACE_TEXT = (
    '<p class="login-token">This surface is protected. Enter the surface token (<code>MAKA_SURFACE_TOKEN</code>) '
    "to see and answer forms.</p>"
)
_SURFACE_LABEL = '<label for="token">Surface token</label>'


def build_guard(settings: WebSettings, secret: bytes | None, people: OidcSignIn | None) -> Guard:
    """The access guard of ``settings`` (``secret``: ``MAKA_WEB_SECRET_FILE``'s bytes; ``people``: OpenID Connect).

    Raises ``ValueError`` when ``MAKA_WEB_SESSION_KEY_FILE`` is set but unreadable or too short."""
    return Guard(
        settings.surface_token.get_secret_value(),
        secret=secret,
        session_key=settings.session_key(),
        session_seconds=settings.web_session_seconds,
        public_origin=settings.web_public_origin,
        people=people,
        limiter=LoginLimiter(settings.web_login_attempts_per_minute),
    )


def owner_text(tokens_file: Path) -> str:
    """The sign-in page's instructions under ``maka up`` (HTML; the path escaped)."""
    path = html.escape(str(tokens_file))
    return (
        '<p class="login-token">This page belongs to the stack <code>maka up</code> (<code>make run</code>) started. '
        "Open the link in its ready line (<code>maka is ready: http://…/?token=…</code>), or enter the owner token: "
        f'the <code>"token"</code> of the <code>owner</code> entry in <code id="tokens-file">{path}</code>.</p>'
    )


def login_html(settings: WebSettings, *, token: bool, oidc: bool, error: bool = False) -> str:
    """``static/login.html`` for these settings: the token it asks for (the owner token under ``maka up``, else the
    surface token), the OpenID Connect button (``oidc``; alone when no ``token``), the wrong-token line."""
    page = (STATIC_DIR / "login.html").read_text(encoding="utf-8")
    if settings.web_owner_tokens_file is not None:
        page = page.replace(_SURFACE_TEXT, owner_text(settings.web_owner_tokens_file))
        page = page.replace(_SURFACE_LABEL, '<label for="token">Owner token</label>')
    if oidc:
        page = page.replace('<p class="login-oidc" hidden>', '<p class="login-oidc">')
        if not token:  # OpenID Connect only: login.js goes on to the issuer by itself
            page = page.replace('<body class="login-page">', '<body class="login-page" data-oidc-only>')
            page = page.replace('class="login-token"', 'class="login-token" hidden')
    if error:
        page = page.replace('<p class="login-error" hidden>', '<p class="login-error">')
    return page


def login_response(settings: WebSettings, *, token: bool, oidc: bool, error: bool = False) -> HTMLResponse:
    """The sign-in page (``401`` after a wrong token), never cached."""
    return HTMLResponse(
        login_html(settings, token=token, oidc=oidc, error=error),
        status_code=401 if error else 200,
        headers={"Cache-Control": "no-store"},
    )


def sign_in_hint(settings: WebSettings) -> dict[str, Any]:
    """``"sign_in"`` of ``GET /api/session``: which token signs this page in again once its sign-in has ended
    (``"owner"`` with the tokens file under ``maka up``, ``"surface"``, or ``"none"`` without a token)."""
    if not settings.surface_token.get_secret_value():
        return {"token": "none", "tokens_file": None}
    if settings.web_owner_tokens_file is not None:
        return {"token": "owner", "tokens_file": str(settings.web_owner_tokens_file)}
    return {"token": "surface", "tokens_file": None}


def message_page(status: int, title: str, text: str) -> HTMLResponse:
    """A small page with a title and a line (the OAuth callback's outcome), never cached, sending no referrer."""
    body = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="/static/app.css"></head><body><main class="callback">'
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></main></body></html>"
    )
    return HTMLResponse(
        body, status_code=status, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    )
