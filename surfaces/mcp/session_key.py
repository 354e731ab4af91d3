"""The part of a front-door client's Maka session that names its principal (:func:`surfaces.mcp.server.client_session`).

A person's name (and any name that is not a plain short id) is replaced by an HMAC under ``MAKA_MCP_STATE_KEY`` when
set (so the door's replicas, which accept each other's ``requestState``, agree on a client's session), else under a
key drawn at random when the process starts, so nobody can compute another person's session id from their email;
within the door's lifetime one principal's calls still share one session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

_KEY = secrets.token_bytes(32)
"""Per process: the session ids of one door's lifetime, never derivable from a name."""


def opaque_name(name: str, key: bytes | None = None) -> str:
    """``p`` + 16 hex digits of HMAC-SHA256(``key`` or the process key, ``name``): stable for this process (and for
    the replicas sharing ``key``), unguessable without the key."""
    mac = hmac.new(key or _KEY, b"maka-mcp-session-v1|" + name.encode(), hashlib.sha256)
    return "p" + mac.hexdigest()[:16]
