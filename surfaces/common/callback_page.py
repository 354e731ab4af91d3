"""The one loopback HTTP exchange of a browser sign-in's redirect: read a request's line (and skip its headers),
let the caller decide the outcome, answer a small HTML page naming it. Used by ``maka login``'s OpenID Connect
callback (:mod:`surfaces.common.login`) and ``maka auth``'s OAuth callback (:mod:`surfaces.cli.commands.auth`)."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Awaitable, Callable

REQUEST_TIMEOUT_SECONDS = 10
"""How long a connection may take to send each line of its request."""
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}


async def answer_page(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    respond: Callable[[str, str], Awaitable[tuple[int, str]]],
) -> None:
    """Read one request, call ``respond(method, target)`` for its ``(status, text)`` and answer ``text`` as an
    HTML page (escaped, not cached, no referrer), then close. A client that is too slow or goes away, or a
    ``respond`` that times out, gets no answer."""
    try:
        request_line = (await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_SECONDS)).decode("latin-1")
        while (await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_SECONDS)) not in (b"\r\n", b"\n", b""):
            pass
        method, target, *_ = [*request_line.split(" "), "", ""]
        status, text = await respond(method, target)
        body = f"<!doctype html><title>Maka</title><p>{html.escape(text)}</p>".encode()
        writer.write(
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
