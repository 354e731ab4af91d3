"""A Redis Cluster without replicas cannot honour the ``WAIT`` fence (docs/design.md#durable-fences): the
Interaction service refuses to start with one line naming the setting, and runs fenceless once told so."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.interaction.settings import RedisMode, Settings
from tests.helpers.redis_server import RedisClusterServers
from tests.services.interaction.harness import BROKER_TOKEN, Link, channel, start_service, write_tokens

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare_cluster() -> Iterator[RedisClusterServers]:
    with tempfile.TemporaryDirectory(prefix="maka-bare-cluster-", dir="/tmp") as tmp:
        servers = RedisClusterServers(Path(tmp), replicas=0)
        try:
            servers.start()
            yield servers
        finally:
            servers.stop()


async def test_a_replica_less_cluster_with_the_default_fence_is_refused_at_start_with_one_line(
    bare_cluster: RedisClusterServers, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "MAKA_REDIS_MODE": "cluster",
        "MAKA_REDIS_URL": bare_cluster.url,
        "MAKA_AUTH_TOKENS_FILE": str(write_tokens(tmp_path / "tokens.json")),
    }
    env.pop("MAKA_REDIS_WAIT_REPLICAS", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.interaction.main", cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode == 2
    text = (out + err).decode()
    assert "redis_wait_fence_unsatisfiable" in text
    assert "the WAIT fence needs 1 replicas but the cluster's masters have 0" in text
    assert "MAKA_REDIS_WAIT_REPLICAS=0" in text
    assert "Traceback" not in text


async def test_a_replica_less_cluster_serves_a_host_link_once_the_fence_is_turned_off(
    bare_cluster: RedisClusterServers, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=bare_cluster.url,
        redis_mode=RedisMode.CLUSTER,
        redis_wait_replicas=0,
        grace_seconds=0.5,
        auth_tokens_file=write_tokens(tmp_path / "tokens.json"),
    )
    service = await start_service(settings)
    try:
        async with channel(service, BROKER_TOKEN) as bch:
            link = await Link.connect(bch)
            assert link.epoch >= 1
            await link.close()
    finally:
        await service.running.stop()
