"""Form notifications from a replicated tier, through real processes (docs/design.md#history "Notifications"):
two ``python -m services.interaction.main`` replicas of one Host over a private ``redis-server``, each notifying
a real webhook receiver; this test process is the broker (HostLink on each replica). Every form is notified
exactly once, by the replica that opened it, and a replayed open (a broker whose link lost the reply) adds none.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc.aio
import pytest

from bench.processes import InteractionProcess
from maka.interaction.v1 import interaction_service_pb2
from tests.helpers.redis_server import RedisServer
from tests.helpers.waiting import eventually
from tests.helpers.webhook import Receiver
from tests.services.interaction.harness import Link, binding, make_form

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A private redis-server for the replicas (their connections are not the session server's)."""
    with tempfile.TemporaryDirectory(prefix="maka-notify-", dir="/tmp") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def test_two_replicas_notify_each_form_once_from_the_replica_that_opened_it_and_a_replayed_open_adds_none(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    with Receiver() as receiver:
        env = {
            "MAKA_REDIS_URL": private_redis.url,
            "MAKA_HOST_ID": f"notify-{secrets.token_hex(3)}",
            "MAKA_NOTIFY_WEBHOOK_URLS": receiver.url(),
            "MAKA_NOTIFY_EXPIRY_LEAD_SECONDS": "0",
            "MAKA_WEB_PUBLIC_URL": "https://maka.example.com",
            "MAKA_GRACE_SECONDS": "1",
        }
        replicas = [InteractionProcess(tmp_path / f"replica-{n}", env) for n in range(2)]
        try:
            ports = [await replica.start() for replica in replicas]
            async with (
                grpc.aio.insecure_channel(f"127.0.0.1:{ports[0]}") as first,
                grpc.aio.insecure_channel(f"127.0.0.1:{ports[1]}") as second,
            ):
                a = await Link.connect(first)
                b = await Link.connect(second, resume_epoch=a.epoch)
                try:
                    one = await a.open("s-a", "inv-1")
                    # The broker re-sends inv-1's open on the other replica (its link lost the reply): same form.
                    again = interaction_service_pb2.OpenInteraction(
                        request_ref="ref-again", binding=binding("s-a", "inv-1"), form=make_form(), replay=True
                    )
                    reply = await b.request(interaction_service_pb2.HostLinkRequest(open=again))
                    assert reply.opened.interaction.interaction_id == one.interaction_id
                    two = await b.open("s-a", "inv-2")
                    three = await a.open("s-a", "inv-3")
                    # Each replica's queue is in order: a notification of the replay would arrive before two's,
                    # and anything more of a's before three's.
                    wanted = {two.interaction_id, three.interaction_id}
                    await eventually(
                        lambda: wanted <= {x["interactionId"] for x in receiver.bodies()},
                        timeout=30,
                        what="the notifications of both replicas' last forms",
                    )
                finally:
                    await a.close()
                    await b.close()
        finally:
            for replica in replicas:
                replica.stop()
        bodies = receiver.bodies()
    assert sorted(x["interactionId"] for x in bodies) == sorted(
        [one.interaction_id, two.interaction_id, three.interaction_id]
    )
    assert {x["link"] for x in bodies} == {
        f"https://maka.example.com/#/interaction/{i}"
        for i in (one.interaction_id, two.interaction_id, three.interaction_id)
    }
