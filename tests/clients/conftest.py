"""The client tests' shared stack: real processes (Redis, Interaction service, broker, MCP provider
with the counting MCP server) with short CallTool keepalive and reattach grace, and a real nginx
gRPC proxy (``grpc_read_timeout 20s``) in front of the broker, started per test.

``proxied`` is package-scoped (starting the stack takes seconds); tests run in the package loop
(``pytest.mark.asyncio(loop_scope="package")``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from stack.topology import Stack
from tests.helpers.nginx import Nginx, grpc_proxy
from tests.helpers.proxied import GRACE_SECONDS, KEEPALIVE_SECONDS, Proxied
from tests.reliability.harness import reliability_stack, tools_ready


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def proxied(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Proxied]:
    async with reliability_stack(
        tmp_path_factory.mktemp("proxied"),
        child_env={
            Stack.BROKER: {
                "MAKA_CALL_KEEPALIVE_SECONDS": str(KEEPALIVE_SECONDS),
                "MAKA_REATTACH_GRACE_SECONDS": str(GRACE_SECONDS),
            }
        },
        echo=False,
    ) as (running, log):
        await tools_ready(running)
        yield Proxied(running, log)


@pytest_asyncio.fixture(loop_scope="package")
async def nginx(proxied: Proxied, tmp_path: Path) -> AsyncIterator[Nginx]:
    """A real nginx h2c gRPC proxy in front of the shared stack's broker."""
    proxy = grpc_proxy(tmp_path / "nginx", proxied.broker, read_timeout="20s")
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
