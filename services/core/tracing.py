"""OpenTelemetry tracing of the data path, free of secrets.

:func:`configure` installs a TracerProvider (exporter ``console``; ``otlp``, batched OTLP/gRPC to a
collector such as the OpenTelemetry Collector; or an in-memory exporter passed by tests) and
instruments grpc.aio servers and clients, which record method names and status codes only — never
message payloads. Our own spans go through :func:`span`, which accepts attributes only from
:data:`ALLOWED_ATTRIBUTES` (ids, codes, counts): a form value or ``requestState`` cannot become a
span attribute, because any other key raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

ALLOWED_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "maka.session_id",
        "maka.turn_id",
        "maka.invocation_id",
        "maka.interaction_id",
        "maka.registration_id",
        "maka.provider_id",
        "maka.tool",
        "maka.round",
        "maka.outcome",
        "maka.code",
        "maka.close_reason",
        "maka.action",
        "maka.field_count",
        "maka.input_request_count",
    }
)
"""The only attribute keys :func:`span` accepts."""

_provider: TracerProvider | None = None


def configure(service: str, exporter: str | SpanExporter, *, endpoint: str = "") -> None:
    """Install tracing for ``service`` once per process.

    ``exporter`` is ``"console"``, ``"otlp"`` (OTLP/gRPC to ``endpoint``, e.g.
    ``http://otel-collector:4317``; empty = the exporter's own ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``localhost:4317``), ``""`` (off: nothing installed) or a ``SpanExporter`` instance.
    Raises ``ValueError`` for an unknown exporter name.
    """
    global _provider
    if _provider is not None or exporter == "":
        return
    # Imported only when tracing is on: the OTLP exporter, the gRPC instrumentation and the resource
    # detectors add about a second to every process start.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer
    from opentelemetry.sdk.resources import Resource

    processor: SpanProcessor
    if exporter == "otlp":
        # Batched: an OTLP export is a network call, never on the request path.
        otlp = OTLPSpanExporter(endpoint=endpoint or None, insecure=True if endpoint.startswith("http://") else None)
        processor = BatchSpanProcessor(otlp)
    elif isinstance(exporter, str):
        if exporter != "console":
            raise ValueError(f"unknown MAKA_OTEL_EXPORTER {exporter!r}: use 'console', 'otlp' or leave it empty")
        processor = SimpleSpanProcessor(ConsoleSpanExporter(service_name=service))
    else:
        processor = SimpleSpanProcessor(exporter)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorServer().instrument()  # type: ignore[no-untyped-call]
    GrpcAioInstrumentorClient().instrument()  # type: ignore[no-untyped-call]
    _provider = provider


def shutdown() -> None:
    """Flush and stop the installed exporter (spans still batched are sent); no-op when tracing is off."""
    if _provider is not None:
        _provider.shutdown()


@contextmanager
def span(name: str, **attributes: str | int) -> Iterator[trace.Span]:
    """A span named ``maka.<name>`` with allowlisted attributes (keys without the ``maka.`` prefix).

    Raises ``ValueError`` when an attribute key is not in :data:`ALLOWED_ATTRIBUTES`.
    """
    attrs = {f"maka.{key}": value for key, value in attributes.items()}
    unknown = set(attrs) - ALLOWED_ATTRIBUTES
    if unknown:
        raise ValueError(f"span attributes not allowed: {sorted(unknown)}")
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # No provider installed (tracing off, the default): the API would build a no-op span through a
        # proxy tracer and a context token on every call; yield the no-op span directly.
        yield trace.INVALID_SPAN
        return
    with trace.get_tracer("maka").start_as_current_span(f"maka.{name}", attributes=attrs) as current:
        yield current
