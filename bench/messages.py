"""Messages per call: the gRPC messages each hop moves and the Redis commands it runs for one call.

Reads ``maka_grpc_messages_total`` (every service's server interceptor counts each message it receives
or sends, by method and oneof case; bench/README.md "Messages per call") from each service's ``/metrics``
and the embedded Redis's ``INFO commandstats`` before and after ``calls`` sequential calls, and reports
the per-call difference. Counts, not times: a test asserts them (tests/bench/test_messages.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import redis.asyncio
from prometheus_client.parser import text_string_to_metric_families

from services.interaction.store import script_text

METRIC = "maka_grpc_messages_total"


@dataclass(frozen=True)
class MessageCounts:
    """Per-call figures: ``grpc[(service, method, direction, kind)]`` and ``redis[command]``."""

    calls: int
    grpc: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    redis: dict[str, float] = field(default_factory=dict)
    """Round trips a client sent (``MONITOR``), by command; a script (``EVALSHA``) is one."""
    redis_in_scripts: dict[str, float] = field(default_factory=dict)
    """Commands the scripts ran inside Redis (no round trip each)."""

    def grpc_total(self, method_suffix: str = "") -> float:
        """gRPC messages per call (of the methods ending in ``method_suffix``)."""
        return sum(n for (_, method, _, _), n in self.grpc.items() if method.endswith(method_suffix))

    def redis_total(self) -> float:
        """Redis commands per call (``EVALSHA`` counted once: a script is one round trip)."""
        return sum(self.redis.values())

    def as_json(self) -> dict[str, object]:
        """A JSON shape of the figures (per call)."""
        by_method: dict[str, float] = {}
        for (_, method, _, _), n in self.grpc.items():
            name = method.rsplit("/", 1)[-1]
            by_method[name] = by_method.get(name, 0.0) + n
        return {
            "calls": self.calls,
            "grpc_messages_per_call": round(self.grpc_total(), 2),
            "grpc_by_method": {k: round(v, 2) for k, v in sorted(by_method.items())},
            "grpc_by_kind": {
                f"{method.rsplit('/', 1)[-1]} {direction} {kind}": round(n, 2)
                for (_, method, direction, kind), n in sorted(self.grpc.items())
            },
            "redis_commands_per_call": round(self.redis_total(), 2),
            "redis_by_command": {k: round(v, 2) for k, v in sorted(self.redis.items())},
            "redis_in_scripts": {k: round(v, 2) for k, v in sorted(self.redis_in_scripts.items())},
        }


def _scrape(url: str) -> dict[tuple[str, str, str], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    out: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == METRIC:
                labels = sample.labels
                out[(labels["method"], labels["direction"], labels["kind"])] = sample.value
    return out


async def _grpc_snapshot(urls: Mapping[str, str]) -> dict[tuple[str, str, str, str], float]:
    out: dict[tuple[str, str, str, str], float] = {}
    for service, url in urls.items():
        for key, value in (await asyncio.to_thread(_scrape, url)).items():
            out[(service, *key)] = value
    return out


_PERIODIC_SCRIPTS = frozenset(hashlib.sha1(script_text(name).encode()).hexdigest() for name in ("heartbeat.lua",))
"""Scripts the broker runs on a timer (the HostLink heartbeat renewing leases), not per call: when one lands
inside the counting window it is left out of the per-call figures (``periodic`` counts them)."""


class _Monitor:
    """``MONITOR`` on one connection: every command with whether a client or a script sent it."""

    def __init__(self, url: str) -> None:
        self._client = redis.asyncio.Redis.from_url(url)
        self.client_commands: Counter[str] = Counter()
        self.script_commands: Counter[str] = Counter()
        self.periodic = 0
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self.trace: list[str] = []

    async def _run(self) -> None:
        in_periodic = False
        async with self._client.monitor() as monitor:
            self._ready.set()
            async for command in monitor.listen():
                text = str(command["command"])
                name = text.split(" ", 1)[0].strip('"').lower()
                self.trace.append(f"{command.get('client_type')} {command.get('client_port')} {text[:100]}")
                if name == "ping":
                    continue
                if command.get("client_type") == "lua":
                    # a script's commands follow its EVALSHA line (Redis runs one script at a time)
                    if not in_periodic:
                        self.script_commands[name] += 1
                    continue
                in_periodic = name == "evalsha" and _script_sha(text) in _PERIODIC_SCRIPTS
                if in_periodic:
                    self.periodic += 1
                else:
                    self.client_commands[name] += 1

    async def __aenter__(self) -> _Monitor:
        self._task = asyncio.create_task(self._run())
        async with asyncio.timeout(10):
            await self._ready.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, redis.RedisError):
            await self._task
        await self._client.aclose()


def _script_sha(text: str) -> str:
    """The SHA of a MONITOR line ``"evalsha" "<sha>" ...``."""
    parts = text.split(" ", 2)
    return parts[1].strip('"').lower() if len(parts) > 1 else ""


async def count_messages(
    metrics_urls: Mapping[str, str],
    redis_url: str,
    call: Callable[[], Awaitable[None]],
    calls: int,
    trace: list[str] | None = None,
) -> MessageCounts:
    """Run ``call`` ``calls`` times in sequence; the per-call gRPC messages and Redis commands in between."""
    grpc_before = await _grpc_snapshot(metrics_urls)
    async with _Monitor(redis_url) as monitor:
        for _ in range(calls):
            await call()
        grpc_after = await _grpc_snapshot(metrics_urls)
    if trace is not None:
        trace.extend(monitor.trace)
    grpc = {k: (v - grpc_before.get(k, 0.0)) / calls for k, v in grpc_after.items()}
    return MessageCounts(
        calls,
        {k: v for k, v in grpc.items() if v},
        {k: v / calls for k, v in monitor.client_commands.items()},
        {k: v / calls for k, v in monitor.script_commands.items()},
    )
