"""hiredis command packing sends exactly the bytes redis-py's own packer would."""

from __future__ import annotations

from typing import Any, cast

import pytest
import redis.asyncio
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from services.interaction.command_packing import packed, use_hiredis_packing

COMMANDS: list[tuple[str | bytes | int | float, ...]] = [
    ("EVALSHA", "a" * 40, 3, "k1", "k2", "k3", "value", b"\x00\xffbinary", 12345, -7, 1.5, 0.3, 2**70),
    ("CLIENT SETNAME", "maka-interaction"),
    ("XREAD", "BLOCK", 0, "STREAMS", "s", "0-0"),
    ("SET", "ключ", "värde ✓"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_packed_command_has_the_same_bytes_as_redis_py_packs(command: tuple[str | bytes | int | float, ...]) -> None:
    plain = b"".join(Connection().pack_command(*command))
    assert b"".join(packed(Connection)().pack_command(*command)) == plain


def test_an_argument_redis_py_refuses_is_still_refused_with_its_data_error() -> None:
    with pytest.raises(DataError):
        packed(Connection)().pack_command("SET", "k", cast(Any, None))
    with pytest.raises(DataError):
        packed(Connection)().pack_command("SET", "k", True)


def test_each_connection_kind_keeps_its_own_class_and_gains_the_packing() -> None:
    for kind in (Connection, SSLConnection, UnixDomainSocketConnection):
        assert issubclass(packed(kind), kind)
        assert packed(packed(kind)) is packed(kind)


def test_a_client_from_a_unix_socket_url_opens_packing_unix_connections() -> None:
    client = use_hiredis_packing(redis.asyncio.Redis.from_url("unix:///tmp/nowhere.sock"))
    assert issubclass(client.connection_pool.connection_class, UnixDomainSocketConnection)
    assert client.connection_pool.connection_class is packed(UnixDomainSocketConnection)
