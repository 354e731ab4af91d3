"""Prometheus metrics of every service (``maka_*``), served on ``MAKA_METRICS_LISTEN``.

Labels are small closed sets only (outcomes, reasons, codes, gRPC method names): never ids,
form values, tokens or ``requestState``. One registry per process (``REGISTRY``) so tests can read
values without global collisions.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

M = TypeVar("M", Counter, Gauge, Histogram)

REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry every ``maka_*`` metric is registered in."""

GRPC_REQUESTS = Counter(
    "maka_grpc_requests_total", "gRPC requests served, by full method and status code.", ["method", "code"],
    registry=REGISTRY,
)  # fmt: skip
GRPC_LATENCY = Histogram(
    "maka_grpc_request_seconds", "Time from a gRPC request's start to its end (streams: their whole life).",
    ["method"], registry=REGISTRY,
)  # fmt: skip
GRPC_MESSAGES = Counter(
    "maka_grpc_messages_total",
    "gRPC messages a server received or sent, by full method, direction and the message's oneof case"
    " (bench/README.md \"Messages per call\").", ["method", "direction", "kind"], registry=REGISTRY,
)  # fmt: skip
TOOL_CALLS = Counter(
    "maka_tool_calls_total", "Tool invocations settled by the broker, by terminal outcome.", ["outcome"],
    registry=REGISTRY,
)  # fmt: skip
MRTR_ROUNDS = Counter(
    "maka_mrtr_rounds_total", "input_required rounds the MCP provider continued (retries sent).", ["kind"],
    registry=REGISTRY,
)  # fmt: skip
PENDING_FORMS = Gauge(
    "maka_pending_forms", "Forms pending in this process's view (broker: awaiting invocations).", registry=REGISTRY
)
INTERACTIONS_SETTLED = Counter(
    "maka_interactions_settled_total", "Interactions that stopped being pending, by close reason.", ["reason"],
    registry=REGISTRY,
)  # fmt: skip
ANSWER_DELIVERIES = Counter(
    "maka_answer_deliveries_total",
    "Committed answers whose delivery was recorded: delivered (the provider confirmed it) or lost (the"
    " invocation ended first), by outcome.", ["outcome"], registry=REGISTRY,
)  # fmt: skip
CALL_FAILURES = Counter(
    "maka_call_failures_total",
    "Tool calls the broker failed, by failure code (the proto's FailureCode name without its prefix, lower"
    " case: auth_required, server_unavailable, ...).", ["code"], registry=REGISTRY,
)  # fmt: skip
SUBSCRIBER_OVERFLOWS = Counter(
    "maka_subscriber_overflows_total",
    "Attach/HostLink subscribers the fan-out dropped for falling a whole queue behind (their streams end"
    " resumably).", registry=REGISTRY,
)  # fmt: skip
NOTIFICATIONS = Counter(
    "maka_notifications_total",
    "Form notifications (docs/operations.md#notifications) by target kind (webhook, slack; expiring for the"
    " expiry-soon scheduler) and outcome: sent, failed (every attempt failed), dropped (a bounded queue was"
    " full: the oldest went).", ["target", "outcome"], registry=REGISTRY,
)  # fmt: skip
FRAMES_REJECTED = Counter(
    "maka_frames_rejected_total", "Provider frames the broker refused (failing closed), by reason.", ["reason"],
    registry=REGISTRY,
)  # fmt: skip


_CHILDREN: dict[tuple[object, tuple[str, ...]], object] = {}


def child(metric: M, *labels: str) -> M:
    """``metric.labels(*labels)``, memoised: the per-message counters run on every gRPC frame, and
    ``labels()`` takes a lock and re-checks the label names each time. Bounded, since every label set
    here is a small closed one (see the module docstring)."""
    key = (metric, labels)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*labels)
    return found  # type: ignore[return-value]


def exposition() -> bytes:
    """The current metrics in Prometheus text format."""
    return generate_latest(REGISTRY)


def start_metrics_server(listen: str) -> int:
    """Serve ``/metrics`` on ``host:port`` (port 0 picks one) in a daemon thread; returns the bound port."""
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=REGISTRY)
    bound: int = server.server_port
    return bound
