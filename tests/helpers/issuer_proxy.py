"""A real HTTP reverse proxy on loopback in front of the test OpenID provider (tests/helpers/oidc.py), whose JWKS
can be made to fail or hang on command.

Everything is forwarded to the provider with the client's ``Host``, so the provider names the proxy as the issuer
(its discovery's ``issuer`` and ``jwks_uri`` and its tokens' ``iss`` are the proxy's URL): services configured with
:attr:`IssuerProxy.issuer` fetch their JWKS through it. :meth:`IssuerProxy.fail` answers the JWKS with ``500``,
:meth:`IssuerProxy.hang` holds every JWKS request open until :meth:`IssuerProxy.forward` (which then forwards them);
the proxy counts the JWKS requests it received (:attr:`IssuerProxy.jwks_requests`) and those it holds
(:attr:`IssuerProxy.hanging`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Literal
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from surfaces.common.asgi_server import QuietSignalsServer, bind_socket, wait_started
from tests.helpers.oidc import Provider

Mode = Literal["forward", "fail", "hang"]
HOP_BY_HOP = frozenset({"connection", "content-length", "content-encoding", "transfer-encoding", "keep-alive"})


class IssuerProxy:
    """The proxy's controls and counters (see the module docstring)."""

    def __init__(self, upstream: str, jwks_path: str) -> None:
        self.upstream = upstream
        self.jwks_path = jwks_path
        self.issuer = ""
        """The proxy's base URL: the issuer services are configured with."""
        self.jwks_requests = 0
        """JWKS requests received, whatever was answered."""
        self.hanging = 0
        """JWKS requests held open now."""
        self._mode: Mode = "forward"
        self._released = asyncio.Event()
        self._client = httpx.AsyncClient(base_url=upstream, follow_redirects=False, timeout=30)

    def fail(self) -> None:
        """Answer every JWKS request with ``500`` from now on."""
        self._mode = "fail"

    def hang(self) -> None:
        """Hold every JWKS request open from now on (until :meth:`forward`)."""
        self._released = asyncio.Event()
        self._mode = "hang"

    def forward(self) -> None:
        """Forward JWKS requests again, the held ones included."""
        self._mode = "forward"
        self._released.set()

    async def handle(self, request: Request) -> Response:
        if request.url.path == self.jwks_path:
            self.jwks_requests += 1
            if self._mode == "fail":
                return Response("the JWKS is down", status_code=500)
            if self._mode == "hang":
                self.hanging += 1
                try:
                    await self._released.wait()
                finally:
                    self.hanging -= 1
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        answer = await self._client.request(
            request.method,
            request.url.path,
            params=request.url.query or None,
            headers=headers,
            content=await request.body(),
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    async def close(self) -> None:
        self._released.set()
        await self._client.aclose()


@contextlib.asynccontextmanager
async def issuer_proxy(provider: Provider) -> AsyncIterator[tuple[IssuerProxy, Provider]]:
    """Serve a proxy in front of ``provider`` in this loop; yields it and the provider as seen through it (its
    ``issuer`` the proxy's URL, for :func:`tests.helpers.oidc.id_token`)."""
    async with httpx.AsyncClient() as http:
        discovery = (await http.get(f"{provider.issuer}/.well-known/openid-configuration")).json()
    proxy = IssuerProxy(provider.issuer, urlsplit(discovery["jwks_uri"]).path)
    methods = ["GET", "POST", "PUT", "DELETE"]
    app = Starlette(routes=[Route("/{path:path}", proxy.handle, methods=methods)])
    sock = bind_socket("127.0.0.1", 0)
    server = QuietSignalsServer(uvicorn.Config(app, lifespan="off", access_log=False, log_config=None))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_started(server, task, "the issuer proxy", 10)
        proxy.issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
        yield proxy, replace(provider, issuer=proxy.issuer)
    finally:
        await proxy.close()
        server.should_exit = True
        await task
        sock.close()
