"""Which ``Host`` and ``Origin`` header values the MCP front door answers: DNS rebinding protection (MCP
specification basic/transports "Security Warning").

One allow-list for everything the door serves about its endpoint: ``/mcp`` itself (checked by the SDK's
transport), the protected-resource metadata and the ``401``/``403`` challenges of :class:`surfaces.mcp.auth.
BearerGate` (checked by :class:`HostGuard` before any of them answers). Allowed are loopback, the host of
``MAKA_MCP_RESOURCE_URL`` (the endpoint's configured public URL) and ``MAKA_MCP_ALLOWED_HOSTS``; any other
``Host`` is ``421 Invalid Host header`` and an ``Origin`` neither loopback nor in ``MAKA_MCP_ALLOWED_ORIGINS`` is
``403 Invalid Origin header``, the SDK's own answers, so a page reached through a rebound name learns nothing of
the endpoint (not its resource URL, not its issuer). Health and readiness probes (``/healthz``, ``/readyz``) are
not checked: they name nothing and the kubelet sends the pod's address.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from surfaces.mcp.settings import McpSettings

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def allowed_hosts(settings: McpSettings) -> list[str]:
    """Loopback (any port), the host of ``MAKA_MCP_RESOURCE_URL`` and ``MAKA_MCP_ALLOWED_HOSTS``."""
    public = urlsplit(settings.mcp_resource_url).netloc if settings.mcp_resource_url else ""
    return [*LOOPBACK_HOSTS, *([public] if public else []), *settings.mcp_allowed_hosts]


def security_settings(settings: McpSettings) -> TransportSecuritySettings:
    """The allowed ``Host`` and ``Origin`` values (loopback plus the configured ones); everything else is refused."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts(settings),
        allowed_origins=[*LOOPBACK_ORIGINS, *settings.mcp_allowed_origins],
    )


class HostGuard:
    """ASGI middleware: a request to one of ``paths`` with a ``Host`` or ``Origin`` the endpoint refuses gets the
    endpoint's own refusal (``421``/``403``, the SDK's :class:`TransportSecurityMiddleware`) before anything
    behind it answers."""

    def __init__(self, app: ASGIApp, settings: McpSettings, paths: Collection[str]) -> None:
        self.app = app
        self.paths = {path.rstrip("/") for path in paths}
        self.check = TransportSecurityMiddleware(security_settings(settings))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") in self.paths:
            refused = await self.check.validate_request(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
