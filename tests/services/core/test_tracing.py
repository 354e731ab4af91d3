"""Tracing: allowlisted span attributes only, and gRPC spans without payloads."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.core import tracing


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    return memory


def test_a_span_carries_allowlisted_ids_and_codes(exporter: InMemorySpanExporter) -> None:
    with tracing.span("mrtr.round", invocation_id="inv-1", round=2, code="OK"):
        pass
    finished = [s for s in exporter.get_finished_spans() if s.name == "maka.mrtr.round"]
    assert finished
    assert dict(finished[-1].attributes or {}) == {"maka.invocation_id": "inv-1", "maka.round": 2, "maka.code": "OK"}


def test_a_span_refuses_an_attribute_outside_the_allowlist(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError, match="request_state"), tracing.span("leak", request_state="CANARY"):
        pass
    assert all("CANARY" not in str(s.attributes) for s in exporter.get_finished_spans())


def test_an_unknown_exporter_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown MAKA_OTEL_EXPORTER"):
        tracing.configure("test", "zipkin")


def test_without_a_tracer_provider_a_span_is_the_no_op_span_and_still_checks_its_attributes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    with tracing.span("mrtr.round", round=1) as current:
        assert current is trace.INVALID_SPAN
    with pytest.raises(ValueError, match="request_state"), tracing.span("leak", request_state="CANARY"):
        pass
