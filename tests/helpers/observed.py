"""The reliability suites' shared stack, as their tests see it: :class:`Observed` (the ``observed`` fixture
of tests/reliability/conftest.py yields one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stack.topology import Stack
from tests.helpers.stack import OnStack
from tests.reliability.harness import calls

SERVICES = (Stack.INTERACTION, Stack.BROKER, Stack.PROVIDER)


@dataclass
class Observed(OnStack):
    """The shared stack, the counting server's call log and each service's metrics port."""

    log: Path
    metrics: dict[str, int]

    @property
    def redis_url(self) -> str:
        return self.running.stack.redis_url

    def calls_of(self, *tags: str) -> list[dict[str, object]]:
        """The ``tools/call`` requests of ``tags`` that reached the MCP server, in order."""
        return [c for c in calls(self.log) if c["tag"] in tags]
