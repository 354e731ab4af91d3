"""Observability on the shared stack of real processes: each service's Prometheus ``/metrics`` counts
what happened (calls, rounds, pending forms, settlement reasons, frame rejections) and every process
exports spans of the data path (``MAKA_OTEL_EXPORTER=console``).

Sources: docs/design.md#security, ``services/core/metrics.py`` and ``services/core/tracing.py``,
docs/security.md#observability-without-secrets.
"""

from __future__ import annotations

import asyncio

import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.core.channels import open_channel
from stack.topology import Stack
from tests.helpers.observed import Observed
from tests.reliability.harness import ToolCall, answer, metric_value, scrape

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="package")]


async def _values(observed: Observed) -> dict[str, float]:
    broker = await scrape(observed.metrics[Stack.BROKER])
    interaction = await scrape(observed.metrics[Stack.INTERACTION])
    provider = await scrape(observed.metrics[Stack.PROVIDER])
    return {
        "succeeded": metric_value(broker, "maka_tool_calls_total", outcome="succeeded"),
        "pending": metric_value(broker, "maka_pending_forms"),
        "not_registered": metric_value(broker, "maka_frames_rejected_total", reason="NOT_REGISTERED"),
        "calltool_ok": metric_value(
            broker, "maka_grpc_requests_total", method="/maka.broker.v1.CapabilityBrokerService/CallTool", code="OK"
        ),
        "answered": metric_value(interaction, "maka_interactions_settled_total", reason="answered"),
        "answer_ok": metric_value(
            interaction, "maka_grpc_requests_total", method="/maka.interaction.v1.InteractionService/Answer", code="OK"
        ),
        "form_rounds": metric_value(provider, "maka_mrtr_rounds_total", kind="form"),
        "health_checks": metric_value(
            provider, "maka_grpc_requests_total", method="/grpc.health.v1.Health/Check", code="OK"
        ),
    }


async def test_each_service_counts_a_form_round_and_a_rejected_frame_in_its_metrics(observed: Observed) -> None:
    before = await _values(observed)
    async with ToolCall(observed.broker, "counter:ask", {"tag": "metrics"}, session="metrics") as call:
        interaction_id = await call.awaiting()
        during = await _values(observed)
        assert during["pending"] >= before["pending"] + 1
        await answer(observed.interaction, interaction_id, "counted")
        await call.terminal()
    # A provider frame sent before Register is refused (fail closed) and counted.
    async with open_channel(observed.broker) as channel:
        stream = broker_pb2_grpc.CapabilityBrokerServiceStub(channel).Connect()
        await stream.write(broker_pb2.ConnectRequest(heartbeat=broker_pb2.ProviderHeartbeat()))
        async with asyncio.timeout(10):
            reply = await stream.read()
        assert isinstance(reply, broker_pb2.ConnectResponse)
        assert reply.rejected.reason == broker_pb2.REJECT_REASON_NOT_REGISTERED
        stream.cancel()
    after = await _values(observed)
    assert after["succeeded"] == before["succeeded"] + 1
    assert after["pending"] == before["pending"]
    assert after["not_registered"] == before["not_registered"] + 1
    assert after["calltool_ok"] == before["calltool_ok"] + 1
    assert after["answered"] == before["answered"] + 1
    assert after["answer_ok"] == before["answer_ok"] + 1
    assert after["form_rounds"] == before["form_rounds"] + 1
    assert after["health_checks"] >= 1


async def test_every_service_exports_spans_of_the_data_path_to_the_console(observed: Observed) -> None:
    async with ToolCall(observed.broker, "counter:ask", {"tag": "spans"}, session="spans") as call:
        await answer(observed.interaction, await call.awaiting(), "traced")
        await call.terminal()
    running = observed.running
    assert '"name": "/maka.broker.v1.CapabilityBrokerService/CallTool"' in running.log(Stack.BROKER)
    assert '"name": "/maka.interaction.v1.InteractionService/Answer"' in running.log(Stack.INTERACTION)
    provider = running.log(Stack.PROVIDER)
    assert '"name": "maka.mcp.tools_call"' in provider  # one span per tools/call leg (both rounds)
    assert '"maka.round": 1' in provider
