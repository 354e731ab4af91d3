"""Prometheus endpoint: served when configured, labels are closed sets."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Sequence

import grpc.aio
import pytest

from services.core import metrics
from services.core.serving import start_server
from services.core.settings import GrpcServerSettings


class EmptyApp:
    service_names: Sequence[str] = ("maka.test.Empty",)

    def register(self, server: grpc.aio.Server) -> None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


async def test_the_metrics_endpoint_serves_maka_metrics_when_configured() -> None:
    running = await start_server(EmptyApp(), GrpcServerSettings(listen="127.0.0.1:0", metrics_listen="127.0.0.1:0"))
    try:
        assert running.metrics_port
        metrics.FRAMES_REJECTED.labels("CROSS_CONNECTION").inc()
        body = await asyncio.to_thread(_get, f"http://127.0.0.1:{running.metrics_port}/metrics")
        assert 'maka_frames_rejected_total{reason="CROSS_CONNECTION"}' in body
    finally:
        await running.stop()


async def test_a_second_server_cannot_bind_a_port_already_served() -> None:
    first = await start_server(EmptyApp(), GrpcServerSettings(listen="127.0.0.1:0"))
    try:
        with pytest.raises(RuntimeError, match="cannot bind"):
            await start_server(EmptyApp(), GrpcServerSettings(listen=f"127.0.0.1:{first.port}"))
    finally:
        await first.stop()
