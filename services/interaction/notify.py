"""Notifications when a form waits (docs/operations.md#notifications): a generic JSON webhook and a
Slack-compatible incoming webhook, on ``form_opened`` and ``form_expiring`` (a lead before the form's deadline).

Exactly one notification per open: the replica whose ``open.lua`` committed the form calls
:meth:`Notifier.form_opened` (a replayed open that finds its form already pending sends nothing), and the same
replica schedules the ``form_expiring`` nudge, re-checking the form is still pending before it sends. A replica
that dies takes its queued and scheduled notifications with it (at most once, never twice).

Delivery never blocks the form path: :meth:`Notifier.form_opened` only appends to one bounded queue per target
(when full, the oldest notification is dropped and counted); one task per target posts them with httpx, one
timeout bounding each whole attempt (connect to last byte), retried with :data:`services.core.backoff.Backoff`.
Counters go to Prometheus (``maka_notifications_total``) and to a small JSON status file ``maka status`` reads
(``notify_status_file``).

A notification carries ids, the Tool, the server, the Host, the session, the deadline and a link to the form on
the web page - never an answer value, ``requestState`` or token; a form made for a person only the Host, the
deadline and the link (:mod:`services.interaction.notice`). The server's message and names are untrusted:
control, bidi and zero-width characters are replaced and the text is capped. Logs and the status file name a
target by its redacted URL (scheme and host only: a Slack URL's path is its secret).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from maka.interaction.v1 import interaction_pb2
from services.core import metrics
from services.core.backoff import Backoff
from services.interaction.notice import EventKind, Notice

log = logging.getLogger("maka.interaction.notify")

EXPIRING_KEPT = 16384
"""Most ``form_expiring`` nudges one replica keeps scheduled (more are dropped and counted)."""
RETRY_BACKOFF = Backoff(initial=0.5, maximum=30.0)
"""Waits between attempts of one notification."""
StillPending = Callable[[str], Awaitable[bool]]
"""Whether the form of this id is still pending (checked before a ``form_expiring`` nudge)."""


class TargetKind(StrEnum):
    """What a target receives."""

    WEBHOOK = "webhook"
    """The generic JSON body (:meth:`Notice.webhook_json`)."""
    SLACK = "slack"
    """A Slack incoming-webhook body ``{"text", "blocks"}`` (:meth:`Notice.slack_json`)."""


def redact_url(url: str) -> str:
    """``scheme://host[:port]`` and ``/...`` when anything follows: never user info, path, query or fragment
    (a Slack webhook's path is its secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<malformed url>"
    rest = "/..." if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{rest}"


@dataclass(frozen=True, slots=True)
class Target:
    """One receiver: its kind and URL (the URL may hold a secret: shown only through :attr:`shown`)."""

    kind: TargetKind
    url: str

    @property
    def shown(self) -> str:
        """``<kind> <redacted url>``."""
        return f"{self.kind.value} {redact_url(self.url)}"

    def body(self, notice: Notice) -> bytes:
        """The JSON body this target receives."""
        data = notice.slack_json() if self.kind is TargetKind.SLACK else notice.webhook_json()
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


class TargetsInvalid(ValueError):
    """A notification target that is not an ``http(s)`` URL, or a malformed targets file line."""


def _checked(kind: TargetKind, url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetsInvalid(f"a {kind.value} target must be an http(s) URL: {redact_url(url)}")
    return Target(kind, url)


def parse_targets(webhook_urls: str, slack_urls: str, targets_file: Path | None) -> list[Target]:
    """Targets from the comma-separated URL lists and the file (one ``webhook URL`` or ``slack URL`` per line,
    ``#`` comments). Raises :class:`TargetsInvalid` (its message never holds a URL's path)."""
    targets = [_checked(TargetKind.WEBHOOK, u.strip()) for u in webhook_urls.split(",") if u.strip()]
    targets += [_checked(TargetKind.SLACK, u.strip()) for u in slack_urls.split(",") if u.strip()]
    if targets_file is not None:
        try:
            text = targets_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise TargetsInvalid(f"{targets_file}: cannot be read ({type(error).__name__})") from error
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            kind, _, url = line.partition(" ")
            if kind not in {k.value for k in TargetKind}:
                raise TargetsInvalid(f"{targets_file} line {number}: start with 'webhook' or 'slack', then the URL")
            targets.append(_checked(TargetKind(kind), url.strip()))
    return list(dict.fromkeys(targets))


@dataclass(slots=True)
class TargetStatus:
    """Counters and the failing state of one target (what ``maka status`` shows)."""

    target: Target
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    retried: int = 0
    failing_since: float | None = None
    last_error: str = ""

    def json(self) -> dict[str, Any]:
        """The status file's entry (the URL redacted)."""
        return {
            "kind": self.target.kind.value,
            "target": redact_url(self.target.url),
            "sent": self.sent,
            "failed": self.failed,
            "dropped": self.dropped,
            "retried": self.retried,
            "failingSince": self.failing_since,
            "lastError": self.last_error or None,
        }


@dataclass(slots=True)
class _Lane:
    """One target's bounded queue and its sender."""

    status: TargetStatus
    queue: deque[tuple[str, bytes]] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix (a transport error, a timeout, HTTP 408/429/5xx)."""


class _Permanent(Exception):
    """An attempt failed in a way another attempt will not fix (HTTP 4xx other than 408/429)."""


class Notifier:
    """Sends form notifications to ``targets``; see the module docstring.

    ``attempts`` per notification (each bounded by ``timeout`` seconds), ``queue_size`` notifications queued per
    target, a ``form_expiring`` nudge ``expiry_lead`` seconds before a form's deadline (0: none).
    """

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        web_public_url: str = "",
        expiry_lead: float = 60.0,
        attempts: int = 5,
        timeout: float = 5.0,
        queue_size: int = 1000,
        status_file: Path | None = None,
        backoff: Backoff = RETRY_BACKOFF,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.targets = list(targets)
        self.web_public_url = web_public_url
        self.expiry_lead = expiry_lead
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.queue_size = max(1, queue_size)
        self.status_file = status_file
        self.backoff = backoff
        self._clock = clock
        self._lanes = [_Lane(TargetStatus(t)) for t in self.targets]
        self._expiring: list[tuple[float, str, str, interaction_pb2.Interaction, StillPending]] = []
        self._expiring_changed = asyncio.Event()
        self._expiring_task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self.expiring_dropped = 0

    # --- the form path (never blocks) ------------------------------------------------------------

    def form_opened(self, interaction: interaction_pb2.Interaction, host_id: str, still_pending: StillPending) -> None:
        """Queue ``form_opened`` for every target and schedule ``form_expiring``; returns at once and never raises
        (the form is open whatever happens to its notification)."""
        try:
            self._opened(interaction, host_id, still_pending)
        except Exception:
            log.exception("notification_not_queued", extra={"interaction_id": interaction.interaction_id})

    def _opened(self, interaction: interaction_pb2.Interaction, host_id: str, still_pending: StillPending) -> None:
        self._enqueue(Notice.of(EventKind.OPENED, interaction, host_id, self.web_public_url))
        if self.expiry_lead <= 0:
            return
        due = interaction.expires_at.ToMilliseconds() / 1000 - self.expiry_lead
        if due <= self._clock():
            return  # the whole wait is shorter than the lead: the open's notification says it all
        if len(self._expiring) >= EXPIRING_KEPT:
            self.expiring_dropped += 1
            metrics.NOTIFICATIONS.labels("expiring", "dropped").inc()
            return
        heapq.heappush(self._expiring, (due, interaction.interaction_id, host_id, interaction, still_pending))
        self._expiring_changed.set()

    def _enqueue(self, notice: Notice) -> None:
        for lane in self._lanes:
            if len(lane.queue) >= self.queue_size:
                dropped, _ = lane.queue.popleft()
                lane.status.dropped += 1
                metrics.NOTIFICATIONS.labels(lane.status.target.kind.value, "dropped").inc()
                log.warning(
                    "notification_dropped",
                    extra={"target": lane.status.target.shown, "interaction_id": dropped, "reason": "queue_full"},
                )
            lane.queue.append((notice.interaction_id, lane.status.target.body(notice)))
            lane.ready.set()

    # --- running ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start one sender per target and the ``form_expiring`` scheduler."""
        # httpx logs every request's URL at INFO: a Slack URL's path is its secret.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, trust_env=False)
        for lane in self._lanes:
            lane.task = asyncio.create_task(self._send_loop(lane), name="notify-" + lane.status.target.kind.value)
        self._expiring_task = asyncio.create_task(self._expiring_loop(), name="notify-expiring")
        self._write_status()

    async def aclose(self) -> None:
        """Stop sending (what is still queued is dropped with the process) and close the HTTP client."""
        tasks = [lane.task for lane in self._lanes if lane.task is not None]
        if self._expiring_task is not None:
            tasks.append(self._expiring_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.aclose()

    def status(self) -> list[TargetStatus]:
        """Every target's counters (live objects)."""
        return [lane.status for lane in self._lanes]

    async def _send_loop(self, lane: _Lane) -> None:
        while True:
            while not lane.queue:
                lane.ready.clear()
                await lane.ready.wait()
            interaction_id, body = lane.queue.popleft()
            try:
                await self._deliver(lane.status, interaction_id, body)
            except Exception:  # a bug must not stop this target's sender for good
                log.exception("notification_sender_failed", extra={"target": lane.status.target.shown})
            self._write_status()

    async def _deliver(self, status: TargetStatus, interaction_id: str, body: bytes) -> None:
        retry = self.backoff.attempts()
        kind = status.target.kind.value
        for attempt in range(1, self.attempts + 1):
            try:
                await self._post(status.target, body)
            except _Retryable as error:
                problem, permanent = str(error), False
            except _Permanent as error:
                problem, permanent = str(error), True
            else:
                status.sent += 1
                status.failing_since = None
                status.last_error = ""
                metrics.NOTIFICATIONS.labels(kind, "sent").inc()
                return
            if status.failing_since is None:
                status.failing_since = self._clock()
            status.last_error = problem
            log.warning(
                "notification_failed",
                extra={
                    "target": status.target.shown,
                    "interaction_id": interaction_id,
                    "problem": problem,
                    "attempt": attempt,
                },
            )
            if permanent or attempt == self.attempts:
                break
            status.retried += 1
            self._write_status()
            await retry.sleep()  # retry backoff, not synchronisation
        status.failed += 1
        metrics.NOTIFICATIONS.labels(kind, "failed").inc()

    async def _post(self, target: Target, body: bytes) -> None:
        assert self._client is not None, "start() first"
        try:  # one bound for the whole attempt: httpx's timeout is per read, and a dripping receiver never trips it
            async with asyncio.timeout(self.timeout):
                response = await self._client.post(
                    target.url, content=body, headers={"content-type": "application/json"}, timeout=self.timeout
                )
        except (httpx.TimeoutException, TimeoutError) as error:
            raise _Retryable(f"timed out after {self.timeout:g} s") from error
        except httpx.HTTPError as error:
            raise _Retryable(f"{type(error).__name__}") from error
        except (httpx.InvalidURL, ValueError) as error:  # never retried: the URL itself is wrong
            raise _Permanent(f"{type(error).__name__}") from error
        if 200 <= response.status_code < 300:
            return
        problem = f"HTTP {response.status_code}"
        if response.status_code in (408, 429) or response.status_code >= 500:
            raise _Retryable(problem)
        raise _Permanent(problem)

    async def _expiring_loop(self) -> None:
        while True:
            self._expiring_changed.clear()
            if not self._expiring:
                await self._expiring_changed.wait()
                continue
            delay = self._expiring[0][0] - self._clock()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._expiring_changed.wait(), timeout=min(delay, 3600.0))
                continue
            _due, interaction_id, host_id, interaction, still_pending = heapq.heappop(self._expiring)
            try:
                pending = await still_pending(interaction_id)
            except Exception as error:  # Redis down: the nudge is skipped, never the form path
                log.warning(
                    "notification_skipped", extra={"interaction_id": interaction_id, "problem": type(error).__name__}
                )
                continue
            if pending:
                self._enqueue(Notice.of(EventKind.EXPIRING, interaction, host_id, self.web_public_url))

    def status_json(self) -> dict[str, Any]:
        """What the status file holds."""
        return {
            "updated": self._clock(),
            "targets": [lane.status.json() for lane in self._lanes],
            "expiringDropped": self.expiring_dropped,
        }

    def _write_status(self) -> None:
        """Replace the status file (atomically, ``0600``) when one is configured (by the senders after each attempt,
        never on the form path); a failure is logged."""
        if self.status_file is None:
            return
        tmp = self.status_file.with_name(self.status_file.name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self.status_json(), out)
            os.replace(tmp, self.status_file)
        except OSError as error:
            log.warning("notification_status_unwritable", extra={"problem": type(error).__name__})
