"""The Maka topology before and around its children: config checks, the embedded Redis, the children's environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio

from stack import topology
from stack.errors import StackError
from stack.supervisor import Supervisor
from stack.topology import Stack


async def test_stack_without_a_config_file_fails_with_a_clear_message(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "missing.json", tmp_path / "state")

    with pytest.raises(StackError, match=r"missing\.json not found"):
        await stack.start()


async def test_stack_rejects_a_config_without_mcp_servers(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"server": {}}))  # neither mcpServers nor VS Code's servers

    with pytest.raises(StackError, match="mcpServers: must be an object"):
        await Stack(config, tmp_path / "state").start()


async def test_stack_without_redis_server_binary_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(StackError, match=r"redis-server is not installed.*--redis-url"):
        await Stack(config, tmp_path / "state").start()


async def test_embedded_redis_keeps_an_append_only_file_in_the_state_dir(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "mcp.json", tmp_path / "state")
    supervisor = Supervisor(sink=lambda _n, _l: None, ready_timeout=20)
    (tmp_path / "state").mkdir()
    await supervisor.start(stack.redis_spec())
    try:
        client = redis.asyncio.Redis.from_url(stack.redis_url)
        config = await client.config_get("appendonly")
        directory = await client.config_get("dir")
        await client.aclose()
    finally:
        await supervisor.stop()

    assert config == {"appendonly": "yes"}
    assert directory == {"dir": str(tmp_path / "state" / "redis")}
    assert stack.redis_url.startswith("unix://")


async def test_embedded_redis_socket_moves_to_a_short_path_when_the_state_dir_is_long(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    stack = Stack(tmp_path / "mcp.json", deep)

    stack.redis_spec()
    try:
        socket_path = stack.redis_url.removeprefix("unix://")
        assert len(socket_path) < 100
        assert socket_path.startswith("/tmp/maka-")
    finally:
        await stack.stop()
    assert not Path(socket_path).parent.exists()


def test_children_do_not_inherit_maka_metrics_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_METRICS_LISTEN", "127.0.0.1:9464")

    env = topology.child_env({"MAKA_LISTEN": "127.0.0.1:0"})

    assert "MAKA_METRICS_LISTEN" not in env
    assert env["MAKA_LISTEN"] == "127.0.0.1:0"


async def test_the_stacks_tier_serves_its_one_host_whatever_pool_the_shell_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAKA_HOST_IDS", "*")  # a surface's pool (maka pending --hosts) is no tier setting
    stack = Stack(tmp_path / "mcp.json", tmp_path / "state", host_id="h-local")
    spec = stack._interaction_spec()
    assert spec.prepare is not None
    await spec.prepare(spec, 1)

    assert spec.env is not None
    assert spec.env["MAKA_HOST_ID"] == "h-local"
    assert spec.env["MAKA_HOST_IDS"] == ""
