"""Who is on the other end of a loopback connection: the local user (uid) owning the client's socket.

Every local user connects from ``127.0.0.1``, so a client address does not tell the stack's owner from another
user of the machine. On Linux the kernel lists every TCP socket of the network namespace with its owner's uid
(``/proc/net/tcp``, ``/proc/net/tcp6``; readable by every user, as identd reads it): the client's socket is the
one whose local end is the peer's address and port and whose remote end is the server's. The web surface's
login limit counts failures per such uid (:func:`login_client`), so one local user cannot spend another's.
"""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

from starlette.types import Scope

PROC_NET = Path("/proc/net")
UID_COLUMN = 7
"""The ``uid`` column of a ``/proc/net/tcp`` line (after ``sl``, the addresses, ``st``, the queues, timers)."""


def _hex_endpoint(host: str, port: int) -> tuple[str, str] | None:
    """``(table, "ADDR:PORT")`` as ``/proc/net/tcp[6]`` prints ``host:port`` (each 32-bit word in the kernel's
    byte order), or None when ``host`` is not an IP address."""
    try:
        packed = ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        return None
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return ("tcp" if len(packed) == 4 else "tcp6"), "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int], *, proc_net: Path = PROC_NET) -> int | None:
    """The uid owning the socket of a connection from ``client`` to ``server`` on this machine; None when it
    is not listed (another machine, a proxy's rewritten address, no ``/proc``)."""
    near, far = _hex_endpoint(*client), _hex_endpoint(*server)
    if near is None or far is None or near[0] != far[0]:
        return None
    try:
        lines = (proc_net / near[0]).read_text(encoding="ascii").splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > UID_COLUMN and fields[1] == near[1] and fields[2] == far[1] and fields[UID_COLUMN].isdigit():
            return int(fields[UID_COLUMN])
    return None


def login_client(scope: Scope) -> str:
    """What the login limit counts failures per: ``uid:N`` for a connection from a user of this machine,
    else the client's address (``""`` when unknown)."""
    client, server = scope.get("client"), scope.get("server")
    if not client:
        return ""
    uid = peer_uid((client[0], client[1]), (server[0], server[1])) if server and server[1] is not None else None
    return f"uid:{uid}" if uid is not None else str(client[0])
