"""The surfaces' shared acceptance stack: :class:`AcceptanceStackThread` runs the stack (as ``maka up`` starts it,
with the web surface and the bundled ``examples`` deploy server behind the tee proxy) on an event loop in a
background thread, so the synchronous Playwright tests and the async TUI/CLI tests share one stack
(tests/surfaces/test_same_fixture.py; tests/surfaces/fixture_server_stack.py builds on it)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from maka.broker.v1 import broker_pb2
from surfaces.common.interactions import FormOpened, FormSnapshot, Interactions
from tests.acceptance.harness import acceptance_stack, tee_stdio, write_config
from tests.helpers.loop_thread import LoopThread
from tests.helpers.stack import RunningStack, call_tool, result_text
from tests.helpers.wire import Wire

T = TypeVar("T")
MAKA = [sys.executable, "-m", "surfaces.cli.main"]
TIMEOUT_MS = 20_000

EXPECTED = {
    "accept": (
        "Deployed {artifact} to staging.",
        {"action": "accept", "content": {"environment": "staging", "confirm": True}},
    ),
    "decline": ("Deployment of {artifact} was declined by the user; nothing was deployed.", {"action": "decline"}),
    "cancel": ("Deployment of {artifact} was cancelled by the user; nothing was deployed.", {"action": "cancel"}),
}
"""Per action: the Tool's final text and the bare ``inputResponses["target"]`` the server must receive."""

ACTIONS = list(EXPECTED)


class AcceptanceStackThread:
    """The stack on an event loop in a background thread; :meth:`run` / :meth:`submit` use that loop."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.wire = Wire(directory / "examples.log")
        self.thread = LoopThread("same-fixture-stack")
        self._cm: Any = None
        self.running: RunningStack | None = None

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return self.thread.submit(coro)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return self.submit(coro).result(timeout)

    def start(self) -> RunningStack:
        self.thread.start()
        config = write_config(self.directory, {"examples": tee_stdio(self.wire.path, "examples.deploy_server")})
        self._cm = acceptance_stack(self.directory, config, web=True)
        self.running = self.run(self._cm.__aenter__())
        return self.running

    def stop(self) -> None:
        try:
            if self._cm is not None:
                self.run(self._cm.__aexit__(None, None, None))
        finally:
            self.thread.stop(30)

    @property
    def endpoints(self) -> Any:
        assert self.running is not None
        return self.running.endpoints

    @property
    def state_dir(self) -> Path:
        assert self.running is not None
        return self.running.stack.state_dir

    def deploy(self, artifact: str, session: str) -> concurrent.futures.Future[list[broker_pb2.CallToolResponse]]:
        """Start ``examples:deploy`` for ``artifact`` in ``session`` (runs on the stack's loop)."""
        return self.submit(call_tool(self.endpoints.broker, "examples:deploy", {"artifact": artifact}, session=session))

    def assert_reached_server(self, artifact: str, action: str, events: list[broker_pb2.CallToolResponse]) -> None:
        """The call ended with the action's text and the server got exactly the action's bare response."""
        text, response = EXPECTED[action]
        assert result_text(events) == text.format(artifact=artifact)
        first, retry = self.wire.tool_calls("deploy", where={"artifact": artifact})
        assert "inputResponses" not in first["params"]
        assert retry["params"]["inputResponses"] == {"target": response}
        assert retry["params"]["arguments"] == {"artifact": artifact}


async def first_pending(stack: AcceptanceStackThread, session: str) -> str:
    """The id of the first form of ``session``, from the Interaction service's ``Attach`` feed (bounded)."""
    async with Interactions.connect(stack.endpoints.interaction) as client, asyncio.timeout(60):
        feed = client.attach([session])
        try:
            async for event in feed:
                if isinstance(event, FormSnapshot) and event.pending:
                    return event.pending[0].interaction_id
                if isinstance(event, FormOpened):
                    return event.interaction.interaction_id
        finally:
            await feed.aclose()
    raise AssertionError("the Attach feed ended")


async def run_maka(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *MAKA, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
