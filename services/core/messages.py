"""User-facing text every service shows the same way: what a person reads must not depend on which
service refused the call.

:func:`sign_in_hint` is the ``AUTH_REQUIRED`` message of a call on an MCP server that waits for an OAuth
sign-in; :func:`person_sign_in_expired` the ``UNAUTHENTICATED`` message of a ``maka`` command whose person's
sign-in (``maka login``) expired; :func:`server_unavailable` the ``SERVER_UNAVAILABLE`` message of a server that
serves no calls (its state, the last failure's cause, the next retry). States are named by their ``ServerState`` value
(``connecting``, ``ready``, ``failed``, ``waiting_for_sign_in``, ``disabled``, ``draining``).
:func:`claim_refused` is the cause a provider reports for a server whose registration the broker refused
(another provider holds the name); :func:`is_claim_refused` recognises it by its stable prefix.
:func:`lost_call` is the ``LOST`` text of a call whose outcome is unknown (``maka call`` and the MCP front door);
:data:`BROKER_FORGOT_CALL` its reason when a reattaching call's broker no longer knows it.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "BROKER_FORGOT_CALL",
    "CLAIM_REFUSED_PREFIX",
    "SERVER_STATE_TEXT",
    "UNKNOWN_STATE_TEXT",
    "claim_refused",
    "is_claim_refused",
    "lost_call",
    "person_sign_in_expired",
    "server_unavailable",
    "sign_in_hint",
]

SERVER_STATE_TEXT: Mapping[str, str] = {
    "connecting": "is connecting",
    "ready": "is connected but has not registered its Tools yet",
    "failed": "failed to connect",
    "waiting_for_sign_in": "is waiting for sign-in",
    "disabled": "is disabled in the config",
    "draining": "was removed from the config (finishing its calls in flight)",
}
"""How ``MCP server <name> ...`` continues for each server state."""

UNKNOWN_STATE_TEXT = "is not connected"
"""The continuation for a state without its own text."""

_CAUSE_STATES = frozenset({"failed", "connecting"})
"""States whose message names the last failure's cause."""


def sign_in_hint(server: str, url: str) -> str:
    """The text a call on ``server`` fails with while it waits for a sign-in at ``url`` (``AUTH_REQUIRED``)."""
    return f"sign in to {server} first: open {url} (or run `maka auth login {server}`)"


def person_sign_in_expired(person: str, issuer: str) -> str:
    """What a ``maka`` command says when the person's stored sign-in at ``issuer`` expired and was not renewed."""
    return f"the sign-in of {person} at {issuer} has expired and could not be renewed: run `maka login`"


def server_unavailable(server: str, state: str, cause: str | None = None, retry_in: float | None = None) -> str:
    """``MCP server <name> <state>[: <cause>][; next retry in N s]`` (the ``SERVER_UNAVAILABLE`` text).

    ``cause`` (the last failure's bounded, secret-free summary) is shown while the server failed or is
    connecting; ``retry_in`` (seconds until the next attempt) only when it failed.
    """
    text = f"MCP server {server} {SERVER_STATE_TEXT.get(state, UNKNOWN_STATE_TEXT)}"
    if cause is not None and state in _CAUSE_STATES:
        text += f": {cause}"
    if retry_in is not None and state == "failed":
        text += f"; next retry in {max(0.0, retry_in):.0f} s"
    return text


CLAIM_REFUSED_PREFIX = "refused by the broker: "
"""The stable start of a refused registration's cause (``ServerError.summary``)."""


def claim_refused(reason: str) -> str:
    """``refused by the broker: <the broker's reason>`` (e.g. ``server X is already registered by provider Y``)."""
    return CLAIM_REFUSED_PREFIX + reason


def is_claim_refused(summary: str) -> bool:
    """True when ``summary`` is a :func:`claim_refused` cause."""
    return summary.startswith(CLAIM_REFUSED_PREFIX)


BROKER_FORGOT_CALL = "the broker no longer knows the call (it restarted, or the call ended before the reattach grace)"
"""Why a call is ``LOST`` when its stream broke and the broker it reattached to knows no such call (a restarted
broker knows none of its previous Host epoch's calls, docs/design.md#restart-and-reconnect)."""


def lost_call(reason: str) -> str:
    """``<reason>; the outcome is unknown and nothing was replayed`` (the ``LOST`` text)."""
    return f"{reason}; the outcome is unknown and nothing was replayed"
