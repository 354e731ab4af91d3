"""Who may reach a local stack (docs/security.md "Other local users"): :class:`Access` and the owner's tokens file.

``maka up`` runs a stack reachable only by the person who started it:

- the state dir is made ``0700`` (only its owner may enter it: ``endpoints.json``, the tokens file, the sockets);
- :attr:`Access.UNIX` (the default): the gRPC services listen on unix sockets in ``<state dir>/sock/`` (a
  ``0700`` folder), so only the owner can connect; ``endpoints.json`` names them as ``unix:///abs/...sock``
  targets, which every gRPC client dials as is;
- :attr:`Access.TOKENS` (``maka up --ports ...``: loopback TCP ports, which any local user can connect to): every
  gRPC service requires the owner's bearer token;
- in both, the web page and the MCP front door (TCP, for browsers and MCP clients) require the owner's token: the
  page through the URL ``maka up`` prints (``/?token=...``, exchanged for a cookie signed with the kept
  ``<state dir>/web-session.key``, so the browser's sign-in outlives this run's token), the front door as
  ``Authorization: Bearer``.

The token is generated per stack and written to ``<state dir>/tokens.json`` (mode ``0600``) in the shape of
``MAKA_AUTH_TOKENS_FILE`` (:mod:`services.core.auth`): one ``admin`` entry named ``owner``, with
``"acts_for": true`` (the MCP front door answers forms for the caller it admitted with it; ``admin`` alone does
not let a token act for anyone). ``endpoints.json``
names that file (``"tokens"``); the ``maka`` commands and the client libraries read it when no token variable is
set. A tokens file of the person's own (``MAKA_AUTH_TOKENS_FILE`` in ``maka up``'s environment, with their token
variables) replaces the generated one: then ``maka up`` writes none and passes theirs on. :attr:`Access.OPEN` is
the stack as tests and benchmarks run it in-process: loopback TCP, no tokens.
"""

from __future__ import annotations

import json
import os
import secrets
from enum import StrEnum
from pathlib import Path

TOKENS_FILE = "tokens.json"
OWNER = "owner"
"""The name of the owner's entry in the tokens file (``maka status`` lists surfaces by token name)."""


class Access(StrEnum):
    """How a stack's services may be reached."""

    OPEN = "open"
    """Loopback TCP, no tokens: any local user can connect (in-process tests, benchmarks)."""
    UNIX = "unix"
    """gRPC on unix sockets in the owner-only state dir; web page and MCP front door need the owner's token."""
    TOKENS = "tokens"
    """Loopback TCP, every service needs the owner's token (``maka up --ports``)."""


GRPC_SERVICES = frozenset({"interaction", "broker", "provider"})


def access_for_ports(spec: str | None) -> Access:
    """``maka up``'s access for its ``--ports`` spec: ``TOKENS`` when it puts the gRPC services on TCP ports
    (``default``, ``ephemeral``, or a spec naming ``interaction``, ``broker`` or ``provider``), else ``UNIX``
    (no spec, or one naming only ``web`` / ``mcp``, which are TCP in any case)."""
    if spec is None:
        return Access.UNIX
    if spec.strip() in ("default", "ephemeral", "0", ""):
        return Access.TOKENS
    named = {part.partition("=")[0].strip() for part in spec.split(",")}
    return Access.TOKENS if named & GRPC_SERVICES else Access.UNIX


def make_private(state_dir: Path) -> None:
    """Create ``state_dir`` if needed and make it ``0700``: nobody but its owner may list or enter it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)


def write_owner_token(state_dir: Path) -> tuple[Path, str]:
    """A fresh random owner token in ``<state_dir>/tokens.json`` (mode ``0600``, replaced atomically); returns
    the file and the token."""
    token = secrets.token_urlsafe(32)
    path = state_dir / TOKENS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"tokens": [{"name": OWNER, "token": token, "roles": ["admin"], "acts_for": True}]}, handle)
    tmp.replace(path)
    return path, token


def read_owner_token(path: Path) -> str | None:
    """The owner's token in the tokens file ``path``, or None when it is absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entries = data.get("tokens") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == OWNER and isinstance(entry.get("token"), str):
            token: str = entry["token"]
            return token
    return None
