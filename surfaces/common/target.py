"""Finding the Interaction service from a surface command: ``--interaction HOST:PORT`` or ``endpoints.json``.

Used by ``maka pending``, ``maka answer``, ``maka tui`` and ``maka web`` (docs/design.md#running-it: every command
finds the stack through ``--state-dir`` / ``MAKA_STATE_DIR``). ``--host-id`` names the Host whose forms a command
addresses when the Interaction tier serves several (docs/design.md#many-hosts).

``--state-dir`` and ``--broker`` find the rest of the stack for every ``maka`` command (``endpoints.json``,
:mod:`stack.state_dir`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from stack.access import read_owner_token
from stack.state_dir import DEFAULT_STATE_DIR, Endpoints, read_endpoints

TOKEN_VARIABLES = ("MAKA_CALLER_TOKEN", "MAKA_SURFACE_TOKEN")
"""The variables every ``maka`` command reads its bearer tokens from."""


def address(text: str) -> str:
    """An argparse ``type`` for ``--broker`` / ``--interaction``: ``text`` unchanged, unless it ends in a port
    outside 1-65535 (gRPC would dial ``127.0.0.1:99999`` as port 34463, another service's maybe). A gRPC target
    URI (``dns:///maka:50052``) passes the same check on its last ``:PORT``."""
    _host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be 1-65535")
    return text


def add_state_dir_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--state-dir`` (default: ``$MAKA_STATE_DIR`` or ``./.state``)."""
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("MAKA_STATE_DIR", str(DEFAULT_STATE_DIR))),
        help="folder of the running stack's endpoints.json (default: $MAKA_STATE_DIR or ./.state)",
    )


BROKER_ENV = "MAKA_BROKER_TARGET"


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--broker HOST:PORT`` (default: ``$MAKA_BROKER_TARGET``, else the stack's ``endpoints.json``)."""
    parser.add_argument(
        "--broker",
        default=None,
        type=address,
        metavar="HOST:PORT",
        help="broker address, e.g. through a proxy or in a cluster (default: $MAKA_BROKER_TARGET, else endpoints.json)",
    )


def broker_endpoints(args: argparse.Namespace) -> tuple[Endpoints, str]:
    """The stack's endpoints (only a broker address when none runs locally) and the broker to dial:
    ``--broker``, else ``$MAKA_BROKER_TARGET``, else ``endpoints.json``. Raises ``FileNotFoundError``
    (with a hint) when none of them names a broker."""
    explicit: str | None = args.broker or os.environ.get(BROKER_ENV) or None
    try:
        endpoints = read_endpoints(args.state_dir)
    except FileNotFoundError:
        if explicit is None:
            raise
        endpoints = Endpoints(interaction="", broker=explicit)
    return endpoints, explicit or endpoints.broker


def owner_token_env(args: argparse.Namespace) -> dict[str, str]:
    """The token variables a ``maka`` command should see for the stack of its state dir (:mod:`stack.access`):
    the owner's token of the tokens file ``endpoints.json`` names, for each of :data:`TOKEN_VARIABLES` that is
    unset. Empty when the command names its services itself (``--broker``, ``--interaction``, their variables:
    the local token is never sent elsewhere), when no stack runs there or it needs no token."""
    explicit = getattr(args, "broker", None) or getattr(args, "interaction", None)
    if explicit or os.environ.get(BROKER_ENV) or os.environ.get("MAKA_INTERACTION_TARGET"):
        return {}
    token = local_owner_token(args)
    return {name: token for name in TOKEN_VARIABLES if token and not os.environ.get(name)}


def local_owner_token(args: argparse.Namespace) -> str | None:
    """The owner's token of the stack in ``args.state_dir`` (the tokens file its ``endpoints.json`` names), or
    None when no stack runs there or it has none."""
    state_dir: Path | None = getattr(args, "state_dir", None)
    if state_dir is None:
        return None
    try:
        tokens = read_endpoints(state_dir).tokens
    except (FileNotFoundError, ValueError, TypeError, OSError):
        return None
    return read_owner_token(Path(tokens)) if tokens else None


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--state-dir`` and ``--interaction HOST:PORT`` (the latter wins when given)."""
    add_state_dir_argument(parser)
    parser.add_argument(
        "--interaction",
        metavar="HOST:PORT",
        default=None,
        type=address,
        help="address of the Interaction service (default: read from the state dir's endpoints.json)",
    )
    parser.add_argument(
        "--host-id",
        metavar="ID",
        default=None,
        help="the Host whose forms to address on a tier serving several (default: $MAKA_HOST_ID, else the "
        "stack's Host from endpoints.json, else the tier's only Host or the only one the token names)",
    )
    parser.add_argument(
        "--hosts",
        metavar="IDS",
        default=None,
        help="follow a pool of Hosts instead of one: comma-separated Host ids, or '*' for every Host the token "
        "may use (default: $MAKA_HOST_IDS; each form then shows its Host and is answered there)",
    )


def interaction_target(args: argparse.Namespace) -> str:
    """The Interaction service address from ``args``. Raises ``FileNotFoundError`` (with a hint) when neither
    ``--interaction`` is given nor ``endpoints.json`` exists, ``ValueError`` when the file has no address."""
    explicit: str | None = args.interaction
    if explicit:
        return explicit
    endpoints = read_endpoints(args.state_dir)
    if not endpoints.interaction:
        raise ValueError(f"{args.state_dir}/endpoints.json names no Interaction service")
    return endpoints.interaction


ALL_HOSTS = "*"
"""A pool of every Host the surface token may use (``maka_client.ALL_HOSTS``)."""


def parse_pool(text: str) -> tuple[str, ...] | None:
    """A surface's pool setting (``MAKA_HOST_IDS``, ``--hosts``): comma-separated Host ids, or ``*`` for every
    Host the token may use; ``None`` for empty text (the surface follows one Host, as ``host_id`` says)."""
    listed = tuple(dict.fromkeys(h.strip() for h in text.split(",") if h.strip()))
    if not listed:
        return None
    return (ALL_HOSTS,) if ALL_HOSTS in listed else listed


def pool(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The pool of Hosts to follow: ``--hosts``, else ``$MAKA_HOST_IDS`` (``*`` = every Host the token may use),
    parsed by :func:`parse_pool`; None (the default) follows one Host
    (:func:`host_id`). An explicit ``--host-id`` wins over ``$MAKA_HOST_IDS``."""
    explicit: str | None = getattr(args, "hosts", None)
    if explicit is not None:
        return parse_pool(explicit)
    if getattr(args, "host_id", None):
        return None
    return parse_pool(os.environ.get("MAKA_HOST_IDS", ""))


def host_id(args: argparse.Namespace) -> str:
    """The Host id to send: ``--host-id``, ``$MAKA_HOST_ID``, the state dir's Host (when no ``--interaction``
    was given and ``endpoints.json`` is readable), or empty (the tier's only Host / the token's only Host)."""
    explicit: str | None = getattr(args, "host_id", None)
    if explicit:
        return explicit
    if os.environ.get("MAKA_HOST_ID"):
        return os.environ["MAKA_HOST_ID"]
    if not args.interaction:
        with contextlib.suppress(FileNotFoundError, ValueError, TypeError, OSError):
            return read_endpoints(args.state_dir).host_id
    return ""
