"""The reliability suites' shared stack, as their tests see it: :class:`Observed` (the ``observed`` fixture
of tests/reliability/conftest.py yields one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stack.topology import Stack
from tests.helpers.stack import RunningStack
from tests.reliability.harness import calls

SERVICES = (Stack.INTERACTION, Stack.BROKER, Stack.PROVIDER)


@dataclass
class Observed:
    """The shared stack, the counting server's call log and each service's metrics port."""

    running: RunningStack = field(repr=False)
    log: Path
    metrics: dict[str, int]

    @property
    def broker(self) -> str:
        return self.running.stack.address(Stack.BROKER)

    @property
    def interaction(self) -> str:
        return self.running.stack.address(Stack.INTERACTION)

    @property
    def redis_url(self) -> str:
        return self.running.stack.redis_url

    def calls_of(self, *tags: str) -> list[dict[str, object]]:
        """The ``tools/call`` requests of ``tags`` that reached the MCP server, in order."""
        return [c for c in calls(self.log) if c["tag"] in tags]
