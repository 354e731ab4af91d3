"""``maka up``: usage and start-failure exit codes, the ready line, the state-dir lock; and as a real
process (e2e): a second ``maka up`` refused, children gone after ``kill -9`` or a Ctrl-C with closed
output pipes, per-service ``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from stack.ports import free_port
from stack.probes import grpc_serving, redis_ping
from stack.state_dir import Endpoints, StateDirLock, read_endpoints
from surfaces.cli.commands import up
from surfaces.cli.main import build_parser
from tests.helpers.waiting import eventually


def _run(*argv: str) -> int:
    parser, _ = build_parser()
    return up.run(parser.parse_args(["up", *argv]))


def test_bad_ports_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--config", str(tmp_path / "mcp.json"), "--ports", "gui=80") == 2
    assert capsys.readouterr().err.startswith("USAGE: bad port spec 'gui=80'")


def test_a_missing_config_fails_start_with_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run("--config", str(tmp_path / "nope.json"), "--state-dir", str(tmp_path / "state"))

    assert code == 3
    assert "STACK_FAILED: MCP config" in capsys.readouterr().err
    assert not (tmp_path / "state" / "endpoints.json").exists()


def test_a_missing_redis_server_binary_says_how_to_fix_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    assert _run("--config", str(config), "--state-dir", str(tmp_path / "state")) == 3
    err = capsys.readouterr().err
    assert "STACK_FAILED: redis-server is not installed" in err
    assert "--redis-url" in err


def test_the_config_defaults_to_maka_mcp_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_MCP_CONFIG", "/etc/maka/mcp.json")
    parser, _ = build_parser()

    assert parser.parse_args(["up"]).config == Path("/etc/maka/mcp.json")


def test_the_ready_line_names_the_web_address_and_the_services() -> None:
    endpoints = Endpoints(interaction="127.0.0.1:1", broker="127.0.0.1:2", web="http://127.0.0.1:3")

    assert up.ready_line(endpoints, Path(".state")) == (
        "maka is ready: http://127.0.0.1:3 (interaction 127.0.0.1:1, broker 127.0.0.1:2, state .state)"
    )


def test_the_ready_line_carries_the_owners_token_in_the_web_address_that_signs_the_browser_in() -> None:
    endpoints = Endpoints(interaction="unix:///s/sock/interaction.sock", broker="unix:///s/sock/broker.sock")
    endpoints.web = "http://127.0.0.1:3"

    assert up.ready_line(endpoints, Path(".state"), "T0k") == (
        "maka is ready: http://127.0.0.1:3/?token=T0k (interaction unix:///s/sock/interaction.sock,"
        " broker unix:///s/sock/broker.sock, state .state)"
    )
    endpoints.web = ""
    assert "T0k" not in up.ready_line(endpoints, Path(".state"), "T0k")  # no page, no token printed


def test_a_bad_metrics_spec_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--config", str(tmp_path / "mcp.json"), "--metrics", "web=9100") == 2
    assert capsys.readouterr().err.startswith("USAGE: bad metrics port spec 'web=9100'")


def test_a_second_up_on_a_locked_state_dir_exits_3_and_touches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    with StateDirLock(state):  # the first stack's lock
        (state / "endpoints.json").write_text("first stack")
        (state / "redis.sock").write_text("first socket")

        code = _run("--config", str(config), "--state-dir", str(state))

        err = capsys.readouterr().err
        assert code == 3
        assert err == (
            f"STACK_RUNNING: a stack already runs in {state.resolve()} (pid {os.getpid()}); "
            "use it (maka call …) or pick another --state-dir\n"
        )
        assert (state / "endpoints.json").read_text() == "first stack"
        assert (state / "redis.sock").read_text() == "first socket"
        assert sorted(p.name for p in state.iterdir()) == ["endpoints.json", "maka.lock", "redis.sock"]


def test_the_ready_line_lists_each_metrics_url_when_metrics_are_on() -> None:
    endpoints = Endpoints(
        interaction="127.0.0.1:1",
        broker="127.0.0.1:2",
        metrics={"interaction": "http://127.0.0.1:7/metrics", "broker": "http://127.0.0.1:8/metrics"},
    )

    assert up.ready_line(endpoints, Path(".state")).endswith(
        "state .state; metrics interaction http://127.0.0.1:7/metrics, broker http://127.0.0.1:8/metrics)"
    )


# --- `maka up` as a real process (e2e) ------------------------------------------------------------

MAKA = [sys.executable, "-m", "surfaces.cli.main"]
ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = 120.0
GONE_TIMEOUT = 30.0


@dataclass
class UpProcess:
    """A ``maka up`` process on an empty ``mcpServers`` config, ephemeral ports, no web surface."""

    process: asyncio.subprocess.Process
    ready_line: str
    state_dir: Path
    endpoints: Endpoints


async def _start_up(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> UpProcess:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    state_dir = tmp_path / "state"
    process = await asyncio.create_subprocess_exec(
        *MAKA,
        "up",
        "--config",
        str(config),
        "--state-dir",
        str(state_dir),
        "--ports",
        "ephemeral",
        "--no-web",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert process.stdout is not None
    async with asyncio.timeout(START_TIMEOUT):
        ready = (await process.stdout.readline()).decode()
    assert ready.startswith("maka is ready: "), ready
    return UpProcess(process, ready, state_dir, read_endpoints(state_dir))


async def _finish(up_process: UpProcess) -> None:
    """SIGINT a still running ``maka up`` and wait (bounded) for it to exit."""
    if up_process.process.returncode is None:
        up_process.process.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            await up_process.process.communicate()


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a dead child nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture
async def running_up(tmp_path: Path) -> AsyncIterator[UpProcess]:
    up_process = await _start_up(tmp_path)
    try:
        yield up_process
    finally:
        await _finish(up_process)
        for pid in up_process.endpoints.pids.values():  # never leave a child behind
            with contextlib.suppress(ProcessLookupError):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
async def test_every_child_dies_when_maka_up_is_killed_with_sigkill(running_up: UpProcess) -> None:
    pids = running_up.endpoints.pids
    assert set(pids) == {"redis", "interaction", "broker", "provider", "mcp"}
    assert all(_alive(pid) for pid in pids.values())

    running_up.process.kill()

    await eventually(
        lambda: not any(_alive(pid) for pid in pids.values()), timeout=GONE_TIMEOUT, what="every child gone"
    )


@pytest.mark.e2e
async def test_a_second_up_on_the_same_state_dir_is_refused_and_the_first_stack_keeps_working(
    running_up: UpProcess,
) -> None:
    state_dir = running_up.state_dir
    endpoints_before = (state_dir / "endpoints.json").read_text()

    second = await asyncio.create_subprocess_exec(
        *MAKA,
        "up",
        "--config",
        str(state_dir.parent / "mcp.json"),
        "--state-dir",
        str(state_dir),
        "--ports",
        "ephemeral",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    async with asyncio.timeout(60):
        out, err = await second.communicate()

    assert second.returncode == 3
    assert out == b""
    assert err.decode().startswith(
        f"STACK_RUNNING: a stack already runs in {state_dir.resolve()} (pid {running_up.process.pid})"
    )
    assert (state_dir / "endpoints.json").read_text() == endpoints_before
    assert await redis_ping(running_up.endpoints.redis_url)
    assert await grpc_serving(running_up.endpoints.broker)


async def _read_pipe(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """An asyncio reader over the read end ``fd`` of a pipe; closing the transport closes ``fd``."""
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    return reader, transport


@pytest.mark.e2e
async def test_ctrl_c_after_the_log_reader_went_away_still_stops_every_child(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    state_dir = tmp_path / "state"
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    process = await asyncio.create_subprocess_exec(
        *MAKA, "up", "--config", str(config), "--state-dir", str(state_dir), "--ports", "ephemeral", "--no-web",
        stdout=out_write, stderr=err_write, cwd=ROOT,
    )  # fmt: skip
    os.close(out_write)
    os.close(err_write)
    out, out_transport = await _read_pipe(out_read)
    err, err_transport = await _read_pipe(err_read)
    draining = asyncio.create_task(err.read())  # keep the log pipe flowing while it starts
    pids: dict[str, int] = {}
    try:
        async with asyncio.timeout(START_TIMEOUT):
            assert (await out.readline()).startswith(b"maka is ready: ")
        pids = read_endpoints(state_dir).pids
        assert set(pids) == {"redis", "interaction", "broker", "provider", "mcp"}
        # `make run 2>&1 | tee log`: Ctrl-C kills tee first, so maka up's stdout and stderr are broken pipes.
        out_transport.close()
        err_transport.close()
        draining.cancel()

        process.send_signal(signal.SIGINT)

        async with asyncio.timeout(60):
            code = await process.wait()
        assert code == 0
        await eventually(
            lambda: not any(_alive(pid) for pid in pids.values()), timeout=GONE_TIMEOUT, what="every child gone"
        )
    finally:
        draining.cancel()
        out_transport.close()
        err_transport.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
        for pid in pids.values():
            with contextlib.suppress(ProcessLookupError):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
async def test_metrics_gives_each_service_its_own_endpoint_even_with_an_inherited_metrics_listen(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "MAKA_METRICS_LISTEN": f"127.0.0.1:{free_port()}"}  # one port for all children
    up_process = await _start_up(tmp_path, "--metrics", env=env)
    try:
        metrics = up_process.endpoints.metrics
        assert set(metrics) == {"interaction", "broker", "provider"}
        assert len(set(metrics.values())) == 3
        for name, url in metrics.items():
            assert f"{name} {url}" in up_process.ready_line
        async with httpx.AsyncClient(timeout=5) as client:
            for url in metrics.values():
                response = await client.get(url)
                assert response.status_code == 200
                assert "maka_grpc_requests_total" in response.text
    finally:
        await _finish(up_process)


@pytest.mark.e2e
async def test_an_inherited_metrics_listen_does_not_stop_the_stack_without_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "MAKA_METRICS_LISTEN": f"127.0.0.1:{free_port()}"}  # the 2nd child to bind it failed
    up_process = await _start_up(tmp_path, env=env)
    try:
        assert up_process.endpoints.metrics == {}
        assert await grpc_serving(up_process.endpoints.broker)
    finally:
        await _finish(up_process)


@pytest.mark.e2e
async def test_a_taken_port_fails_start_naming_the_address_and_how_to_choose_other_ports(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            *MAKA, "up", "--config", str(config), "--state-dir", str(tmp_path / "state"), "--no-web",
            "--ports", f"interaction={port},broker=0,provider=0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        async with asyncio.timeout(START_TIMEOUT):
            out, err = await process.communicate()

    assert (process.returncode, out) == (3, b"")
    assert f"STACK_FAILED: interaction exited with code 1 before it was ready: cannot bind 127.0.0.1:{port}" in (
        err.decode()
    )
    assert "choose others with --ports NAME=P,..., e.g. --ports web=9000,mcp=9001" in err.decode()
    assert "make run PORTS=web=9000,mcp=9001" in err.decode()
    assert "ephemeral" not in err.decode()  # it would move every port at each start
