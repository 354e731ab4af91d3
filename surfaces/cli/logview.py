"""How ``maka up`` shows its children's logs (docs/operations.md#logs).

Every service writes JSON lines (:mod:`services.core.logs`). ``maka up --log-format``:

- ``human`` (the default on a terminal): ``12:00:01 INFO  [broker] invocation_started tool=examples:deploy ...``;
- ``json`` (the default when stderr is not a terminal): each JSON object with ``"child"`` added.

Third-party noise never reaches the terminal: the embedded ``redis-server``'s output (its banner and
notices) and any child line that is not one of our JSON objects (e.g. what a stdio MCP server writes
to stderr) are appended to ``<state dir>/logs/<child>.log``; the first such line of each child says
where they go. The stack's own notices (``[stack] ...``) are always shown.

``quiet`` (``maka up`` without ``-v`` or an explicit ``--log-level``): until :meth:`LogView.started`, lines
below warning level and the notices where third-party output goes are left out (a child that fails to start
is named with its log file), so the ready line is not buried under every service's start-up lines; warnings
and errors always show.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from surfaces.common.untrusted import display_text

FORMATS = ("auto", "human", "json")
NOISY_CHILDREN = frozenset({"redis"})
"""Children whose whole output is third-party noise (to their file only)."""
_SKIP = {"ts", "level", "logger", "event"}
_SHOWN_WHEN_QUIET = frozenset({"warning", "warn", "error", "critical", "fatal"})


def resolve(fmt: str, stream: TextIO) -> str:
    """``auto`` → ``human`` on a terminal, else ``json``."""
    if fmt != "auto":
        return fmt
    try:
        return "human" if stream.isatty() else "json"
    except (AttributeError, ValueError):
        return "json"


def human_line(child: str, entry: dict[str, Any]) -> str:
    """One JSON log object as ``HH:MM:SS LEVEL [child] event key=value ...``."""
    stamp = time.strftime("%H:%M:%S", time.localtime(float(entry.get("ts", time.time()))))
    level = str(entry.get("level", "info")).upper()
    extra = " ".join(f"{k}={_value(v)}" for k, v in entry.items() if k not in _SKIP and v is not None)
    return f"{stamp} {level:<7} [{child}] {entry.get('event', '')}{' ' + extra if extra else ''}"


def _value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text


class LogView:
    """A ``Supervisor`` sink: renders JSON lines as ``fmt`` on ``stream``, files the rest."""

    def __init__(
        self, state_dir: Path, fmt: str = "auto", stream: TextIO | None = None, *, quiet: bool = False
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.format = resolve(fmt, self.stream)
        self.log_dir = state_dir / "logs"
        self.quiet = quiet
        """True until :meth:`started`: only warnings and errors of the children are shown."""
        self._announced: set[str] = set()
        self._closed = False

    def started(self) -> None:
        """The stack is ready: show every line from now on."""
        self.quiet = False

    def __call__(self, child: str, line: str) -> None:
        entry = _json(line) if child not in NOISY_CHILDREN else None
        if child == "stack":
            self._write(display_text(f"[stack] {line}"))
        elif entry is None:
            self._file(child, line)
        elif self.quiet and str(entry.get("level", "")).lower() not in _SHOWN_WHEN_QUIET:
            return
        elif self.format == "json":
            self._write(json.dumps({"child": child, **entry}, ensure_ascii=False))
        else:
            self._write(display_text(human_line(child, entry)))  # a server's words may be in it

    def _file(self, child: str, line: str) -> None:
        with contextlib.suppress(OSError):
            self.log_dir.mkdir(parents=True, exist_ok=True)
            path = self.log_dir / f"{child}.log"
            with path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
            if child not in self._announced and not self.quiet:
                self._announced.add(child)
                self._write(f"[stack] {child}'s other output goes to {path}")

    def _write(self, text: str) -> None:
        if self._closed:
            return
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # the reader went away: keep stopping cleanly
            self._closed = True


def _json(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "event" in value else None
