"""Finding the Interaction service from a surface command: ``--interaction HOST:PORT`` or ``endpoints.json``,
and the Host to read there: ``--host H`` (an Interaction tier may serve several Hosts, docs/design.md "Many Hosts").

Used by ``maka pending``, ``maka answer`` and ``maka tui`` (DESIGN.md §7: every command finds the stack
through ``--state-dir`` / ``MAKA_STATE_DIR``).
"""

from __future__ import annotations

import argparse

from surfaces.cli.endpoints import add_state_dir_argument, read_endpoints


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--state-dir``, ``--interaction HOST:PORT`` (wins over the state dir when given) and ``--host H``."""
    add_state_dir_argument(parser)
    parser.add_argument(
        "--interaction",
        metavar="HOST:PORT",
        default=None,
        help="address of the Interaction service (default: read from the state dir's endpoints.json)",
    )
    parser.add_argument(
        "--host",
        metavar="H",
        default="",
        dest="host_id",
        help="the Runtime Host whose forms to read (default: the tier's only Host, or the one your token names)",
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
