"""Settings of the Interaction service (``MAKA_*`` environment variables)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from services.core.settings import GrpcServerSettings

HOST_ID_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""What a Runtime Host id may be (it is a Redis hash tag)."""


class RedisMode(StrEnum):
    """How ``redis_url`` is read (docs/design.md#redis-deployment-modes)."""

    STANDALONE = "standalone"
    """One server: ``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or ``unix:///path``."""
    SENTINEL = "sentinel"
    """Sentinel addresses ``host:port,host:port,...`` plus ``redis_sentinel_service``."""
    CLUSTER = "cluster"
    """Cluster seed nodes ``host:port,host:port,...``."""


class Settings(GrpcServerSettings):
    """How the Interaction service reaches Redis and times its forms."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Standalone: a Redis URL (``redis://``, ``rediss://`` or ``unix://``, ACL ``user:password@`` allowed);
    sentinel: the sentinels, cluster: seed nodes, each as a comma-separated ``host:port`` list (an optional
    ``redis://``/``rediss://`` prefix per item; ``rediss`` turns TLS on). Ship Redis with AOF on."""
    redis_mode: RedisMode = RedisMode.STANDALONE
    """``standalone``, ``sentinel`` or ``cluster`` (how ``redis_url`` is read)."""
    redis_sentinel_service: str = "mymaster"
    """Sentinel mode: the monitored master's service name."""
    redis_username: str = ""
    """ACL user name (overrides one in the URL; sentinel/cluster modes take it only from here)."""
    redis_password_file: Path | None = None
    """File holding the Redis password (e.g. a mounted Kubernetes Secret); overrides one in the URL. Sentinel
    mode sends it to the sentinels too."""
    redis_pool_size: int = Field(default=32, ge=4)
    """Most Redis connections this replica opens (per node in cluster mode), whatever the number of streams:
    ``redis_followers`` of them follow the event Streams, the rest run commands (callers queue for one)."""
    redis_followers: int = Field(default=2, ge=1)
    """Follower connections (each reads many Streams with one blocking ``XREAD``); below ``redis_pool_size``."""
    subscriber_queue_size: int = Field(default=4096, ge=8)
    """Events buffered per Attach/HostLink subscriber; a subscriber that falls this far behind gets a
    resumable end of stream (it resumes with its token and loses nothing). Entries are shared, so a slot costs a
    pointer; keep it below ``events_maxlen`` so a resumed token is still inside the Stream."""
    max_pending_calls: int = Field(default=20_000, ge=1000)
    """Calls (mostly Attach and HostLink stream starts) gRPC may hold for this replica before its handlers pick
    them up. gRPC's own limits (1,000, then randomly refused up to 3,000) cancel streams of a burst of
    reconnecting surfaces before any handler runs, so nothing is logged and the client sees a bare
    CANCELLED; above this limit gRPC refuses calls RESOURCE_EXHAUSTED."""
    redis_wait_replicas: int = Field(default=-1, ge=-1)
    """Replicas that must acknowledge (``WAIT``) an epoch increment or a committed answer before it is
    acknowledged; -1 = the mode's default (standalone 0, sentinel and cluster 1)."""
    redis_wait_timeout_ms: int = Field(default=2000, gt=0)
    """How long the ``WAIT`` fence may take; fewer acknowledgements by then fail the call UNAVAILABLE."""
    host_id: str = Field(default="local", min_length=1, pattern=HOST_ID_PATTERN)
    """The Runtime Host this service serves: the Redis hash tag ``maka:{host_id}:...``."""
    host_ids: str = Field(default="", pattern=r"^(\*|[A-Za-z0-9_.,-]*)$")
    """Comma-separated Runtime Hosts this tier serves (each its own hash tag); empty = just ``host_id``; ``*`` =
    every Host a broker token names (the ``hosts`` of each ``broker`` entry of ``auth_tokens_file`` and
    ``auth_tokens_dir``, which must list them): the tokens are then the one list, so a team whose tokens file
    is removed is no longer served (deploy/README.md "Teams")."""
    lease_seconds: float = Field(default=30.0, gt=0)
    """Lease of a pending form; the broker's HostLink heartbeat renews it, the reaper closes it as ``lease_expired``."""
    form_wait_seconds: float = Field(default=300.0, gt=0)
    """Default bounded wait of a pending form before it closes as ``timed_out``."""
    form_wait_max_seconds: float = Field(default=590.0, gt=0)
    """Largest wait a broker may ask for; below the 600 s the official MCP SDKs give ``requestState``."""
    retention_seconds: float = Field(default=86400.0, gt=0)
    """How long settled records and event streams are kept (Redis TTL, garbage collection only)."""
    history_retention_seconds: float = Field(default=604800.0, gt=0)
    """How long a settled form stays in ``ListHistory`` (``maka history``, the web page's history): its entry
    (Tool, provenance, action, who answered, when, close reason, delivery; never a value) outlives the record
    (``retention_seconds``). Entries older than this are trimmed as new ones are written."""
    history_max_entries: int = Field(default=10000, gt=0)
    """Most history entries kept per Runtime Host (the oldest are trimmed first)."""
    audit_log: Path | None = None
    """File the audit events are appended to as JSON lines (logger ``maka.audit``: one event per form
    transition, ids, principal, action, reason and times only; docs/security.md "History and audit"). Unset:
    they go to the service's own log stream."""
    approver_policies_file: Path | None = None
    """JSON file of approver policies (docs/security.md "Who sees a form"): a form of a call made for a person is
    visible to and answerable by that person and the approvers of every policy whose ``server`` and ``tool``
    globs match its Tool, nobody else. Re-read on use when its modification or change time, size or inode changed
    (no restart or signal); a changed file that no longer parses keeps the policies in force and logs
    ``approver_policies_invalid``; a deleted file revokes every approver (``approver_policies_removed``). Unset: a
    person's forms reach only that person. A set but unreadable or malformed file exits 2 at start with
    ``approver_policies_invalid``."""
    events_maxlen: int = Field(default=10000, gt=0)
    """Approximate length cap (``XADD MAXLEN ~``) of each session event Stream and the settled Stream."""
    redis_timeout_seconds: float = Field(default=2.5, gt=1.0)
    """Socket read timeout of each Redis command, in seconds (an unreachable Redis then fails fast as
    UNAVAILABLE / ``STORE_UNAVAILABLE`` instead of hanging); must exceed the 1 s ``XREAD`` block of the
    Attach and HostLink followers."""
    max_connection_age_seconds: float = Field(default=1800.0, ge=0)
    """Close each client connection after about this long (GOAWAY), so Attach and HostLink streams spread
    over new replicas after a scale-out; clients resume transparently. 0 = never."""
    reaper_interval_seconds: float = Field(default=1.0, gt=0)
    """How often the reaper looks for expired leases and waits, and the Redis health probe runs."""
    surface_presence_seconds: float = Field(default=30.0, ge=3.0)
    """How long an attached surface's presence entry lives without a refresh (the replica holding the
    Attach stream refreshes it every third of this): a replica that dies leaves its surfaces listed at
    most this long (docs/design.md#attached-surfaces)."""
    surfaces_listed_max: int = Field(default=200, gt=0)
    """Most attached surfaces one ``ListSurfaces`` returns (the rest are counted in ``omitted``)."""
    attach_subscribe_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long an ``Attach`` stream may stay open before its ``subscribe`` frame; a stream that sends none
    ends ``INVALID_ARGUMENT`` / ``INVALID_REQUEST`` (an idle stream holds no resources past it)."""
    host_link_hello_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long a ``HostLink`` stream may stay open before its ``hello`` frame (a broker's ``Hello``); a stream
    that sends none ends ``INVALID_ARGUMENT`` / ``INVALID_REQUEST`` naming this setting."""
    answer_key_file: Path | None = None
    """File holding the base64 AES-256 key that seals answer values at rest in Redis (records, event and
    settled Streams, so the AOF too; docs/security.md "Answer values at rest"): a Kubernetes Secret
    (``maka-answer-key``), or ``STATE/answer.key`` written by ``maka up``. It may be a key ring
    (``<id> <base64 key>`` lines, the last seals; ``maka answer-key rotate``). Every replica of a tier must
    share it; a record sealed with a key not in it fails INTERNAL / ``ANSWER_UNSEALABLE``. Unset: answers are
    stored in plaintext and the service logs ``answer_values_unsealed`` at start (tests only). A set but
    unreadable or invalid file exits 2 with ``answer_key_invalid``."""

    notify_webhook_urls: SecretStr = SecretStr("")
    """Comma-separated URLs that receive a JSON ``POST`` when a form opens and when it expires soon
    (docs/operations.md#notifications): event, Interaction id, Tool, server, Host, session, deadline, a link to the
    form on the web page; never a value, ``requestState`` or token. Empty: none."""
    notify_slack_webhook_urls: SecretStr = SecretStr("")
    """Comma-separated Slack incoming-webhook URLs (or any receiver of ``{"text", "blocks"}``) notified like
    ``notify_webhook_urls``. A Slack URL's path is a secret: prefer ``notify_targets_file``."""
    notify_targets_file: Path | None = None
    """File of notification targets, one ``webhook URL`` or ``slack URL`` per line (``#`` comments), for URLs
    that hold a secret (a Kubernetes Secret); added to the two lists above. Logs and ``maka status`` show a
    target by scheme and host only."""
    notify_expiry_lead_seconds: float = Field(default=60.0, ge=0)
    """Send ``form_expiring`` this long before a pending form's deadline (0: never); forms whose whole wait is
    shorter get only ``form_opened``."""
    notify_timeout_seconds: float = Field(default=5.0, gt=0)
    """Bound of one whole notification attempt, from connect to the answer's last byte."""
    notify_attempts: int = Field(default=5, ge=1)
    """Attempts per notification (retried with the jittered backoff on a transport error, a timeout, HTTP 408,
    429 or 5xx; another 4xx is not retried)."""
    notify_queue_size: int = Field(default=1000, ge=1)
    """Notifications queued per target; when full the oldest is dropped (``maka_notifications_total``
    ``outcome="dropped"``)."""
    notify_status_file: Path | None = None
    """File the notification counters and failing targets are written to (JSON, ``0600``; ``maka up`` sets
    ``STATE/run/notify.json``, which ``maka status`` shows)."""
    web_public_url: str = ""
    """The web page's URL as people open it (e.g. ``https://maka.example.com``): notifications link to
    ``<url>/#/interaction/<id>``. ``maka up`` sets its own web page. Empty: notifications carry no link."""

    @model_validator(mode="after")
    def _wait_within_max(self) -> Settings:
        if self.form_wait_seconds > self.form_wait_max_seconds:
            raise ValueError("form_wait_seconds must not exceed form_wait_max_seconds")
        if self.redis_followers >= self.redis_pool_size:
            raise ValueError("redis_followers must be below redis_pool_size")
        return self

    @property
    def from_tokens(self) -> bool:
        """Whether the Hosts served are those the broker tokens name (``host_ids`` ``*``)."""
        return self.host_ids.strip() == "*"

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every Runtime Host listed, in configured order (``*``: :func:`services.interaction.main.served_hosts`)."""
        listed = [h.strip() for h in self.host_ids.split(",") if h.strip()]
        return tuple(dict.fromkeys(listed)) if listed else (self.host_id,)

    @property
    def wait_replicas(self) -> int:
        """The ``WAIT`` replica count in force (``redis_wait_replicas`` or the mode's default)."""
        if self.redis_wait_replicas >= 0:
            return self.redis_wait_replicas
        return 0 if self.redis_mode is RedisMode.STANDALONE else 1
