"""The runnable stack end to end: ``maka up`` as a process, ``maka call`` as processes, forms answered
through the Interaction service's unary ``Answer`` (RFC criterion 1 through the whole stack), and the
supervisor restarting killed services.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import redis.asyncio

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from stack.state_dir import read_endpoints
from tests.helpers.stack import EXAMPLES_CONFIG, answer, call_tool, result_text, running_stack, wait_for_pending
from tests.helpers.waiting import eventually
from tests.reliability.harness import get_interaction, redis_dump

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

MAKA = [sys.executable, "-m", "surfaces.cli.main"]


@dataclass
class Up:
    """A running ``maka up`` process, its ready line and where its state is."""

    process: asyncio.subprocess.Process
    ready_line: str
    state_dir: Path
    log: Path


async def _start_up(tmp_path: Path) -> AsyncIterator[Up]:
    """``maka up`` with the example config (gRPC on unix sockets, web and MCP on ephemeral ports); SIGINT (bounded
    wait) when done."""
    state_dir = tmp_path / "state"
    log = tmp_path / "maka-up.log"
    with log.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            *MAKA,
            "up",
            "--config",
            str(EXAMPLES_CONFIG),
            "--state-dir",
            str(state_dir),
            "--ports",
            "web=0,mcp=0",
            stdout=asyncio.subprocess.PIPE,
            stderr=log_file,
        )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(120):
            ready_line = (await process.stdout.readline()).decode()
        assert ready_line.startswith("maka is ready: http://127.0.0.1:"), log.read_text()[-4000:]
        yield Up(process, ready_line, state_dir, log)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await process.wait()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Up]:
    """One ``maka up`` shared by the tests that only call Tools (starting one takes seconds)."""
    async for running in _start_up(tmp_path_factory.mktemp("shared")):
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def own_up(tmp_path: Path) -> AsyncIterator[Up]:
    """A ``maka up`` of the test's own, for tests that stop it."""
    async for running in _start_up(tmp_path):
        yield running


async def _maka(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *MAKA,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_maka_up_serves_ping_and_a_deploy_answered_through_the_interaction_service(shared_up: Up) -> None:
    up = shared_up
    endpoints = read_endpoints(up.state_dir)
    assert up.ready_line.startswith(f"maka is ready: {endpoints.web}/?token=")
    assert set(endpoints.pids) == {"redis", "interaction", "broker", "provider", "web", "mcp"}

    code, out, _ = await _maka("call", "examples:ping", "--state-dir", str(up.state_dir))
    assert (code, out) == (0, "pong\n")

    deploy = asyncio.create_task(
        _maka("call", "examples:deploy", "--args", '{"artifact": "build-42"}', "--state-dir", str(up.state_dir))
    )
    form = await wait_for_pending(endpoints.interaction, "default", timeout=60)
    assert [field.name for field in form.form.fields] == ["environment", "confirm"]
    await answer(
        endpoints.interaction,
        form,
        form_pb2.ACTION_ACCEPT,
        {"environment": form_pb2.Value(string_value="staging"), "confirm": form_pb2.Value(boolean_value=True)},
    )
    code, out, err = await deploy

    assert (code, out) == (0, "Deployed build-42 to staging.\n"), err
    assert f"waiting for your answer in {endpoints.web}" in err


async def test_maka_up_drains_every_child_on_sigint(own_up: Up) -> None:
    up = own_up
    pids = read_endpoints(up.state_dir).pids

    up.process.send_signal(signal.SIGINT)
    async with asyncio.timeout(60):
        code = await up.process.wait()

    assert code == 0
    assert not (up.state_dir / "endpoints.json").exists()
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert up.log.read_text().splitlines()[-1] == "maka stopped"


async def test_a_declined_deploy_reaches_the_tool_and_its_text_comes_back(shared_up: Up) -> None:
    up = shared_up
    endpoints = read_endpoints(up.state_dir)
    deploy = asyncio.create_task(
        _maka(
            "call",
            "examples:deploy",
            "--args",
            '{"artifact": "build-7"}',
            "--session",
            "s-decline",
            "--json",
            "--state-dir",
            str(up.state_dir),
        )
    )
    form = await wait_for_pending(endpoints.interaction, "s-decline", timeout=60)
    await answer(endpoints.interaction, form, form_pb2.ACTION_DECLINE)
    code, out, _ = await deploy

    assert code == 0
    result = json.loads(out)
    assert result["content"][0]["text"] == "Deployment of build-7 was declined by the user; nothing was deployed."


async def test_a_two_round_checklist_is_one_call_with_one_final_result(shared_up: Up) -> None:
    endpoints = read_endpoints(shared_up.state_dir)
    call = asyncio.create_task(
        call_tool(endpoints.broker, "examples:release_checklist", {"release": "orion"}, session="s-two-rounds")
    )
    first = await wait_for_pending(endpoints.interaction, "s-two-rounds", timeout=60)
    await answer(
        endpoints.interaction,
        first,
        form_pb2.ACTION_ACCEPT,
        {
            "owner_email": form_pb2.Value(string_value="ada@example.com"),
            "release_date": form_pb2.Value(string_value="2026-08-01"),
            "version": form_pb2.Value(string_value="2.1.0"),
            "reviewers": form_pb2.Value(integer_value=3),
            "channel": form_pb2.Value(string_value="beta"),
            "risk": form_pb2.Value(string_value="medium"),
        },
        submission_id="round-1",
    )
    second = await wait_for_pending(endpoints.interaction, "s-two-rounds", timeout=60)
    assert second.interaction_id != first.interaction_id
    assert [f.name for f in second.form.fields] == ["region", "platforms", "checks", "notes", "approve"]
    await answer(
        endpoints.interaction,
        second,
        form_pb2.ACTION_ACCEPT,
        {
            "region": form_pb2.Value(string_value="eu"),
            "platforms": form_pb2.Value(string_list_value=form_pb2.StringList(values=["linux", "macos"])),
            "approve": form_pb2.Value(boolean_value=True),
        },
        submission_id="round-2",
    )
    events = await call

    kinds = [event.WhichOneof("event") for event in events]
    assert kinds.count("accepted") == 1
    assert kinds.count("awaiting_interaction") == 2
    assert kinds.count("result") == 1
    assert result_text(events) == (
        "Release orion 2.1.0 approved: owner ada@example.com, date 2026-08-01, channel beta, risk medium, "
        "reviewers 3, region eu, platforms linux,macos."
    )


async def test_maka_up_keeps_a_checklist_answer_sealed_in_redis_and_its_aof_and_gives_it_back_to_surfaces(
    shared_up: Up,
) -> None:
    """The reported defect, as ``maka up`` runs (docs/security.md "Answer values at rest"): the values of a
    committed answer are in no Redis key and not in the AOF, yet reach the MCP server and ``GetInteraction``."""
    endpoints = read_endpoints(shared_up.state_dir)
    canary = f"CANARY-{secrets.token_hex(6)}"
    session = "s-sealed"
    call = asyncio.create_task(
        call_tool(endpoints.broker, "examples:release_checklist", {"release": "v1.2"}, session=session)
    )
    first = await wait_for_pending(endpoints.interaction, session, timeout=60)
    await answer(
        endpoints.interaction,
        first,
        form_pb2.ACTION_ACCEPT,
        {
            "owner_email": form_pb2.Value(string_value="ada@example.com"),
            "release_date": form_pb2.Value(string_value="2026-08-01"),
            "version": form_pb2.Value(string_value=canary),
            "reviewers": form_pb2.Value(integer_value=2),
            "channel": form_pb2.Value(string_value="stable"),
            "risk": form_pb2.Value(string_value="low"),
        },
        submission_id="sealed-1",
    )
    second = await wait_for_pending(endpoints.interaction, session, timeout=60)
    await answer(
        endpoints.interaction,
        second,
        form_pb2.ACTION_ACCEPT,
        {
            "region": form_pb2.Value(string_value="eu"),
            "platforms": form_pb2.Value(string_list_value=form_pb2.StringList(values=["linux"])),
            "approve": form_pb2.Value(boolean_value=True),
        },
        submission_id="sealed-2",
    )
    events = await call
    assert f"Release v1.2 {canary} approved" in result_text(events), "the MCP server got the value"
    record = await get_interaction(endpoints.interaction, first.interaction_id)
    assert record.answer.values["version"].string_value == canary

    client = redis.asyncio.Redis.from_url(endpoints.redis_url)
    try:
        dumps = [await client.dump(key) or b"" async for key in client.scan_iter(count=500)]
    finally:
        await client.aclose()
    values = await redis_dump(endpoints.redis_url)
    assert first.interaction_id.encode() in values
    assert canary.encode() not in values
    assert all(canary.encode() not in dump for dump in dumps)

    def aof() -> bytes | None:  # appendfsync everysec: wait until the second answer's write is in the file
        files = [path for path in (shared_up.state_dir / "redis").rglob("*.aof*") if path.is_file()]
        blob = b"".join(path.read_bytes() for path in sorted(files))
        return blob if second.interaction_id.encode() in blob and b"sealed-2" in blob else None

    assert canary.encode() not in await eventually(aof, timeout=10, what="the committed answers in the AOF")


@pytest.mark.faults
async def test_each_killed_service_is_restarted_on_its_port_and_calls_keep_working(
    tmp_path: Path, redis_url: str
) -> None:
    async with running_stack(tmp_path, echo=False, redis_url=redis_url) as running:
        assert "redis" not in running.endpoints.pids  # an external Redis: no embedded redis-server
        assert running.endpoints.redis_url == redis_url
        for name in ("interaction", "broker", "provider"):
            old_port = running.stack.bound[name]
            old_pid = running.stack.supervisor.pid(name)
            events = running.stack.subscribe()
            running.stack.kill(name)
            async with asyncio.timeout(90):
                while (event := await events.get()).kind != "ready":
                    assert event.name == name
            assert running.stack.bound[name] == old_port
            assert running.stack.supervisor.pid(name) not in (None, old_pid)
            assert await running.stack.wait_for_tools() == set(), f"tools after {name} restart"

            code, out, err = await _maka("call", "examples:ping", "--state-dir", str(tmp_path / "state"))
            assert (code, out) == (0, "pong\n"), (name, err)
        assert read_endpoints(tmp_path / "state").pids == running.stack.supervisor.pids()


async def test_ctrl_c_with_a_form_pending_closes_it_host_restarted_and_the_call_ends_lost(own_up: Up) -> None:
    up = own_up
    endpoints = read_endpoints(up.state_dir)
    call = asyncio.create_task(call_tool(endpoints.broker, "examples:deploy", {"artifact": "build-ctrl-c"}))
    form = await wait_for_pending(endpoints.interaction, timeout=60)

    async def closed() -> interaction_pb2.Interaction | None:
        record = await get_interaction(endpoints.interaction, form.interaction_id)
        return record if record.close_reason != interaction_pb2.CLOSE_REASON_UNSPECIFIED else None

    up.process.send_signal(signal.SIGINT)  # Ctrl-C on `maka up`: the broker stops first, then the provider
    record = await eventually(closed, timeout=60, what="the pending form closed by the stopping Host")
    events = await asyncio.wait_for(call, 60)
    async with asyncio.timeout(60):
        code = await up.process.wait()

    assert record.close_reason == interaction_pb2.CLOSE_REASON_HOST_RESTARTED
    assert events[-1].WhichOneof("event") == "lost", events[-1]
    assert code == 0
    assert '"provider_lost"' not in up.log.read_text()
