"""surfaces/common/asgi_server.py: the socket the HTTP surfaces serve on."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from surfaces.common.asgi_server import bind_socket, write_atomically


def test_the_listening_socket_turns_nagle_off_for_the_connections_it_accepts() -> None:
    sock = bind_socket("127.0.0.1", 0)
    try:
        sock.listen()
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            accepted.close()
            client.close()
    finally:
        sock.close()


def test_a_taken_port_is_one_clear_error() -> None:
    taken = bind_socket("127.0.0.1", 0)
    try:
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"^cannot bind 127\.0\.0\.1:{port}: "):
            bind_socket("127.0.0.1", port)
    finally:
        taken.close()


def test_the_port_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "web.port"
    path.write_text("1")
    write_atomically(path, "8765")
    assert path.read_text() == "8765"
    assert list(tmp_path.iterdir()) == [path]
