"""What ``maka call`` (a real process) shows when a process of the stack is killed while its form is pending.

The stack runs as ``maka up`` runs it, with the bundled example server; ``kill -9`` hits the broker or the stdio
MCP server child of the provider while ``examples:deploy`` waits on its form. Each case ends the call with a
stable code on stderr and exit 3, leaves no form pending, and a late answer gets ``CLOSED`` (RFC criteria 8
and 9; docs/design.md#stop-provider-loss-and-supersession). The Interaction service and the provider
themselves are covered at the gRPC level by ``tests/reliability/test_faults.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc.aio
import pytest
import pytest_asyncio

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from stack.state_dir import read_endpoints
from tests.helpers.stack import ROOT, RunningStack, pending_forms, running_stack, wait_for_pending
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

MAKA = [sys.executable, "-m", "surfaces.cli.main"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningStack]:
    async with running_stack(tmp_path_factory.mktemp("kills")) as live:
        yield live


async def start_call(running: RunningStack, session: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *MAKA,
        "call",
        "examples:deploy",
        "--args",
        '{"artifact": "build-42"}',
        "--session",
        session,
        "--state-dir",
        str(running.stack.state_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )


async def ended(process: asyncio.subprocess.Process) -> tuple[int, str]:
    async with asyncio.timeout(90):
        _out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, err.decode()


async def closed_with(running: RunningStack, interaction_id: str) -> interaction_pb2.CloseReason.ValueType:
    endpoints = read_endpoints(running.stack.state_dir)
    async with grpc.aio.insecure_channel(endpoints.interaction) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        got = await stub.GetInteraction(
            interaction_service_pb2.GetInteractionRequest(interaction_id=interaction_id), timeout=10
        )
    assert got.interaction.state == interaction_pb2.INTERACTION_STATE_CLOSED
    return got.interaction.close_reason


async def serving_again(running: RunningStack) -> None:
    """The supervisor restarted what was killed and the example Tools are registered again."""

    async def tools() -> bool:
        endpoints = read_endpoints(running.stack.state_dir)
        process = await asyncio.create_subprocess_exec(
            *MAKA,
            "tools",
            "--state-dir",
            str(running.stack.state_dir),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=ROOT,
        )
        out, _ = await process.communicate()
        return bool(endpoints.broker) and b"examples:deploy" in out

    await eventually(tools, timeout=60, interval=0.2, what="examples:deploy registered again")


def mcp_server_child(provider_pid: int) -> int:
    children = Path(f"/proc/{provider_pid}/task/{provider_pid}/children").read_text().split()
    for child in children:
        if b"examples.deploy_server" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError(f"no examples.deploy_server child of {provider_pid}")


async def test_killing_the_broker_while_the_form_is_pending_ends_maka_call_lost_and_closes_the_form_host_restarted(
    running: RunningStack,
) -> None:
    process = await start_call(running, "kill-broker")
    form = await wait_for_pending(running.endpoints.interaction, "kill-broker", timeout=60)
    running.stack.kill("broker")
    code, err = await ended(process)
    assert code == 3, err
    assert "\nLOST: " in err, err
    assert "nothing was replayed" in err
    assert await closed_with(running, form.interaction_id) == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    await serving_again(running)
    assert await pending_forms(read_endpoints(running.stack.state_dir).interaction, ["kill-broker"]) == []


async def test_killing_the_stdio_mcp_server_while_the_form_is_pending_ends_maka_call_lost_and_closes_the_form(
    running: RunningStack,
) -> None:
    await serving_again(running)
    process = await start_call(running, "kill-mcp")
    form = await wait_for_pending(read_endpoints(running.stack.state_dir).interaction, "kill-mcp", timeout=60)
    os.kill(mcp_server_child(read_endpoints(running.stack.state_dir).pids["provider"]), signal.SIGKILL)
    code, err = await ended(process)
    assert code == 3, err
    assert "\nLOST: " in err, err
    assert await closed_with(running, form.interaction_id) == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    assert await pending_forms(read_endpoints(running.stack.state_dir).interaction, ["kill-mcp"]) == []
    answered = await asyncio.create_subprocess_exec(
        *MAKA,
        "answer",
        form.interaction_id,
        "decline",
        "--state-dir",
        str(running.stack.state_dir),
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    _, late = await answered.communicate()
    assert (answered.returncode, late.decode().split(":")[0]) == (3, "CLOSED")
