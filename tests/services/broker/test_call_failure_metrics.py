"""Every call the broker fails is counted by its failure code (``maka_call_failures_total``), the series the
sign-in alert reads (deploy/README.md "Alerts")."""

from __future__ import annotations

from maka.broker.v1 import broker_pb2
from services.broker.settlement import failure_event
from services.core import metrics


def _count(code: str) -> float:
    return metrics.REGISTRY.get_sample_value("maka_call_failures_total", {"code": code}) or 0.0


def test_a_failure_event_counts_its_code_in_lower_case_without_the_prefix() -> None:
    before = _count("auth_required")
    event = failure_event(broker_pb2.FAILURE_CODE_AUTH_REQUIRED, "sign in to examples")
    assert event.failure.code == broker_pb2.FAILURE_CODE_AUTH_REQUIRED
    assert _count("auth_required") == before + 1
    assert 'code="auth_required"' in metrics.exposition().decode()
