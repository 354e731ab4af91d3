"""Unit tests of the keyed name in a front-door client's Maka session (`surfaces/mcp/session_key.py`)."""

from __future__ import annotations

import hashlib

from surfaces.mcp.session_key import opaque_name


def test_a_persons_session_name_is_stable_per_key_and_not_computable_from_their_email() -> None:
    email = "alice@example.com"
    assert opaque_name(email) == opaque_name(email)  # one principal's calls share one session in this process
    assert opaque_name(email, b"k" * 32) == opaque_name(email, b"k" * 32)  # replicas sharing MAKA_MCP_STATE_KEY agree
    assert opaque_name(email, b"k" * 32) != opaque_name(email, b"j" * 32)
    assert opaque_name(email) != opaque_name("carol@example.com")
    assert opaque_name(email) != "p" + hashlib.sha256(email.encode()).hexdigest()[:12]  # the old, derivable one
    assert email not in opaque_name(email)
