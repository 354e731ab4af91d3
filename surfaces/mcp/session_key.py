"""The part of a front-door client's Maka session that names its principal (:func:`surfaces.mcp.server.client_session`).

A person's name (and any name that is not a plain short id) is replaced by an HMAC under a key drawn at random when
the process starts, so nobody can compute another person's session id from their email; within the door's lifetime
one principal's calls still share one session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

_KEY = secrets.token_bytes(32)
"""Per process: the session ids of one door's lifetime, never derivable from a name."""


def opaque_name(name: str) -> str:
    """``p`` + 16 hex digits of HMAC-SHA256(process key, ``name``): stable for this process, unguessable outside it."""
    return "p" + hmac.new(_KEY, name.encode(), hashlib.sha256).hexdigest()[:16]
