"""A small TCP proxy for fault tests: sits between two processes and can cut every connection at once.

``upstream`` is a callable so the proxy can be started before the process it forwards to has bound
its port (it is read on each accepted connection).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class TcpProxy:
    """Forward 127.0.0.1:``port`` to ``upstream()`` (``host:port``); :meth:`cut` drops every live connection."""

    def __init__(self, upstream: Callable[[], str]) -> None:
        self._upstream = upstream
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0
        """Connections accepted so far."""
        self.port = 0

    async def start(self) -> int:
        """Listen on an ephemeral loopback port; returns it."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def live(self) -> int:
        """Connections currently open (client side)."""
        return len(self._writers) // 2

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = self._upstream().rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        self.accepted += 1
        self._writers |= {writer, up_writer}
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            for side in (writer, up_writer):
                self._writers.discard(side)
                side.transport.abort()
            self._tasks.difference_update(pumps)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    def cut(self) -> int:
        """Abort every live connection (both sides see a reset); returns how many sockets were cut."""
        writers = list(self._writers)
        for writer in writers:
            writer.transport.abort()
        return len(writers)

    async def close(self) -> None:
        """Stop listening and cut everything."""
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
