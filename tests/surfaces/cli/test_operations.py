"""Running the Host day to day (docs/operations.md), through real processes and the ``maka`` entry point:
``maka status`` with real failure causes, ``SERVER_UNAVAILABLE``, a server's own error message,
argument validation, ``maka config check``, and ``maka reload`` / SIGHUP with a call in flight."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stack.ports import free_port
from stack.state_dir import Endpoints, read_endpoints
from surfaces.common.interactions import FormSnapshot, Interactions
from tests.helpers.cli import MAKA, Ran, maka
from tests.helpers.stack import running_stack
from tests.helpers.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
OPS = ["-m", "tests.fixtures.mcp_servers.ops_server"]
CANARY = "canary-token-7f3a9d"


@contextlib.asynccontextmanager
async def refusing_401() -> AsyncIterator[int]:
    """An HTTP server answering every request ``401 Unauthorized`` (a server that needs a token)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def _servers(ran: Ran) -> dict[str, dict[str, object]]:
    return {s["name"]: s for s in json.loads(ran.out)["servers"]}


@pytest.mark.e2e
async def test_a_new_user_diagnoses_failing_servers_from_maka_status_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_CANARY", CANARY)
    async with refusing_401() as denied_port:
        config = tmp_path / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "ops": {"command": "python", "args": OPS},
                        "missing": {"command": "python", "args": ["no_such_server.py"], "autoApprove": []},
                        "refused": {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
                        "denied": {
                            "type": "streamable-http",
                            "url": f"http://127.0.0.1:{denied_port}/mcp?key=${{OPS_CANARY}}",
                            "headers": {"Authorization": "Bearer ${OPS_CANARY}"},
                        },
                        "off": {"command": "python", "args": OPS, "disabled": True},
                    }
                }
            )
        )
        async with running_stack(tmp_path, config=config) as running:
            state = tmp_path / "state"

            async def all_settled() -> tuple[Ran, Ran] | None:
                ran = await maka("status", "--json", state_dir=state)
                servers = _servers(ran) if ran.out else {}
                states = {name: s["state"] for name, s in servers.items()}
                want = {"ops": "ready", "missing": "failed", "refused": "failed", "denied": "failed", "off": "disabled"}
                if states != want:
                    return None
                # Each retry of the missing server replaces its last error. On a loaded machine an attempt can
                # end before its child wrote to stderr (the SDK stops the child when the transport closes), so
                # the JSON and the human report are read back to back and retried until both show one with it.
                missing = servers["missing"]["lastError"]
                if not (isinstance(missing, dict) and missing["stderrTail"]):
                    return None
                human = await maka("status", state_dir=state)
                return (ran, human) if "stderr: " in human.out else None

            settled, human = await eventually(all_settled, timeout=60, interval=0.2, what="every server settled")
            assert settled.code == 1  # something is not ready
            servers = _servers(settled)
            assert servers["ops"]["tools"] == 5
            assert servers["ops"]["protocolVersion"]
            missing = servers["missing"]["lastError"]
            assert isinstance(missing, dict)
            assert any("no_such_server.py" in line for line in missing["stderrTail"]), missing
            denied = servers["denied"]["lastError"]
            assert isinstance(denied, dict)
            assert denied["httpStatus"] == 401, denied
            assert servers["denied"]["nextRetryInSeconds"] is not None
            refused = servers["refused"]["lastError"]
            assert isinstance(refused, dict)
            assert "Connect" in refused["summary"], refused

            assert human.code == 1
            assert "ops: ready, stdio" in human.out
            assert "denied: failed, http" in human.out
            assert "HTTP status: 401" in human.out
            assert "stderr: " in human.out
            assert "no_such_server.py" in human.out
            assert "off: disabled" in human.out
            assert "interaction  serving" in human.out
            assert CANARY not in human.out + settled.out
            assert CANARY not in running.all_logs()

            unavailable = await maka("call", "missing:anything", state_dir=state)
            assert unavailable.code == 3
            assert unavailable.reason.startswith("SERVER_UNAVAILABLE: MCP server missing failed to connect: "), (
                unavailable.err
            )
            assert "next retry in" in unavailable.err
            disabled = await maka("call", "off:hello", state_dir=state)
            assert disabled.reason.startswith("SERVER_UNAVAILABLE: MCP server off is disabled in the config")
            unknown = await maka("call", "nosuch:tool", state_dir=state)
            assert unknown.code == 3
            assert unknown.reason.startswith("UNKNOWN_TOOL: ")
            unknown_on_ready = await maka("call", "ops:nosuch", state_dir=state)
            assert unknown_on_ready.reason.startswith("UNKNOWN_TOOL: ")

            rejected = await maka("call", "ops:reject", state_dir=state)
            assert rejected.code == 3
            assert rejected.reason.startswith(
                "SERVER_ERROR: MCP error -32602: date must look like 2026-01-31 (got a weekday name)"
            ), rejected.err
            assert "\x07" not in rejected.err

            wrong_type = await maka("call", "ops:count", "--args", '{"n": "seven"}', state_dir=state)
            assert wrong_type.code == 3
            assert wrong_type.reason.startswith("INVALID_ARGUMENTS: "), wrong_type.err
            assert '/n: must be of type "integer"' in wrong_type.err
            assert "seven" not in wrong_type.err
            absent = await maka("call", "ops:count", state_dir=state)
            assert "/n: is required" in absent.err
            unchecked = await maka("call", "ops:count", "--args", '{"n": "seven"}', "--no-validate", state_dir=state)
            assert "INVALID_ARGUMENTS" not in unchecked.err
            assert unchecked.code in (1, 3)
            good = await maka("call", "ops:count", "--args", '{"n": 7}', state_dir=state)
            assert (good.code, good.out.strip()) == (0, "counted 7")


@pytest.mark.e2e
async def test_maka_status_lists_the_attached_surfaces_a_web_page_and_a_client_library(tmp_path: Path) -> None:
    async with running_stack(tmp_path, web=True, echo=False) as running:
        state = tmp_path / "state"
        snapshot = asyncio.Event()

        async def library() -> None:
            client = Interactions.connect(running.endpoints.interaction, surface_kind="maka-client-py")
            async with client:
                async for event in client.attach(["s-lib", "s-other"]):
                    if isinstance(event, FormSnapshot):
                        snapshot.set()

        follower = asyncio.create_task(library())
        async with (
            httpx.AsyncClient(timeout=30) as http,
            http.stream("GET", running.endpoints.web + "/api/events") as sse,
        ):
            async with asyncio.timeout(30):
                await snapshot.wait()
                lines = aiter(sse.aiter_lines())
                while await anext(lines) != "event: snapshot":  # the web surface's Attach is open
                    pass

            async def both_listed() -> Ran | None:
                ran = await maka("status", "--json", state_dir=state)
                surfaces = json.loads(ran.out)["surfaces"] if ran.out else None
                kinds = sorted(s["kind"] for s in surfaces["attached"]) if surfaces else []
                return ran if kinds == ["maka-client-py", "web"] else None

            ran = await eventually(both_listed, timeout=30, interval=0.2, what="both surfaces listed")
            by_kind = {s["kind"]: s for s in json.loads(ran.out)["surfaces"]["attached"]}
            assert by_kind["maka-client-py"]["sessions"] == ["s-lib", "s-other"]
            assert by_kind["web"]["sessions"] == "all"
            assert {s["principal"] for s in by_kind.values()} == {"anonymous"}  # auth off: no token names
            assert {s["host"] for s in by_kind.values()} == {running.endpoints.host_id}
            assert all(s["attachedAt"] for s in by_kind.values())
            human = await maka("status", state_dir=state)
            assert "attached surfaces: 2" in human.out
            assert re.search(r"^  web +anonymous +all sessions; since \S+Z \(replica \w+\)$", human.out, re.M), (
                human.out
            )
            assert "maka-client-py anonymous        sessions s-lib, s-other; since" in human.out
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower

        async def none_left() -> Ran | None:
            ran = await maka("status", "--json", state_dir=state)
            return ran if ran.out and json.loads(ran.out)["surfaces"]["attached"] == [] else None

        await eventually(none_left, timeout=30, interval=0.2, what="the closed streams left the list")


def test_config_check_prints_one_line_per_problem_and_warns_about_other_hosts_keys(tmp_path: Path) -> None:

    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "disabled": False, "autoApprove": []},
                    "remote": {"type": "sse", "url": "https://h/sse", "timeout": 30},
                }
            }
        )
    )
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"mcpServers": {"a": {"url": "ftp://x", "autoApprove": []}, "b": {"command": ""}, "c": "python"}})
    )

    ok = subprocess.run([*MAKA, "config", "check", str(good)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [
        "warning: mcpServers.time.autoApprove: ignored (used by other MCP hosts, not by Maka)",
        "time: stdio, era auto",
        "remote: sse, era auto, timeout 30 s",
        f"{good}: 2 servers, valid",
    ]
    refused = subprocess.run([*MAKA, "config", "check", str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"CONFIG_INVALID: {bad}: mcpServers.a.url: must be an http:// or https:// URL",
        f"CONFIG_INVALID: {bad}: mcpServers.b.command: must be a non-empty string",
        f"CONFIG_INVALID: {bad}: mcpServers.c: must be an object",
        # the ignored keys of an invalid file are named too, so one fix round shows everything
        "warning: mcpServers.a.autoApprove: ignored (used by other MCP hosts, not by Maka)",
    ]
    assert "Traceback" not in refused.stderr


# --- reload -------------------------------------------------------------------------------------


@dataclass
class Up:
    process: asyncio.subprocess.Process
    state_dir: Path
    endpoints: Endpoints


@contextlib.asynccontextmanager
async def maka_up(config: Path, state_dir: Path) -> AsyncIterator[Up]:
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
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(120):
            ready = (await process.stdout.readline()).decode()
        assert ready.startswith("maka is ready: "), ready
        yield Up(process, state_dir, read_endpoints(state_dir))
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await process.communicate()


@pytest.mark.e2e
async def test_reload_and_sighup_apply_an_edited_config_while_an_untouched_servers_call_goes_on(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    keep = {"command": "python", "args": [*OPS, "--gate", str(gate)]}
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "keep": keep,
                    "old": keep,
                    "chg": {"command": "python", "args": OPS},
                }
            }
        )
    )
    state = tmp_path / "state"
    async with maka_up(config, state) as up:
        in_flight = asyncio.create_task(maka("call", "keep:gated", state_dir=state, timeout=120))
        draining = asyncio.create_task(maka("call", "old:gated", state_dir=state, timeout=120))

        async def keep_busy() -> bool:
            servers = _servers(await maka("status", "--json", state_dir=state))
            return servers["keep"]["liveCalls"] == 1 and servers["old"]["liveCalls"] == 1

        await eventually(keep_busy, timeout=60, interval=0.2, what="the call in flight on keep")

        original = config.read_text()
        config.write_text('{"mcpServers": {"x": {"command": 1}}}')
        refused = await maka("reload", state_dir=state)
        assert refused.code == 2
        assert "CONFIG_INVALID: " in refused.err
        assert "mcpServers.x.command" in refused.err
        assert "nothing was changed" in refused.err
        assert original

        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "keep": keep,
                        "new": {"command": "python", "args": OPS},
                        "chg": {"command": "python", "args": OPS, "env": {"CHANGED": "1"}},
                    }
                }
            )
        )
        reloaded = await maka("reload", state_dir=state)
        assert reloaded.code == 0, reloaded.err
        assert reloaded.out.strip() == "config generation 2: added: new; removed: old; changed: chg"

        async def new_ready() -> dict[str, dict[str, object]] | None:
            servers = _servers(await maka("status", "--json", state_dir=state))
            ok = servers.get("new", {}).get("state") == "ready" and servers.get("chg", {}).get("state") == "ready"
            return servers if ok else None

        servers = await eventually(new_ready, timeout=60, interval=0.2, what="the reloaded servers ready")
        assert servers["keep"]["liveCalls"] == 1  # untouched: still the same call
        assert servers["old"]["state"] == "draining"  # removed, finishing its call in flight
        hello = await maka("call", "new:hello", state_dir=state)
        assert (hello.code, hello.out.strip()) == (0, "hello")
        removed = await maka("call", "old:hello", state_dir=state)
        assert removed.reason.startswith("SERVER_UNAVAILABLE: MCP server old was removed from the config"), removed.err

        config.write_text(json.dumps({"mcpServers": {"keep": keep, "new": {"command": "python", "args": OPS}}}))
        os.kill(up.process.pid, signal.SIGHUP)  # what `maka reload` does, sent to `maka up` itself

        async def chg_removed() -> bool:
            return "chg" not in _servers(await maka("status", "--json", state_dir=state))

        await eventually(chg_removed, timeout=60, interval=0.2, what="SIGHUP applied")

        gate.write_text("open")
        done = await in_flight
        assert (done.code, done.out.strip()) == (0, "gate opened"), done.err
        drained = await draining
        assert (drained.code, drained.out.strip()) == (0, "gate opened"), drained.err

        async def old_gone() -> bool:
            return "old" not in _servers(await maka("status", "--json", state_dir=state))

        await eventually(old_gone, timeout=30, interval=0.2, what="the drained server closed")


def _config(ran: Ran) -> dict[str, Any]:
    configs = json.loads(ran.out)["config"]
    assert len(configs) == 1, configs  # one MCP provider process
    config: dict[str, Any] = configs[0]
    return config


@pytest.mark.e2e
async def test_maka_status_shows_a_rejected_reload_with_its_problems_until_a_fixed_file_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_CANARY", CANARY)  # the stack's environment: `maka up` and its children
    served = {"command": "python", "args": OPS, "env": {"OPS_TOKEN": "${OPS_CANARY}"}}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ops": served}}))
    state = tmp_path / "state"
    async with maka_up(config, state) as up:
        started = await maka("status", state_dir=state)
        assert "config: generation 1, as started (no reload since)" in started.out, started.out
        assert _config(await maka("status", "--json", state_dir=state))["lastReload"] is None

        bad = {f"bad{i:02}": {"command": ""} for i in range(24)}
        leak = {"url": "ftp://mcp.example/mcp?token=${OPS_CANARY}", "headers": {"Authorization": "${OPS_CANARY}"}}
        config.write_text(json.dumps({"mcpServers": {"ops": served, "leak": leak, **bad}}))
        before = time.time()
        refused = await maka("reload", state_dir=state)
        assert refused.code == 2, refused.err
        refusals = [line for line in refused.err.splitlines() if line.startswith("CONFIG_INVALID: ")]
        assert refusals[0] == f"CONFIG_INVALID: {config}: mcpServers.leak.url: must be an http:// or https:// URL"
        assert len(refusals) == 21, refusals
        assert refusals[-1] == f"CONFIG_INVALID: {config}: ... and 5 more problems"
        assert "nothing was changed: the stack keeps running config generation 1" in refused.err

        human = await maka("status", state_dir=state)
        assert human.code == 1, human.out  # the file on disk is not what runs
        assert re.search(r"last reload REJECTED at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", human.out), human.out
        assert "still running generation 1, the previous config" in human.out
        problems = [line.strip() for line in human.out.splitlines() if line.startswith("  problem: ")]
        assert problems[0] == "problem: mcpServers.leak.url: must be an http:// or https:// URL"
        assert problems[1] == "problem: mcpServers.bad00.command: must be a non-empty string"
        assert len(problems) == 21
        assert problems[-1] == "problem: ... and 5 more problems"
        data = await maka("status", "--json", state_dir=state)
        rejected = _config(data)
        assert rejected["generation"] == 1
        last = rejected["lastReload"]
        assert (last["outcome"], last["changes"], len(last["problems"])) == ("rejected", [], 21)
        assert before <= last["time"] <= time.time()
        assert [s["name"] for s in json.loads(data.out)["servers"]] == ["ops"]
        for ran in (refused, human, data):
            assert CANARY not in ran.out + ran.err
        hello = await maka("call", "ops:hello", state_dir=state)  # the previous config still serves
        assert (hello.code, hello.out.strip()) == (0, "hello"), hello.err

        config.write_text(json.dumps({"mcpServers": {"ops": served, "x": {"command": 1}}}))
        os.kill(up.process.pid, signal.SIGHUP)  # `maka up` forwards it to the provider: recorded the same way

        async def second_rejection() -> dict[str, Any] | None:
            last = _config(await maka("status", "--json", state_dir=state))["lastReload"]
            return last if last["problems"] == ["mcpServers.x.command: must be a non-empty string"] else None

        again = await eventually(second_rejection, timeout=30, interval=0.2, what="the SIGHUP rejection")
        assert again["time"] > last["time"]

        config.write_text(json.dumps({"mcpServers": {"ops": served, "more": {"command": "python", "args": OPS}}}))
        applied = await maka("reload", state_dir=state)
        assert (applied.code, applied.out.strip()) == (0, "config generation 2: added: more"), applied.err

        async def all_ready() -> Ran | None:
            ran = await maka("status", state_dir=state)
            return ran if ran.code == 0 else None

        fixed = await eventually(all_ready, timeout=60, interval=0.2, what="the fixed config applied and ready")
        assert re.search(r"config: generation 2, last reload applied at .* UTC \(\d+ s ago\): added: more", fixed.out)
        assert "REJECTED" not in fixed.out
        assert "problem:" not in fixed.out
        last = _config(await maka("status", "--json", state_dir=state))["lastReload"]
        assert (last["outcome"], last["problems"], last["changes"]) == ("applied", [], ["added: more"])


@pytest.mark.e2e
async def test_a_provider_that_dies_after_a_rejected_reload_comes_back_on_the_config_it_was_running(
    tmp_path: Path,
) -> None:
    served = {"command": "python", "args": OPS}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ops": served}}))
    state = tmp_path / "state"
    async with maka_up(config, state) as up:
        config.write_text(json.dumps({"mcpServers": {"ops": served, "x": {"command": ""}}}))
        refused = await maka("reload", state_dir=state)
        assert refused.code == 2, refused.err
        first = read_endpoints(state).pids["provider"]
        os.kill(first, signal.SIGKILL)

        async def restarted() -> int | None:
            pid = read_endpoints(state).pids.get("provider")
            return pid if pid not in (None, first) else None

        await eventually(restarted, timeout=60, interval=0.2, what="the provider restarted by maka up")

        async def hello() -> Ran | None:
            ran = await maka("call", "ops:hello", state_dir=state)
            return ran if ran.code == 0 else None

        served_again = await eventually(hello, timeout=60, interval=0.5, what="the last applied config serving")
        assert served_again.out.strip() == "hello"
        assert up.process.returncode is None, "the stack kept running"
        human = await maka("status", state_dir=state)
        assert human.code == 1, human.out  # the file on disk is still not what runs
        assert "last reload REJECTED" in human.out, human.out
        assert "problem: mcpServers.x.command: must be a non-empty string" in human.out
        assert [s["name"] for s in json.loads((await maka("status", "--json", state_dir=state)).out)["servers"]] == [
            "ops"
        ]


@pytest.mark.e2e
async def test_progress_re_arms_the_execution_timer_up_to_the_maximum_total_execution_time(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ops": {"command": "python", "args": OPS}}}))
    env = {"MAKA_EXECUTION_TIMEOUT_SECONDS": "2", "MAKA_MAX_EXECUTION_SECONDS": "6"}
    async with running_stack(tmp_path, config=config, extra_env=env):
        state = tmp_path / "state"
        progressing, over_budget, silent = await asyncio.gather(
            maka("call", "ops:progress_for", "--args", '{"seconds": 4, "step": 0.5}', state_dir=state),
            maka("call", "ops:progress_for", "--args", '{"seconds": 20, "step": 0.5}', state_dir=state),
            maka("call", "ops:gated", state_dir=state),
        )

    assert (progressing.code, progressing.out.strip()) == (0, "worked 4 s"), progressing.err
    assert over_budget.reason.startswith("EXECUTION_TIMEOUT: the provider ran 6 s in total"), over_budget.err
    assert silent.reason.startswith("EXECUTION_TIMEOUT: the provider execution timer fired (no progress"), silent.err
