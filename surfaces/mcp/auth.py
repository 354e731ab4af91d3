"""Bearer tokens on the MCP front door: with a tokens file it is an OAuth 2.0 protected resource holding static
tokens (MCP specification basic/authorization; RFC 6750 bearer tokens; RFC 9728 protected-resource metadata).

Without ``MAKA_AUTH_TOKENS_FILE`` (the default loopback stack) nothing here applies: the endpoint is open, bound to
loopback. With it, every request to ``/mcp`` needs ``Authorization: Bearer <token>`` of a principal holding the
broker's ``caller`` role (:mod:`services.core.auth`, the same file and tokens as the gRPC services):

- no or unknown token: ``401`` with ``WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/
  oauth-protected-resource/mcp"``; a token without the ``caller`` role: ``403`` (``error="insufficient_scope"``);
- ``GET /.well-known/oauth-protected-resource/mcp`` (and without the ``/mcp`` suffix) serves the metadata
  naming the resource (``MAKA_MCP_RESOURCE_URL``, else the URL the request came to);
- the metadata and the ``401``/``403`` challenges answer only a ``Host`` the endpoint itself answers (loopback,
  the host of ``MAKA_MCP_RESOURCE_URL``, ``MAKA_MCP_ALLOWED_HOSTS``): any other is ``421`` as at ``/mcp``
  (:class:`surfaces.mcp.hosts.HostGuard`), so a DNS-rebinding page learns neither the resource nor the issuer;
- the broker calls a request makes carry that request's own token (:class:`ForwardingBrokerClient`), so the
  broker sees the person the call is made for, as for any caller; background reads use the door's own
  ``MAKA_CALLER_TOKEN``.

With ``MAKA_OIDC_ISSUER`` and ``MAKA_OIDC_AUDIENCES`` the door also admits the issuer's JWTs
(:mod:`services.core.jwt_auth`; a refused one is ``401 invalid_token`` whose description says why), and the
metadata names the issuer in ``authorization_servers``, so MCP clients can sign people in there. The broker
verifies the forwarded JWT again (give it the same settings).

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from maka_client import BrokerClient
from services.core.auth import Principal, Role, TokenTable
from services.core.jwt_auth import JwtVerifier, verifier_from_settings
from services.core.status import ServiceError
from surfaces.mcp.hosts import HostGuard
from surfaces.mcp.settings import McpSettings

log = logging.getLogger("maka.mcp.auth")

METADATA_PATH = "/.well-known/oauth-protected-resource"
TOKEN_HINT = (
    "send Authorization: Bearer TOKEN with a token of the stack's tokens file (maka up writes its owner's to "
    "STATE/tokens.json: jq -r '.tokens[0].token' .state/tokens.json; the ready line names the state dir)"
)
"""Where a client without a token finds one: said in every ``401`` and on the OAuth paths a client tries."""
OAUTH_PATHS = (
    "/register",
    "/authorize",
    "/token",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)
"""Where OAuth clients look for an authorization server (discovery, dynamic client registration): without an
OpenID issuer the door has none, and these say so, naming the bearer token (:func:`no_oauth`)."""
UNAUTHORIZED_CODE = -32001
"""The JSON-RPC code of a ``401``'s body (server-defined; the SDKs show its message)."""
PRINCIPAL_STATE = "maka_principal"
"""Where :class:`BearerGate` leaves the admitted principal in the request scope's ``state``."""
LOCAL = "local"
"""The identity of every client of an open endpoint (no tokens file: loopback only)."""
_forwarded: contextvars.ContextVar[str | None] = contextvars.ContextVar("maka_mcp_caller_token", default=None)


def bearer_token(headers: Any) -> str | None:
    """The token of an ``Authorization: Bearer`` header (scheme case-insensitive), or None."""
    value = headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def forward_caller(request: object) -> None:
    """Make the broker calls of the current request carry its bearer token (no-op without one)."""
    if isinstance(request, Request):
        token = bearer_token(request.headers)
        if token is not None:
            _forwarded.set(token)


def request_principal(request: object) -> Principal | None:
    """The principal :class:`BearerGate` admitted ``request`` as (None on an open endpoint)."""
    if not isinstance(request, Request):
        return None
    principal = request.scope.get("state", {}).get(PRINCIPAL_STATE)
    return principal if isinstance(principal, Principal) else None


def principal_identity(principal: Principal | None) -> str:
    """What tells ``principal`` apart from every other one the door admits: its name with the issuer of a
    verified person's token (a tokens-file name and a person's email never collide) and the service a person is
    named by; :data:`LOCAL` on an open endpoint. Sessions, ``requestState`` and caps are bound to it."""
    if principal is None:
        return LOCAL
    return json.dumps([principal.name, principal.issuer, principal.via], separators=(",", ":"))


def request_identity(request: object) -> str:
    """:func:`principal_identity` of ``request``'s principal."""
    return principal_identity(request_principal(request))


def session_owner(identity: str) -> AuthenticatedUser:
    """The ASGI ``user`` the SDK's session manager binds a 2025-11-25 ``Mcp-Session-Id`` to: the session it
    creates is refused (``404 Session not found``, as an unknown one) to any other ``user``. Holds no token."""
    return AuthenticatedUser(AccessToken(token="", client_id=identity, scopes=[]))


class ForwardingBrokerClient(BrokerClient):
    """A :class:`BrokerClient` whose calls carry the current request's bearer token (:func:`forward_caller`),
    else its own."""

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = _forwarded.get()
        return (("authorization", f"Bearer {token}"),) if token else self._own

    @metadata.setter
    def metadata(self, value: tuple[tuple[str, str], ...]) -> None:
        self._own = value


def resource_url(settings: McpSettings, scope: Scope, mcp_path: str) -> str:
    """The resource's canonical URL: ``MAKA_MCP_RESOURCE_URL``, else the URL of ``mcp_path`` on this request."""
    if settings.mcp_resource_url:
        return settings.mcp_resource_url.rstrip("/")
    return str(Request(scope).base_url).rstrip("/") + mcp_path


def metadata_url(resource: str) -> str:
    """Where RFC 9728 puts ``resource``'s metadata: the well-known path inserted before the resource's path."""
    scheme, _, rest = resource.partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority}{METADATA_PATH}{slash}{path}"


class BearerGate:
    """ASGI middleware: ``mcp_path`` needs a caller's bearer token; the metadata paths are open."""

    def __init__(
        self,
        app: ASGIApp,
        table: TokenTable,
        settings: McpSettings,
        mcp_path: str,
        verifier: JwtVerifier | None = None,
    ) -> None:
        self.app = app
        self.table = table
        self.settings = settings
        self.mcp_path = mcp_path
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.mcp_path:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = bearer_token(request.headers)
        principal = self.table.lookup(token) if token is not None else None
        description = "needs a bearer token" if token is None else "unknown bearer token"
        if principal is None and token is not None and self.verifier is not None and self.verifier.accepts(token):
            try:
                principal = await self.verifier.verify(token)
            except ServiceError as refused:
                description = refused.message
        resource = resource_url(self.settings, scope, self.mcp_path)
        # without an issuer no metadata leads anywhere: OAuth clients would only try to register at the origin
        challenge = f'Bearer resource_metadata="{metadata_url(resource)}"' if self.verifier else 'Bearer realm="maka"'
        if principal is None:
            log.info("mcp.unauthenticated", extra={"token_sent": token is not None})
            response = unauthorized(challenge, description, token is not None)
        elif not principal.has_role(Role.CALLER):
            log.info("mcp.forbidden", extra={"principal": principal.name})
            challenge += ', error="insufficient_scope"'
            body = {"error": "insufficient_scope", "error_description": "the token lacks the caller role"}
            response = JSONResponse(body, status_code=403, headers={"WWW-Authenticate": challenge})
        else:
            scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
            scope["user"] = session_owner(principal_identity(principal))
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


def unauthorized(challenge: str, description: str, token_sent: bool) -> JSONResponse:
    """The ``401``: ``WWW-Authenticate`` with ``error_description`` (and ``error="invalid_token"`` for a refused
    token), and a body that is both the OAuth error (``error_description``) and a JSON-RPC error whose message
    names the token (what the SDKs' clients print: the Python SDK shows a JSON-RPC error body's message)."""
    told = f"{description}: {TOKEN_HINT}"
    challenge += f', error_description="{told}"'
    if token_sent:
        challenge += ', error="invalid_token"'
    error = {"code": UNAUTHORIZED_CODE, "message": f"Unauthorized: this MCP endpoint {told}"}
    body = {"jsonrpc": "2.0", "id": None, "error": error, "error_description": told}
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})


async def no_oauth(request: Request) -> JSONResponse:
    """An OAuth path (:data:`OAUTH_PATHS`) of a door without an OpenID issuer: ``404`` saying that the endpoint
    takes a bearer token, not an OAuth sign-in, and where the token is."""
    body = {"error": "invalid_request", "error_description": f"this MCP endpoint has no OAuth sign-in: {TOKEN_HINT}"}
    return JSONResponse(body, status_code=404)


def protect(app: Starlette, settings: McpSettings, mcp_path: str) -> None:
    """With a tokens file or an OIDC issuer, put ``app``'s ``mcp_path`` behind :class:`BearerGate` and serve the
    metadata, both behind :class:`~surfaces.mcp.hosts.HostGuard`."""
    table = TokenTable.from_file(settings.auth_tokens_file)
    verifier = verifier_from_settings(settings)
    if not table.enabled and verifier is None:
        return

    async def metadata(request: Request) -> JSONResponse:
        resource = resource_url(settings, request.scope, mcp_path)
        document: dict[str, object] = {
            "resource": resource,
            "bearer_methods_supported": ["header"],
            "resource_name": "Maka",
        }
        if verifier is not None:
            document["authorization_servers"] = [verifier.config.issuer]
        return JSONResponse(document)

    if verifier is None:  # OAuth clients falling back to the endpoint's origin are told of the token instead
        for path in OAUTH_PATHS:
            app.router.routes.insert(0, Route(path, no_oauth, methods=["GET", "POST"]))
            app.router.routes.insert(0, Route(path + mcp_path, no_oauth, methods=["GET", "POST"]))
    app.router.routes.insert(0, Route(METADATA_PATH + mcp_path, metadata, methods=["GET"]))
    app.router.routes.insert(0, Route(METADATA_PATH, metadata, methods=["GET"]))
    app.add_middleware(BearerGate, table=table, settings=settings, mcp_path=mcp_path, verifier=verifier)
    guarded = [mcp_path, METADATA_PATH, METADATA_PATH + mcp_path]
    app.add_middleware(HostGuard, settings=settings, paths=guarded)  # outside the gate: checked before it answers
