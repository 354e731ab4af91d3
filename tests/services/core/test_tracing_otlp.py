"""``MAKA_OTEL_EXPORTER=otlp``: a real service process sends its spans to an OTLP/gRPC collector.

The collector is a real grpc.aio server implementing the OTLP ``TraceService`` (from the
``opentelemetry-proto`` package the exporter depends on), on loopback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core.channels import open_channel
from services.core.settings import ClientTlsSettings
from tests.helpers.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every exported span as (service.name, span name)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str]] = []
        self.arrived = asyncio.Event()

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend((service, span.name) for span in scope_spans.spans)
        self.arrived.set()
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
async def collector() -> AsyncIterator[tuple[Collector, int]]:
    server = grpc.aio.server()
    servicer = Collector()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, port
    await server.stop(0)


def start_service(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.interaction.main"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL
    )


@pytest.mark.slow
async def test_a_service_process_exports_its_rpc_spans_to_an_otlp_collector(
    redis_url: str, tmp_path: Path, collector: tuple[Collector, int]
) -> None:
    servicer, collector_port = collector
    port_file = tmp_path / "port"
    env = {
        **os.environ,
        "MAKA_LISTEN": "127.0.0.1:0",
        "MAKA_PORT_FILE": str(port_file),
        "MAKA_REDIS_URL": redis_url,
        "MAKA_HOST_ID": "otlp-test",
        "MAKA_GRACE_SECONDS": "0.5",
        "MAKA_OTEL_EXPORTER": "otlp",
        "MAKA_OTEL_ENDPOINT": f"http://127.0.0.1:{collector_port}",
    }
    env.pop("MAKA_AUTH_TOKENS_FILE", None)
    process = start_service(env)
    try:

        def ready() -> str | None:
            assert process.poll() is None, "service exited"
            return (port_file.read_text() or None) if port_file.exists() else None

        port = int(await eventually(ready, timeout=30, what="port file"))
        async with open_channel(f"127.0.0.1:{port}", tls=ClientTlsSettings()) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            await stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["s-otlp"]))
        # SIGTERM flushes the batch exporter on the way out.
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 15)
        async with asyncio.timeout(15):
            await servicer.arrived.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert ("maka.interaction.v1.InteractionService", "/maka.interaction.v1.InteractionService/ListPending") in set(
        servicer.spans
    ), servicer.spans
