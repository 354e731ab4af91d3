"""The automatic sign-in surface: completes every OAuth sign-in prompt the broker lists.

It stands in for the person and their browser (like the official SDK's conformance client does):
for each ``SIGN_IN_STATE_REQUIRED`` prompt of ``ListSignIns`` it requests the authorization URL once,
without following redirects, reads ``code``/``state``/``iss``/``error`` from the ``Location`` of the
authorization server's redirect, and delivers them with ``CompleteSignIn`` — the same RPC the web
surface's ``/oauth/callback`` uses. Codes and URLs are never logged or printed.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs, urlsplit

import grpc
import grpc.aio
import httpx

from maka.broker.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger("maka.conformance.sign_in")

POLL_SECONDS = 0.05
"""How often ``ListSignIns`` is read (a prompt appears at most this much before it is answered)."""


def redirect_parameters(location: str) -> broker_pb2.CompleteSignInRequest:
    """The ``CompleteSignInRequest`` of an authorization response redirect ``location``."""
    query = parse_qs(urlsplit(location).query)

    def first(name: str) -> str:
        values = query.get(name, [])
        return values[0] if values else ""

    return broker_pb2.CompleteSignInRequest(
        code=first("code"), state=first("state"), iss=first("iss"), error=first("error")
    )


class AutoSignIn:
    """Completes each sign-in prompt of the broker once (see module docstring); ``completed`` counts them."""

    def __init__(self, broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub) -> None:
        self._broker = broker
        self._seen: set[str] = set()
        self.completed = 0
        self.failures: list[str] = []

    async def run(self) -> None:
        """Poll and complete forever; cancel the task to stop. httpx's request log (the URL) is silenced."""
        logging.getLogger("httpx").setLevel(logging.WARNING)
        async with httpx.AsyncClient(follow_redirects=False, timeout=10.0) as http:
            while True:
                try:
                    listing = await self._broker.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=5)
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                else:
                    for status in listing.sign_ins:
                        url = status.authorization_url
                        if status.state == broker_pb2.SIGN_IN_STATE_REQUIRED and url not in self._seen:
                            self._seen.add(url)
                            await self._complete(http, status.server, url)
                await asyncio.sleep(POLL_SECONDS)

    async def _complete(self, http: httpx.AsyncClient, server: str, url: str) -> None:
        response = await http.get(url)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            log.warning("sign_in_no_redirect", extra={"server": server, "status": response.status_code})
            self.failures.append(f"{server}: the authorization endpoint answered {response.status_code}")
            return
        try:
            await self._broker.CompleteSignIn(redirect_parameters(location), timeout=5)
        except grpc.aio.AioRpcError as error:
            log.warning("sign_in_refused", extra={"server": server, "code": error.code().name})
            self.failures.append(f"{server}: CompleteSignIn {error.code().name}")
            return
        self.completed += 1
        log.info("sign_in_completed", extra={"server": server})
