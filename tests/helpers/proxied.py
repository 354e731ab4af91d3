"""The client tests' shared stack, as their tests see it: :class:`Proxied` (the ``proxied`` fixture of
tests/clients/conftest.py yields one) and the broker timings it is started with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.helpers.stack import OnStack
from tests.reliability.harness import calls

KEEPALIVE_SECONDS = 3.0
"""The broker's CallTool keepalive on this stack: well inside nginx's 20 s read timeout."""
GRACE_SECONDS = 8.0
"""The broker's reattach grace on this stack."""


@dataclass
class Proxied(OnStack):
    """The shared stack and the counting server's call log."""

    log: Path

    def calls_of(self, tag: str) -> list[dict[str, object]]:
        """The ``tools/call`` requests with ``tag`` that reached the MCP server, in order."""
        return [c for c in calls(self.log) if c["tag"] == tag]
