"""The process supervisor's own logic, with small Python child processes standing in for services."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

from stack import supervisor as supervisor_module
from stack.errors import StackError
from stack.supervisor import ChildExited, ChildSpec, StackEvent, Supervisor, last_cause
from tests.helpers.waiting import eventually

CHILD = """
import os, signal, sys
if len(sys.argv) > 2 and sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("hello from child", flush=True)
print("to stderr", file=sys.stderr, flush=True)
tmp = sys.argv[1] + ".tmp"
open(tmp, "w").write(str(os.getpid()))
os.replace(tmp, sys.argv[1])
signal.pause()
"""


def _child(tmp_path: Path, name: str, *extra: str, restart: bool = True) -> ChildSpec:
    """A child that prints two lines, writes its pid to ``<name>.ready`` and waits for a signal."""
    ready_file = tmp_path / f"{name}.ready"

    async def prepare(spec: ChildSpec, attempt: int) -> None:
        ready_file.unlink(missing_ok=True)

    async def ready() -> bool:
        return ready_file.exists()

    return ChildSpec(
        name, [sys.executable, "-c", CHILD, str(ready_file), *extra], ready=ready, prepare=prepare, restart=restart
    )


async def _next(queue: asyncio.Queue[StackEvent], kind: str, name: str) -> StackEvent:
    async with asyncio.timeout(20):
        while True:
            event = await queue.get()
            if event.kind == kind and event.name == name:
                return event


@pytest.fixture
def lines() -> list[tuple[str, str]]:
    return []


@pytest.fixture
async def supervisor(lines: list[tuple[str, str]]) -> Supervisor:
    return Supervisor(sink=lambda name, line: lines.append((name, line)), ready_timeout=20, stop_grace=5)


async def test_children_start_in_order_and_stop_in_reverse_order(supervisor: Supervisor, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        await supervisor.start(_child(tmp_path, name))

    assert [e.name for e in supervisor.history if e.kind == "ready"] == ["a", "b", "c"]
    assert set(supervisor.pids()) == {"a", "b", "c"}
    await supervisor.stop()

    assert [e.name for e in supervisor.history if e.kind == "stopped"] == ["c", "b", "a"]
    assert supervisor.pids() == {}


async def test_each_output_line_is_forwarded_with_the_child_name(
    supervisor: Supervisor, tmp_path: Path, lines: list[tuple[str, str]]
) -> None:
    await supervisor.start(_child(tmp_path, "web"))
    try:
        await eventually(lambda: {("web", "hello from child"), ("web", "to stderr")} <= set(lines), what="both lines")
    finally:
        await supervisor.stop()


async def test_an_overlong_line_is_dropped_and_later_lines_still_flow(
    supervisor: Supervisor, lines: list[tuple[str, str]]
) -> None:
    script = "import signal; print('x' * 3_000_000, flush=True); print('after', flush=True); signal.pause()"
    await supervisor.start(ChildSpec("noisy", [sys.executable, "-c", script]))
    try:
        await eventually(lambda: ("noisy", "after") in lines, what="the line after the overlong one")
    finally:
        await supervisor.stop()
    assert all(len(line) < 2_000_000 for _name, line in lines)


async def test_a_dead_child_is_reported_and_restarted_with_a_new_pid(supervisor: Supervisor, tmp_path: Path) -> None:
    await supervisor.start(_child(tmp_path, "interaction"))
    events = supervisor.subscribe()
    old_pid = supervisor.pid("interaction")

    supervisor.kill("interaction")

    exited = await _next(events, "exited", "interaction")
    await _next(events, "ready", "interaction")
    try:
        assert exited.code == -9
        new_pid = supervisor.pid("interaction")
        assert new_pid is not None
        assert new_pid != old_pid
        assert (tmp_path / "interaction.ready").read_text() == str(new_pid)
    finally:
        await supervisor.stop()


async def test_a_child_without_restart_policy_is_only_reported(supervisor: Supervisor, tmp_path: Path) -> None:
    await supervisor.start(_child(tmp_path, "once", restart=False))
    events = supervisor.subscribe()

    supervisor.kill("once")

    await _next(events, "exited", "once")
    assert supervisor.pid("once") is None
    assert events.empty()
    await supervisor.stop()


async def test_a_child_that_keeps_dying_is_given_up_after_the_restart_budget(tmp_path: Path) -> None:
    supervisor = Supervisor(sink=lambda _n, _l: None, max_restarts=1, restart_backoff=0.01, ready_timeout=20)
    await supervisor.start(_child(tmp_path, "flaky"))
    events = supervisor.subscribe()

    supervisor.kill("flaky")
    await _next(events, "ready", "flaky")
    supervisor.kill("flaky")

    given_up = await _next(events, "gave_up", "flaky")
    assert given_up.detail == "1 restarts"
    assert supervisor.pid("flaky") is None
    await supervisor.stop()


async def test_a_restart_that_never_gets_ready_is_killed_and_retried_until_given_up() -> None:
    supervisor = Supervisor(sink=lambda _n, _l: None, max_restarts=2, restart_backoff=0.01, ready_timeout=0.5)
    ready_once = [True]

    async def ready() -> bool:
        return ready_once.pop() if ready_once else False

    await supervisor.start(ChildSpec("hung", [sys.executable, "-c", "import signal; signal.pause()"], ready=ready))
    events = supervisor.subscribe()

    supervisor.kill("hung")

    await _next(events, "gave_up", "hung")
    try:
        kinds = [e.kind for e in supervisor.history if e.name == "hung"]
        assert kinds.count("exited") == 3  # the crash, then each restart killed for not getting ready
        assert kinds.count("started") == 3
        assert supervisor.pid("hung") is None
    finally:
        await supervisor.stop()


async def test_restart_replaces_the_process_and_waits_until_ready(supervisor: Supervisor, tmp_path: Path) -> None:
    await supervisor.start(_child(tmp_path, "broker"))
    old_pid = supervisor.pid("broker")

    await supervisor.restart("broker")

    try:
        assert supervisor.pid("broker") not in (None, old_pid)
        assert [e.kind for e in supervisor.history if e.name == "broker"] == [
            "started",
            "ready",
            "stopped",
            "started",
            "ready",
        ]
    finally:
        await supervisor.stop()


async def test_children_stopped_together_stay_stopped_until_started_again(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    for name in ("broker", "provider", "other"):
        await supervisor.start(_child(tmp_path, name))
    old = supervisor.pids()

    await supervisor.stop_together(("broker", "provider"))

    try:
        assert set(supervisor.pids()) == {"other"}  # a scale-in: not restarted as a crash would be
        assert [e.kind for e in supervisor.history if e.name == "broker"] == ["started", "ready", "stopped"]
        await supervisor.start_again(("broker", "provider"))
        new = supervisor.pids()
        assert set(new) == {"broker", "provider", "other"}
        assert new["broker"] != old["broker"]
        assert new["provider"] != old["provider"]
        assert new["other"] == old["other"]
    finally:
        await supervisor.stop()


async def test_a_child_that_exits_before_ready_fails_start_with_its_code(supervisor: Supervisor) -> None:
    spec = ChildSpec("broken", [sys.executable, "-c", "raise SystemExit(7)"], ready=_never)

    with pytest.raises(StackError, match="broken exited with code 7 before it was ready"):
        await supervisor.start(spec)
    await supervisor.stop()


async def test_a_child_that_never_gets_ready_fails_start_after_the_timeout(tmp_path: Path) -> None:
    supervisor = Supervisor(sink=lambda _n, _l: None, ready_timeout=0.3)
    spec = ChildSpec("slow", [sys.executable, "-c", "import signal; signal.pause()"], ready=_never)

    with pytest.raises(StackError, match="slow was not ready within 0s"):
        await supervisor.start(spec)
    await supervisor.stop()
    assert supervisor.pids() == {}


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    supervisor = Supervisor(sink=lambda _n, _l: None, stop_grace=0.2)
    await supervisor.start(_child(tmp_path, "stubborn", "ignore-term"))

    async with asyncio.timeout(10):
        await supervisor.stop()

    assert supervisor.history[-1] == StackEvent("stopped", "stubborn", code=-9)


async def _never() -> bool:
    return False


async def test_stop_takes_named_children_first_then_the_rest_in_reverse(supervisor: Supervisor, tmp_path: Path) -> None:
    for name in ("redis", "interaction", "broker", "web", "provider"):
        await supervisor.start(_child(tmp_path, name))

    await supervisor.stop(order=("web", "provider"))

    assert [e.name for e in supervisor.history if e.kind == "stopped"] == [
        "web",
        "provider",
        "broker",
        "interaction",
        "redis",
    ]


async def test_a_sink_that_raises_does_not_stop_forwarding_or_stopping(tmp_path: Path) -> None:
    seen: list[str] = []

    def broken_sink(name: str, line: str) -> None:
        seen.append(line)
        raise BrokenPipeError(32, "Broken pipe")

    supervisor = Supervisor(sink=broken_sink, ready_timeout=20, stop_grace=5)
    await supervisor.start(_child(tmp_path, "web"))
    try:
        await eventually(lambda: {"hello from child", "to stderr"} <= set(seen), what="both lines despite errors")
    finally:
        async with asyncio.timeout(20):
            await supervisor.stop()
    assert supervisor.history[-1].kind == "stopped"


def test_the_stderr_sink_goes_quiet_once_stderr_is_a_broken_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    broken = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stderr", broken)
    sink = supervisor_module.StderrSink()
    try:
        sink("web", "first line")  # EPIPE: swallowed, not raised
        sink("web", "second line")

        assert sink.closed
    finally:
        monkeypatch.undo()
        with contextlib.suppress(BrokenPipeError):
            broken.close()


ROOT = Path(__file__).resolve().parents[2]
SUPERVISING = """
import asyncio, sys
from stack.supervisor import ChildSpec, Supervisor

async def main() -> None:
    supervisor = Supervisor(sink=lambda _n, _l: None, ready_timeout=20)
    await supervisor.start(ChildSpec("sleeper", [sys.executable, "-c", "import signal; signal.pause()"]))
    print(supervisor.pid("sleeper"), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def test_a_child_gets_sigterm_when_its_supervisor_is_killed_with_sigkill() -> None:
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SUPERVISING, stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    assert parent.stdout is not None
    try:
        async with asyncio.timeout(30):
            child_pid = int(await parent.stdout.readline())
        assert _alive(child_pid)

        parent.kill()
        await parent.wait()

        await eventually(lambda: not _alive(child_pid), timeout=20, what="the orphaned child gone")
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()


def test_die_with_parent_wraps_argv_on_linux_only(monkeypatch: pytest.MonkeyPatch) -> None:
    wrapped = supervisor_module.die_with_parent(["redis-server", "--port", "0"])
    assert wrapped[-3:] == ["redis-server", "--port", "0"]
    assert wrapped[0] == sys.executable

    monkeypatch.setattr(sys, "platform", "darwin")
    assert supervisor_module.die_with_parent(["redis-server"]) == ["redis-server"]


async def test_a_child_that_exits_before_ready_names_its_last_meaningful_output_line(supervisor: Supervisor) -> None:
    script = (
        "import json, sys\n"
        "print(json.dumps({'level': 'info', 'event': 'starting'}), flush=True)\n"
        "raise RuntimeError('cannot bind 127.0.0.1:50051: address in use or not available')\n"
    )
    spec = ChildSpec("interaction", [sys.executable, "-c", script], ready=_never)

    with pytest.raises(ChildExited) as exited:
        await supervisor.start(spec)
    await supervisor.stop()

    assert exited.value.cause == "cannot bind 127.0.0.1:50051: address in use or not available"
    assert str(exited.value) == (
        "interaction exited with code 1 before it was ready:"
        " cannot bind 127.0.0.1:50051: address in use or not available"
    )


def test_the_last_cause_prefers_an_error_log_line_and_skips_traceback_frames_and_info_lines() -> None:
    error_line = json.dumps({"level": "error", "event": "redis_unreachable", "error": "connection refused"})
    info_line = json.dumps({"level": "info", "event": "stopped"})

    assert last_cause(["noise", error_line, info_line, ""]) == "redis_unreachable: connection refused"
    assert last_cause(["Traceback (most recent call last):", '  File "x.py", line 1', "OSError: boom"]) == "boom"
    assert last_cause([info_line]) == ""
