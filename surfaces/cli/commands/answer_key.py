"""``maka answer-key``: the key ring that seals answer values at rest (docs/security.md "Answer values at rest").

``maka answer-key rotate [--staged] [--id ID] [--state-dir DIR | --key-file FILE]``
``maka answer-key promote [--state-dir DIR | --key-file FILE]``
``maka answer-key list [--state-dir DIR | --key-file FILE]``

The key file is ``DIR/answer.key`` (what ``maka up`` writes and passes as ``MAKA_ANSWER_KEY_FILE``), or
``--key-file`` (e.g. a copy of the Kubernetes Secret ``maka-answer-key``). ``rotate`` adds a fresh key that
seals new records from the next start of the Interaction service on; every older key keeps opening the
records it sealed, so nothing in retention is lost. A single-key file becomes a ring (its key gets id ``k0``).
``rotate --staged`` adds a key that only opens (put it on every replica first), ``promote`` then makes it
the one that seals. ``list`` prints each key id and its role, never key material.

Exit codes: 0 done (the new or promoted id on stdout); 2 usage or a key file that cannot be read or
written, one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from services.core.key_file import KeyFileError, promote_staged_key, read_key_ring, rotate_key_ring
from surfaces.common.target import add_state_dir_argument

NAME = "answer-key"
HELP = "rotate the key ring that seals answers at rest (rotate, promote, list)"
KEY_FILE_NAME = "answer.key"
"""The answer key ``maka up`` keeps in its state dir."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the action, ``--staged``, ``--id``, ``--key-file`` and ``--state-dir``."""
    parser.add_argument("action", choices=("rotate", "promote", "list"), help="what to do with the ring")
    parser.add_argument("--staged", action="store_true", help="rotate: the new key opens only until promote")
    parser.add_argument("--id", default="", metavar="ID", help="rotate: the new key's id (default k<N+1>)")
    parser.add_argument(
        "--key-file", type=Path, default=None, metavar="FILE", help="the key file (default STATE/answer.key)"
    )
    add_state_dir_argument(parser)


def key_file(args: argparse.Namespace) -> Path:
    """The key file ``args`` name."""
    chosen: Path = args.key_file if args.key_file is not None else args.state_dir / KEY_FILE_NAME
    return chosen


def run(args: argparse.Namespace) -> int:
    """Entry point of ``maka answer-key``; see the module docstring for output and exit codes."""
    path = key_file(args)
    try:
        if args.action == "rotate":
            print(rotate_key_ring(path, staged=args.staged, key_id=args.id))
        elif args.action == "promote":
            print(promote_staged_key(path))
        else:
            ring = read_key_ring(path)
            for key_id in ring.keys:
                role = "seals" if key_id == ring.current else "staged" if key_id in ring.staged else "opens"
                print(f"{key_id or '(no id)'} {role}")
    except KeyFileError as error:
        print(f"answer-key: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"answer-key: cannot write {path}: {error.strerror}", file=sys.stderr)
        return 2
    return 0
