"""gRPC keepalive options shared by the servers (:mod:`services.core.serving`) and the client channels
(:mod:`services.core.channels`): both ends of a long-lived stream must agree on the ping policy.
"""

from __future__ import annotations

KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
)
"""Keepalive for long-lived streams (HostLink, Attach, Connect): dead peers are noticed in ~30 s."""
