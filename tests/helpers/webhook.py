"""A real HTTP receiver of notifications on loopback (``http.server`` in a thread), for the notification tests.

``Receiver(statuses=[500])`` answers its first request 500 and every later one 200; every request's path and
body are kept in arrival order. ``Receiver(drip=True)`` answers 200 with a 1,000-byte body it sends one byte every
0.2 s (a receiver that holds an attempt open without ever idling past a read timeout); :attr:`Receiver.hung_up`
is set when the sender closes the connection before the last byte::

    with Receiver() as receiver:
        receiver.url("/hook")              # "http://127.0.0.1:PORT/hook"
        await eventually(lambda: receiver.bodies() or None)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class Receiver:
    """A loopback HTTP server recording every ``POST``; answers the scripted ``statuses`` first, then 200."""

    DRIP_BYTES = 1000

    def __init__(self, statuses: Iterable[int] = (), *, drip: bool = False) -> None:
        self._statuses = list(statuses)
        self.hung_up = threading.Event()
        """A dripping answer's connection was closed by the sender before its last byte."""
        self._lock = threading.Lock()
        self.requests: list[tuple[str, bytes, int]] = []
        """``(path, body, status answered)`` of every request, in arrival order."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._lock:
                    status = receiver._statuses.pop(0) if receiver._statuses else 200
                    receiver.requests.append((self.path, body, status))
                self.send_response(status)
                self.send_header("content-length", str(Receiver.DRIP_BYTES if drip else 0))
                self.end_headers()
                if drip:
                    self._drip()

            def _drip(self) -> None:
                for _ in range(Receiver.DRIP_BYTES):
                    try:
                        self.wfile.write(b".")
                        self.wfile.flush()
                    except OSError:
                        receiver.hung_up.set()
                        return
                    if receiver._closing.wait(0.2):  # the drip's pace, not synchronisation
                        return

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read :attr:`Receiver.requests`."""

        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def port(self) -> int:
        """The bound loopback port."""
        port: int = self._server.server_address[1]
        return port

    def url(self, path: str = "/hook") -> str:
        """``http://127.0.0.1:PORT`` + ``path``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def bodies(self, path: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies received (on ``path`` only, when given), in arrival order."""
        with self._lock:
            return [json.loads(body) for p, body, _ in self.requests if path is None or p == path]

    def raw(self) -> bytes:
        """Every body received, concatenated (for canary searches)."""
        with self._lock:
            return b"\n".join(body for _, body, _ in self.requests)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
