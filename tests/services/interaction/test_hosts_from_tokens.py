"""``MAKA_HOST_IDS=*``: the tier serves every Host a broker token names, the tokens coming from one file per team
(``MAKA_AUTH_TOKENS_DIR``), so removing a team's file retires its Hosts and tokens and touches no other team."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import TokenFileError
from services.interaction.main import served_hosts
from services.interaction.settings import Settings
from tests.services.interaction.harness import FRAME_TIMEOUT, channel, start_service

ROOT = Path(__file__).resolve().parents[3]
TEAMS = {
    "team-a": ["team-a-host-0", "team-a-host-1"],
    "team-b": ["team-b-host-0"],
}


def _broker(team: str) -> str:
    return f"{team}-broker-token-0123456789"


def _surface(team: str) -> str:
    return f"{team}-surface-token-0123456789"


def _team_dir(root: Path, team: str, hosts: list[str]) -> None:
    """What a team's Secret mounted into the tier holds: its broker's and its web's entries, scoped to its Hosts."""
    (root / team).mkdir(parents=True)
    entries = [
        {"name": f"{team}-broker", "token": _broker(team), "roles": ["broker"], "hosts": hosts},
        {"name": f"{team}-web", "token": _surface(team), "roles": ["surface"], "hosts": hosts},
    ]
    (root / team / "tokens.json").write_text(json.dumps({"tokens": entries}))


def _tokens_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tokens.d"
    for team, hosts in TEAMS.items():
        _team_dir(root, team, hosts)
    (root / "..data").mkdir()  # a Secret volume's own entries are skipped
    return root


def _settings(redis_url: str, tokens_dir: Path) -> Settings:
    return Settings(
        redis_url=redis_url, reaper_interval_seconds=0.05, grace_seconds=0.5, host_ids="*", auth_tokens_dir=tokens_dir
    )


async def _hello(ch: grpc.aio.Channel, host_id: str) -> grpc.StatusCode:
    """Begin ``host_id``'s epoch on a HostLink: OK when the tier answered with the epoch, else the refusal."""
    call = interaction_service_pb2_grpc.InteractionServiceStub(ch).HostLink()
    try:
        hello = interaction_service_pb2.Hello(begin_new_epoch=True, host_id=host_id)
        await call.write(interaction_service_pb2.HostLinkRequest(hello=hello))
        async with asyncio.timeout(FRAME_TIMEOUT):
            first = await call.read()
        assert isinstance(first, interaction_service_pb2.HostLinkResponse)
        assert first.epoch.host_epoch > 0
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as error:
        return error.code()
    finally:
        call.cancel()


async def _list_hosts(ch: grpc.aio.Channel) -> list[str]:
    stub = interaction_service_pb2_grpc.InteractionServiceStub(ch)
    return list((await stub.ListHosts(interaction_service_pb2.ListHostsRequest(), timeout=5)).host_ids)


async def test_the_tier_serves_exactly_the_hosts_each_teams_broker_token_names_and_each_broker_only_its_own(
    redis_url: str, tmp_path: Path
) -> None:
    settings = _settings(redis_url, _tokens_dir(tmp_path))
    assert served_hosts(settings) == ("team-a-host-0", "team-a-host-1", "team-b-host-0")
    service = await start_service(settings)
    try:
        async with channel(service, _broker("team-a")) as a, channel(service, _broker("team-b")) as b:
            assert await _hello(a, "team-a-host-1") == grpc.StatusCode.OK
            assert await _hello(b, "team-b-host-0") == grpc.StatusCode.OK
            assert await _hello(a, "team-b-host-0") == grpc.StatusCode.PERMISSION_DENIED, "not its team's Host"
            assert await _hello(b, "team-a-host-0") == grpc.StatusCode.PERMISSION_DENIED
        async with channel(service, _surface("team-b")) as web_b, channel(service, _surface("team-a")) as web_a:
            assert await _list_hosts(web_b) == ["team-b-host-0"]
            assert await _list_hosts(web_a) == ["team-a-host-0", "team-a-host-1"]
    finally:
        await service.running.stop()


async def test_removing_a_teams_tokens_file_retires_its_hosts_and_tokens_and_leaves_the_other_team_as_it_was(
    redis_url: str, tmp_path: Path
) -> None:
    tokens_dir = _tokens_dir(tmp_path)
    shutil.rmtree(tokens_dir / "team-b")  # the team's Secret no longer mounted: the tier rolled without it
    settings = _settings(redis_url, tokens_dir)

    assert served_hosts(settings) == ("team-a-host-0", "team-a-host-1")
    service = await start_service(settings)
    try:
        async with channel(service, _broker("team-b")) as b, channel(service, _surface("team-b")) as web_b:
            assert await _hello(b, "team-b-host-0") == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _list_hosts(web_b)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        async with channel(service, _broker("team-a")) as a, channel(service, _surface("team-a")) as web_a:
            assert await _hello(a, "team-a-host-0") == grpc.StatusCode.OK
            assert await _list_hosts(web_a) == ["team-a-host-0", "team-a-host-1"]
        async with channel(service) as anonymous:  # no team left would still not open the tier to anyone
            assert await _hello(anonymous, "team-a-host-0") == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await service.running.stop()


def test_hosts_from_tokens_need_brokers_that_list_their_hosts(redis_url: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TokenFileError, match="no broker token names a Host"):
        served_hosts(_settings(redis_url, empty))
    unscoped = tmp_path / "unscoped"
    _team_dir(unscoped, "team-c", ["*"])
    with pytest.raises(TokenFileError, match="'team-c-broker' must list its 'hosts'"):
        served_hosts(_settings(redis_url, unscoped))
    bad = tmp_path / "bad"
    _team_dir(bad, "team-d", ["team d host"])
    with pytest.raises(TokenFileError, match="invalid Host ids"):
        served_hosts(_settings(redis_url, bad))
    listed = Settings(redis_url=redis_url, host_ids="h-1,h-2", auth_tokens_dir=_tokens_dir(tmp_path))
    assert served_hosts(listed) == ("h-1", "h-2"), "a listed set stays the list"


def test_a_tier_whose_tokens_name_no_host_exits_2_with_one_line_and_no_traceback(
    redis_url: str, tmp_path: Path
) -> None:
    (tmp_path / "tokens.d").mkdir()  # every team retired: no broker token left
    env = {
        **os.environ,
        "MAKA_LISTEN": "127.0.0.1:0",
        "MAKA_REDIS_URL": redis_url,
        "MAKA_HOST_IDS": "*",
        "MAKA_AUTH_TOKENS_DIR": str(tmp_path / "tokens.d"),
    }
    env.pop("MAKA_AUTH_TOKENS_FILE", None)
    result = subprocess.run(
        [sys.executable, "-m", "services.interaction.main"], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if "host_ids_unresolved" in line]
    assert len(lines) == 1, stderr
    assert "no broker token names a Host" in lines[0]
