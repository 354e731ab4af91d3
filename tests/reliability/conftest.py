"""The reliability package's shared stack: one set of real processes with tracing and metrics on.

``observed`` is package-scoped (starting a stack takes seconds) and used by the race, secrecy,
observability and endpoint-fuzz suites, whose tests run in the package event loop
(``pytest.mark.asyncio(loop_scope="package")``). Every child prints its spans (``MAKA_OTEL_EXPORTER=console``)
into its captured output and serves ``/metrics`` on its own port (``Observed.metrics``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.helpers.observed import SERVICES, Observed
from tests.reliability.harness import free_port, reliability_stack, tools_ready


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def observed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Observed]:
    """The package's stack (tracing to the console, metrics per service)."""
    metrics = {name: free_port() for name in SERVICES}
    child_env = {name: {"MAKA_METRICS_LISTEN": f"127.0.0.1:{port}"} for name, port in metrics.items()}
    async with reliability_stack(
        tmp_path_factory.mktemp("observed"),
        # Console span export writes every span synchronously through the supervisor's pipe; on a loaded
        # 2-core machine that can stall a service's loop past the 2.5 s default Redis read timeout and turn
        # a 200-call burst into spurious STORE_UNAVAILABLE. This stack proves races and secrecy, not outage
        # timing (tests/reliability/test_faults.py keeps the default timeout on its own stack).
        env={"MAKA_OTEL_EXPORTER": "console", "MAKA_REDIS_TIMEOUT_SECONDS": "10"},
        child_env=child_env,
        echo=False,
    ) as (running, log):
        await tools_ready(running)
        yield Observed(running, log, metrics)
