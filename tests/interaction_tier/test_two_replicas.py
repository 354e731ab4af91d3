"""Two Interaction replicas behind client-side round_robin; one is killed (SIGKILL) mid-load
(docs/design.md#grpc-for-a-replicated-tier).

The driver is :func:`bench.failover.run_replica_kill` (real processes: one ``redis-server``, two
``services.interaction.main`` replicas serving three Hosts, a broker and provider per Host running the
example ``deploy`` server, two surfaces per Host); ``make bench`` reports the same figures.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.failover import run_replica_kill
from tests.helpers.redis_server import RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.slow]

CALLS = 500


@pytest.fixture(scope="module")
def redis_server_module() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="maka-2rep-", dir="/tmp") as tmp:
        server = RedisServer(Path(tmp), appendonly=True)
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def test_killing_one_of_two_replicas_mid_load_loses_no_call_and_misdelivers_no_answer(
    redis_server_module: RedisServer, tmp_path: Path
) -> None:
    result = await run_replica_kill(redis_server_module.url, tmp_path, calls=CALLS)
    assert result.killed_after_forms > 0, "the replica was killed with forms in flight"
    assert result.lost == [], f"calls lost: {result.lost[:5]}"
    assert result.misdelivered == [], f"answers misdelivered: {result.misdelivered[:5]}"
    assert result.completed == CALLS
    assert result.every_form_seen, "every surface saw every form of its Host"
    assert result.surfaces_agree, "both surfaces of each Host saw the same forms"
