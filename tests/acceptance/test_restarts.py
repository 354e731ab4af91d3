"""RFC acceptance criteria about losing and restarting parts (8, 9; release paths of 16), through the
whole stack: processes killed with SIGKILL and restarted by the ``Stack`` supervisor, MCP servers that
crash, and a Tool binding replaced by ``tools/list_changed``.

One stack per module (each test waits until every MCP server's Tools are registered again before it
starts) with two real SDK servers over stdio behind the tee proxy: ``fx`` (low-level fixture) and
``hs`` (high-level ``MCPServer`` fixture, whose ``mutate`` Tool redefines ``ask``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from maka_client import ReattachPolicy
from services.core.form import Action, Answer
from services.core.status import error_from_rpc
from surfaces.common.interactions import FormSnapshot, Interactions
from tests.acceptance.harness import acceptance_stack, tee_stdio, write_config
from tests.helpers.stack import RunningStack, answer, pending_forms
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire
from tests.reliability.harness import ToolCall, get_interaction, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

PROFILE = {"name": form_pb2.Value(string_value="Ada")}


@dataclass
class Restartable:
    running: RunningStack
    fx: Wire
    hs: Wire

    @property
    def broker(self) -> str:
        return self.running.endpoints.broker

    @property
    def interaction(self) -> str:
        return self.running.endpoints.interaction

    async def ready(self, name: str | None = None) -> None:
        """Wait (bounded) until ``name`` (when given) is ready again and every server's Tools are listed."""
        if name is not None:
            await self.running.wait_for("ready", name, timeout=90)

        async def every_server_listed() -> bool:
            # The stack's wait ends early for a server the provider reports failed; a reconnect attempt that
            # failed is retried with backoff, so wait for the next report rather than fail on this one.
            return await self.running.stack.wait_for_tools() == set()

        await eventually(every_server_listed, timeout=90, interval=0.5, what="every server's Tools listed")

    async def refused_late_answer(self, record: interaction_pb2.Interaction) -> str:
        """The stable reason the Interaction service gives a late answer to ``record``."""
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await answer(self.interaction, record, form_pb2.ACTION_ACCEPT, PROFILE, submission_id="late")
        return error_from_rpc(refused.value).reason


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def restartable(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Restartable]:
    root = tmp_path_factory.mktemp("acceptance-restarts")
    fx, hs = Wire(root / "fx.log"), Wire(root / "hs.log")
    config = write_config(
        root,
        {
            "fx": tee_stdio(fx.path, "tests.fixtures.mcp_servers.mrtr_server", "--kind", "low"),
            "hs": tee_stdio(hs.path, "tests.fixtures.mcp_servers.mrtr_server", "--kind", "high"),
        },
    )
    async with acceptance_stack(root, config) as running:
        yield Restartable(running, fx, hs)


async def test_c09_a_view_only_surface_reconnect_rehydrates_the_pending_form_and_can_answer_it(
    restartable: Restartable,
) -> None:
    await restartable.ready()
    backoff = ReattachPolicy(initial_delay=0.05, max_delay=0.5)
    async with ToolCall(restartable.broker, "fx:ask", {"note": "c09-view"}, session="c09-view") as call:
        interaction_id = await call.awaiting()
        async with Interactions.connect(restartable.interaction, reattach=backoff) as first_view:
            feed = first_view.attach(["c09-view"])
            seen = await asyncio.wait_for(anext(feed), 30)
            assert isinstance(seen, FormSnapshot)
            assert [view.interaction_id for view in seen.pending] == [interaction_id]
            await feed.aclose()
        # The first view is gone; a new one in the same Host epoch gets the same form back.
        async with Interactions.connect(restartable.interaction, reattach=backoff) as second_view:
            feed = second_view.attach(["c09-view"])
            again = await asyncio.wait_for(anext(feed), 30)
            await feed.aclose()
            assert isinstance(again, FormSnapshot)
            [view] = again.pending
            assert view.interaction_id == interaction_id
            assert [f.name for f in view.form.fields] == ["name", "age", "color"]
            await second_view.answer(interaction_id, Answer(Action.ACCEPT, {"name": "Grace"}), session_id="c09-view")
        final = await call.terminal(timeout=60)

    assert final.WhichOneof("event") == "result", call.kinds()
    assert len(restartable.fx.tool_calls("ask", where={"note": "c09-view"})) == 2


async def test_c09_a_host_restart_closes_the_form_host_restarted_and_never_replays_the_tool(
    restartable: Restartable,
) -> None:
    await restartable.ready()
    events = restartable.running.stack.subscribe()
    async with ToolCall(restartable.broker, "fx:ask", {"note": "c09-host"}, session="c09-host") as call:
        interaction_id = await call.awaiting()
        before = await get_interaction(restartable.interaction, interaction_id)
        restartable.running.stack.kill("broker")
        await call.finished()
        assert call.error is not None, call.kinds()
        assert call.error.code() == grpc.StatusCode.UNAVAILABLE
    async with asyncio.timeout(90):
        while not ((event := await events.get()).kind == "ready" and event.name == "broker"):
            pass
    record = await wait_settled(restartable.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    assert record.host_epoch == before.host_epoch
    assert await restartable.refused_late_answer(record) == "CLOSED"
    await restartable.ready()
    # After the restart, a fresh call works in a new epoch; the old Tool call was never sent again.
    async with ToolCall(restartable.broker, "fx:echo", {"note": "c09-after"}, session="c09-host") as echo:
        assert (await echo.terminal(timeout=60)).WhichOneof("event") == "result"
    assert len(restartable.fx.tool_calls("ask", where={"note": "c09-host"})) == 1


async def test_c08_provider_loss_closes_the_form_and_the_committed_answer_reaches_no_replacement(
    restartable: Restartable,
) -> None:
    await restartable.ready()
    events = restartable.running.stack.subscribe()
    async with ToolCall(restartable.broker, "fx:ask", {"note": "c08-provider"}, session="c08-p") as call:
        interaction_id = await call.awaiting()
        restartable.running.stack.kill("provider")
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "lost", call.kinds()
    assert [k for k in call.kinds() if k in ("result", "failure", "lost", "stopped")] == ["lost"]
    record = await wait_settled(restartable.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    assert await restartable.refused_late_answer(record) == "CLOSED"
    async with asyncio.timeout(90):
        while not ((event := await events.get()).kind == "ready" and event.name == "provider"):
            pass
    await restartable.ready()  # the replacement provider registered (a new registration)
    async with ToolCall(restartable.broker, "fx:echo", {"note": "c08-after"}, session="c08-p") as echo:
        assert (await echo.terminal(timeout=60)).WhichOneof("event") == "result"
    assert len(restartable.fx.tool_calls("ask", where={"note": "c08-provider"})) == 1
    assert await pending_forms(restartable.interaction, ["c08-p"]) == []


async def test_c08_an_mcp_reconnect_fails_the_continuation_and_sends_nothing_on_the_new_connection(
    restartable: Restartable,
) -> None:
    await restartable.ready()
    async with ToolCall(restartable.broker, "fx:ask", {"note": "c08-mcp"}, session="c08-m") as call:
        interaction_id = await call.awaiting()
        async with ToolCall(restartable.broker, "fx:crash", {"note": "c08-crash"}, session="c08-crash") as crash:
            await crash.terminal(timeout=60)  # the MCP server process exits mid-call
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "lost", (call.kinds(), final)  # outcome unknown
    record = await wait_settled(restartable.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST, (record, final)
    assert await restartable.refused_late_answer(record) == "CLOSED"
    await restartable.ready()
    async with ToolCall(restartable.broker, "fx:echo", {"note": "c08-mcp-after"}, session="c08-m") as echo:
        assert (await echo.terminal(timeout=60)).WhichOneof("event") == "result"
    assert len(restartable.fx.tool_calls("ask", where={"note": "c08-mcp"})) == 1
    initializes = restartable.fx.requests("server/discover")
    assert len(initializes) >= 2  # a new MCP connection was made, and the old continuation never used it


async def test_c08_a_replaced_tool_binding_closes_the_form_superseded_and_sends_no_retry(
    restartable: Restartable,
) -> None:
    await restartable.ready()
    async with ToolCall(restartable.broker, "hs:ask", {"note": "c08-stale"}, session="c08-s") as call:
        interaction_id = await call.awaiting()
        async with ToolCall(restartable.broker, "hs:mutate", {"description": "redefined"}, session="c08-x") as mutate:
            assert (await mutate.terminal(timeout=60)).WhichOneof("event") == "result"
        final = await call.terminal(timeout=60)
    assert final.WhichOneof("event") == "lost", call.kinds()  # outcome unknown
    record = await wait_settled(restartable.interaction, interaction_id)
    assert record.close_reason == interaction_pb2.CLOSE_REASON_SUPERSEDED, final
    assert await restartable.refused_late_answer(record) == "CLOSED"
    assert len(restartable.hs.tool_calls("ask", where={"note": "c08-stale"})) == 1
