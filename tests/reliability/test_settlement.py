"""Fault suite for "no answer commits after its invocation settled" (docs/security.md "No answer after
settlement"; RFC criteria 7, 8, 16).

One stack of real processes (:mod:`tests.reliability.harness`) is shared by the module; the supervisor
restarts only the process a test kills (restart policy: no backoff growth), so each window is repeated
many times quickly. Every window ends with the same checks:

- the caller's terminal event is the expected one (``stopped`` / ``lost``);
- an answer *sent after* the caller saw that terminal event is refused (never committed);
- when an answer did commit before the settlement (it won the race with the durable close), its record
  says so: ``answered`` with delivery ``lost`` and the invocation's close reason - never ``answered``
  as if delivered;
- the counting MCP server got only the first leg (no retry, nothing replayed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.interaction.v1 import interaction_pb2
from services.core.channels import open_channel
from services.core.status import error_from_rpc
from stack.supervisor import StackEvent
from tests.helpers.stack import OnStack
from tests.helpers.waiting import eventually
from tests.reliability.harness import (
    ToolCall,
    answer,
    calls,
    free_port,
    get_interaction,
    metric_value,
    reliability_stack,
    result_payload,
    scrape,
    tools_ready,
    write_config,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(400), pytest.mark.asyncio(loop_scope="module")]

REPEATS = 20
"""How often each window is repeated (at least 20, so a window that loses 1 time in 20 shows up)."""
FAST_RESTARTS = {"max_restarts": 1000, "restart_window": 1.0, "restart_backoff": 0.05}
"""Restart a killed child at once, every time (the windows are repeated many times in a row)."""


@dataclass
class Settling(OnStack):
    """The shared stack, the counting server's call log and the Interaction service's metrics port."""

    log: Path
    metrics_port: int

    def legs(self, tag: str) -> list[str]:
        return [str(c["leg"]) for c in calls(self.log) if c["tag"] == tag]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Settling]:
    metrics_port = free_port()
    async with reliability_stack(
        tmp_path_factory.mktemp("settlement"),
        child_env={"interaction": {"MAKA_METRICS_LISTEN": f"127.0.0.1:{metrics_port}"}},
        stack_options=FAST_RESTARTS,
        echo=False,
    ) as (running, log):
        yield Settling(running, log, metrics_port)


@pytest_asyncio.fixture(loop_scope="module")
async def settling(shared: Settling) -> Settling:
    await tools_ready(shared.running)
    return shared


@dataclass
class Race:
    """What the answering surface saw while it raced the settlement."""

    committed: bool = False
    """An answer was accepted (before the caller saw the terminal event)."""
    accepted_after_terminal: int = 0
    """Answers sent after the caller saw the terminal event and still accepted: must stay 0."""
    refusals: Counter[str] = field(default_factory=Counter)


async def _next(events: asyncio.Queue[StackEvent], kind: str, name: str, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            event = await events.get()
            if event.kind == kind and event.name == name:
                return


async def _try_answer(channel: grpc.aio.Channel, interaction_id: str, submission: str, race: Race) -> bool | None:
    """One answer attempt: True accepted, False refused, None unreachable (try again)."""
    try:
        await answer("", interaction_id, "late", submission_id=submission, channel=channel)
    except grpc.aio.AioRpcError as error:
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return None
        race.refusals[error_from_rpc(error).reason] += 1
        return False
    return True


async def _race_answers(settling: Settling, interaction_id: str, call: ToolCall) -> Race:
    """Answer as soon as the Interaction service serves again, until an attempt is decided; then, once
    the caller saw its terminal event, answer again (that one must be refused)."""
    race = Race()
    async with open_channel(settling.interaction) as channel:
        attempts = itertools.count(1)

        async def decided() -> bool | None:
            terminal_seen = any(k in ("result", "failure", "lost", "stopped") for k in call.kinds())
            outcome = await _try_answer(channel, interaction_id, f"race-{next(attempts)}", race)
            if outcome is None:
                return None  # unreachable: retry at once
            if outcome:
                if terminal_seen:
                    race.accepted_after_terminal += 1
                else:
                    race.committed = True
            return True

        await eventually(decided, timeout=60, interval=0.01, what="an answer attempt accepted or refused")
        await call.terminal(timeout=60)
        if await _try_answer(channel, interaction_id, "after-terminal", race):
            race.accepted_after_terminal += 1
    return race


async def _stop(broker: str, session: str) -> int:
    async with open_channel(broker) as channel:
        response = await broker_pb2_grpc.CapabilityBrokerServiceStub(channel).Stop(
            broker_pb2.StopRequest(session_id=session), timeout=60
        )
    return int(response.stopped_invocations)


async def _final_record(settling: Settling, interaction_id: str) -> interaction_pb2.Interaction:
    """The record once its outcome is final: closed, or answered with its delivery recorded (the broker records
    a lost delivery over HostLink once it has reconnected to the restarted service, after ``ready``)."""

    async def final() -> interaction_pb2.Interaction | None:
        record = await get_interaction(settling.interaction, interaction_id)
        answered_pending = (
            record.state == interaction_pb2.INTERACTION_STATE_ANSWERED
            and record.delivery == interaction_pb2.DELIVERY_STATE_PENDING
        )
        return None if answered_pending else record

    return await eventually(final, timeout=60, what="the record's final outcome")


def _check_record(
    record: interaction_pb2.Interaction, race: Race, reason: interaction_pb2.CloseReason.ValueType
) -> str:
    """The record after settlement: closed with ``reason``, or answered first and recorded lost."""
    assert race.accepted_after_terminal == 0, race
    if record.state == interaction_pb2.INTERACTION_STATE_ANSWERED:
        assert race.committed, (record, race)
        assert record.delivery == interaction_pb2.DELIVERY_STATE_LOST, record
        assert record.delivery_lost_reason == reason, record
        return "answered-lost"
    assert record.state == interaction_pb2.INTERACTION_STATE_CLOSED, record
    assert record.close_reason == reason, record
    assert not race.committed, (record, race)
    return "closed"


async def test_stop_right_after_the_interaction_service_is_killed_lets_no_answer_commit_after_the_call_settled(
    settling: Settling,
) -> None:
    outcomes: Counter[str] = Counter()
    for index in range(REPEATS):
        tag = f"stop-{index}"
        events = settling.running.stack.subscribe()
        async with ToolCall(settling.broker, "counter:ask", {"tag": tag}, session=tag) as call:
            interaction_id = await call.awaiting()
            settling.running.stack.kill("interaction")
            stopping = asyncio.ensure_future(_stop(settling.broker, tag))
            race = await _race_answers(settling, interaction_id, call)
            end = await call.terminal()
            assert end.WhichOneof("event") == "stopped", call.kinds()
            assert await stopping == 1
        await _next(events, "ready", "interaction")
        record = await _final_record(settling, interaction_id)
        outcomes[_check_record(record, race, interaction_pb2.CLOSE_REASON_STOPPED)] += 1
        assert settling.legs(tag) == ["first"]
    sys.stderr.write(f"stop-after-interaction-kill x{REPEATS}: {dict(outcomes)}\n")
    assert sum(outcomes.values()) == REPEATS


async def test_provider_loss_right_after_the_interaction_service_is_killed_lets_no_answer_commit_after_the_call_settled(
    settling: Settling,
) -> None:
    outcomes: Counter[str] = Counter()
    for index in range(REPEATS):
        tag = f"lost-{index}"
        events = settling.running.stack.subscribe()
        async with ToolCall(settling.broker, "counter:ask", {"tag": tag}, session=tag) as call:
            interaction_id = await call.awaiting()
            settling.running.stack.kill("interaction")
            settling.running.stack.kill("provider")
            race = await _race_answers(settling, interaction_id, call)
            end = await call.terminal()
            assert end.WhichOneof("event") == "lost", call.kinds()
        await _next(events, "ready", "interaction")
        record = await _final_record(settling, interaction_id)
        outcomes[_check_record(record, race, interaction_pb2.CLOSE_REASON_PROVIDER_LOST)] += 1
        assert settling.legs(tag) == ["first"]
        await tools_ready(settling.running)
    sys.stderr.write(f"provider-loss-after-interaction-kill x{REPEATS}: {dict(outcomes)}\n")
    assert sum(outcomes.values()) == REPEATS


async def test_an_answer_dropped_by_a_provider_crash_after_commit_is_recorded_lost_not_delivered(
    settling: Settling,
) -> None:
    before = await scrape(settling.metrics_port)
    async with ToolCall(settling.broker, "counter:ask", {"tag": "delivered"}, session="delivered") as control:
        control_id = await control.awaiting()
        await answer(settling.interaction, control_id, "fine")
        done = await control.terminal()
        assert result_payload(done)["action"] == "accept"
    delivered = await get_interaction(settling.interaction, control_id)
    assert delivered.delivery == interaction_pb2.DELIVERY_STATE_DELIVERED

    pid = settling.running.stack.supervisor.pid("provider")
    assert pid is not None
    async with ToolCall(settling.broker, "counter:ask", {"tag": "dropped"}, session="dropped") as call:
        interaction_id = await call.awaiting()
        os.kill(pid, signal.SIGSTOP)  # the provider can no longer receive the answer
        try:
            committed = await answer(settling.interaction, interaction_id, "dropped")
            assert committed.delivery == interaction_pb2.DELIVERY_STATE_PENDING
            await call.wait_for("interaction_settled")  # the broker sent it towards the frozen provider
            pending = await get_interaction(settling.interaction, interaction_id)
            assert pending.delivery == interaction_pb2.DELIVERY_STATE_PENDING
            settling.running.stack.kill("provider")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        end = await call.terminal()
        assert end.WhichOneof("event") == "lost", call.kinds()
    record = await get_interaction(settling.interaction, interaction_id)
    assert record.state == interaction_pb2.INTERACTION_STATE_ANSWERED
    assert record.delivery == interaction_pb2.DELIVERY_STATE_LOST
    assert record.delivery_lost_reason == interaction_pb2.CLOSE_REASON_PROVIDER_LOST
    assert settling.legs("dropped") == ["first"]  # nothing reached the server, nothing is replayed
    code, out, err = await _maka("pending", "--id", interaction_id, "--interaction", settling.interaction)
    assert code == 0, err
    assert out.strip() == (
        f"{interaction_id}: answered (accept); lost - your answer was recorded but never reached the Tool:"
        " the provider disconnected first (nothing was retried)"
    )
    code, out, err = await _maka("pending", "--id", control_id, "--interaction", settling.interaction, "--json")
    assert code == 0, err
    assert json.loads(out)[0]["delivery"] == "delivered"
    after = await scrape(settling.metrics_port)
    for outcome in ("delivered", "lost"):
        name = "maka_answer_deliveries_total"
        assert metric_value(after, name, outcome=outcome) >= metric_value(before, name, outcome=outcome) + 1
    await tools_ready(settling.running)


async def test_the_provider_registers_again_within_seconds_after_each_of_several_broker_restarts(
    settling: Settling,
) -> None:
    took: list[float] = []
    for _ in range(4):
        events = settling.running.stack.subscribe()
        settling.running.stack.kill("broker")
        await _next(events, "ready", "broker")
        start = time.monotonic()
        # The provider's backoff is reset by each successful registration (its maximum is 30 s).
        await tools_ready(settling.running, timeout=10)
        took.append(time.monotonic() - start)
    sys.stderr.write(f"provider re-registration after broker restarts: {[round(t, 2) for t in took]} s\n")


def _spawn_up(state_dir: Path, config: Path, *extra: str) -> subprocess.Popen[str]:
    """``maka up`` as a process; its stderr goes to ``<state_dir>.stderr`` (read after it exited)."""
    env = {**os.environ, "MAKA_HEARTBEAT_SECONDS": "0.5", "MAKA_LOG_LEVEL": "WARNING"}
    env.pop("MAKA_REDIS_URL", None)
    argv = [sys.executable, "-m", "surfaces.cli.main", "up", "--config", str(config), "--state-dir", str(state_dir)]
    with state_dir.with_suffix(".stderr").open("w") as stderr:
        return subprocess.Popen(
            [*argv, "--ports", "web=0,mcp=0", "--no-web", *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )


async def _ready(process: subprocess.Popen[str], timeout: float = 90.0) -> None:
    assert process.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout)
    assert line.startswith("maka is ready"), line


async def test_a_second_maka_up_on_the_same_redis_and_host_id_makes_the_first_exit_host_superseded(
    tmp_path: Path,
) -> None:
    config, log = write_config(tmp_path / "mcp")
    first = _spawn_up(tmp_path / "a", config)
    second: subprocess.Popen[str] | None = None
    try:
        await _ready(first)
        redis_url = json.loads((tmp_path / "a" / "endpoints.json").read_text())["redis_url"]
        second = _spawn_up(tmp_path / "b", config, "--redis-url", redis_url)
        await _ready(second)
        code = await asyncio.wait_for(asyncio.to_thread(first.wait), 60)
        errors = (tmp_path / "a.stderr").read_text()
        assert code == 3, errors[-2000:]
        assert "HOST_SUPERSEDED: the broker exited 75" in errors, errors[-2000:]
        assert '"event": "host_superseded"' in errors
        # The newer stack serves the Host.
        broker = json.loads((tmp_path / "b" / "endpoints.json").read_text())["broker"]
        async with ToolCall(broker, "counter:echo", {"tag": "after-supersede"}) as call:
            assert (await call.terminal(timeout=60)).WhichOneof("event") == "result", call.kinds()
        assert [c["tag"] for c in calls(log)] == ["after-supersede"]
    finally:
        for process in (first, second):
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(asyncio.to_thread(process.wait), 60)
                except TimeoutError:
                    os.killpg(process.pid, signal.SIGKILL)
            if process.stdout is not None:
                process.stdout.close()


async def _maka(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "surfaces.cli.main",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return int(process.returncode or 0), out.decode(), err.decode()


async def test_maka_answer_against_a_frozen_interaction_service_exits_outcome_unknown_and_a_repeat_decides(
    settling: Settling,
) -> None:
    async with ToolCall(settling.broker, "counter:ask", {"tag": "frozen"}, session="frozen") as call:
        interaction_id = await call.awaiting()
        pid = settling.running.stack.supervisor.pid("interaction")
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # frozen: connections stay open, nothing answers
        try:
            code, _, err = await _maka("answer", interaction_id, "decline", "--interaction", settling.interaction)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert code == 3, err
        assert err.startswith("OUTCOME_UNKNOWN: "), err
        submission = err.split("--submission-id ", 1)[1].split()[0]
        # Repeating with the same submission id returns the one outcome (committed now or back then).
        code, out, err = await _maka(
            "answer", interaction_id, "decline", "--interaction", settling.interaction, "--submission-id", submission
        )
        assert code == 0, err
        assert out.strip() == f"{interaction_id}: answered (decline)"
        end = await call.terminal(timeout=60)
        assert end.WhichOneof("event") == "result", call.kinds()
    assert settling.legs("frozen") == ["first", "retry"]
