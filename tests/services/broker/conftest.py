"""Fixtures of the broker tests: a :class:`~tests.helpers.broker.BrokerStack` over the real Interaction service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers.broker import BrokerStack, StackFactory, start_broker, start_interaction


@pytest.fixture
async def make_stack(redis_url: str) -> AsyncIterator[StackFactory]:
    """Start a stack: ``await make_stack(execution_timeout_seconds=..., interaction={...})``."""
    stacks: list[BrokerStack] = []

    async def factory(*, interaction: dict[str, Any] | None = None, **broker: Any) -> BrokerStack:
        isettings, iserver = await start_interaction(redis_url, **(interaction or {}))
        bsettings, bserver, app = await start_broker(f"127.0.0.1:{iserver.port}", **broker)
        stack = BrokerStack(isettings, iserver, bsettings, bserver, app)
        stacks.append(stack)
        return stack

    yield factory
    for stack in stacks:
        await stack.aclose()


@pytest.fixture
async def stack(make_stack: StackFactory) -> BrokerStack:
    """A stack with a 5 s execution timeout."""
    return await make_stack(execution_timeout_seconds=5.0)
