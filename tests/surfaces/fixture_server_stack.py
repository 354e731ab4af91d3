"""The stack the surfaces' protocol tests share: :class:`FixtureServerStack` runs the low-level SDK fixture
server (:mod:`tests.fixtures.mcp_servers.mrtr_server`, stdio behind the tee proxy) twice, ``fx`` with
``requestStateTtl`` :data:`LONG_TTL` s and ``fxshort`` with :data:`SHORT_TTL` s, in the stack as ``maka up``
starts it (with the web surface), on an event loop in a background thread
(tests/surfaces/test_server_results_and_rounds.py, test_form_answer_rules.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.acceptance.harness import acceptance_stack, tee_stdio, write_config
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire
from tests.reliability.harness import ToolCall
from tests.surfaces.acceptance_stack import AcceptanceStackThread

SHORT_TTL = 4.0
"""``requestStateTtl`` of ``fxshort``: short enough that a round runs out within the test."""
LONG_TTL = 120.0
"""``requestStateTtl`` of ``fx``."""


class FixtureServerStack(AcceptanceStackThread):
    """The stack with ``fx`` and ``fxshort`` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.fx = Wire(directory / "fx.log")
        self.short = Wire(directory / "fxshort.log")

    def start(self) -> Any:
        self.thread.start()
        server = ("tests.fixtures.mcp_servers.mrtr_server", "--kind", "low")
        config = write_config(
            self.directory,
            {
                "fx": {**tee_stdio(self.fx.path, *server), "requestStateTtl": LONG_TTL},
                "fxshort": {**tee_stdio(self.short.path, *server), "requestStateTtl": SHORT_TTL},
            },
        )
        self._cm = acceptance_stack(self.directory, config, web=True)
        self.running = self.run(self._cm.__aenter__())
        return self.running


@contextmanager
def running_fixture_server_stack(directory: Path) -> Iterator[FixtureServerStack]:
    """A started :class:`FixtureServerStack` in ``directory``, stopped on exit (a module fixture's body)."""
    stack = FixtureServerStack(directory)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


async def nth_awaiting(call: ToolCall, n: int) -> str:
    """The id of the ``n``-th form ``call`` waits for (1-based), once it is announced."""

    def ids() -> list[str]:
        return [e.awaiting_interaction.interaction_id for e in call.events if e.HasField("awaiting_interaction")]

    await eventually(lambda: len(ids()) >= n or call.kinds()[-1:] in (["failure"], ["result"]), timeout=60)
    assert len(ids()) >= n, call.kinds()
    return ids()[n - 1]


async def marker_call(wire: Wire, broker: str, tag: str) -> None:
    """Call ``echo`` with ``tag`` and wait until its leg is on ``wire``: everything sent before is logged."""
    async with ToolCall(broker, wire.path.stem + ":echo", {"marker": tag}, session=f"marker-{tag}") as call:
        final = await call.terminal(timeout=60)
    assert final.HasField("result"), final
    await wire.wait_tool_calls(1, "echo", marker=tag)
