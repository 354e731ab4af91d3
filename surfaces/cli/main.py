"""The ``maka`` command: one subcommand per module in :mod:`surfaces.cli.commands`.

Each command module defines ``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int`` (the exit code). Exit codes are stable: 0 success, 1 the Tool reported an
error, 2 usage error, 3 the call failed, was lost or stopped (``maka call``); other commands use 0/2/3
(3 = the operation failed, with a stable error code on stderr). A command whose stdout is closed by
its reader (``maka pending | head -1``) exits quietly with 141 (128 + SIGPIPE, what a shell reports
for a program killed by the closed pipe), without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from types import ModuleType

COMMANDS: tuple[str, ...] = (
    "up",
    "status",
    "reload",
    "config",
    "tools",
    "call",
    "stop",
    "pending",
    "answer",
    "tui",
    "web",
    "auth",
)
"""Modules under ``surfaces.cli.commands``, in ``--help`` order. A missing module is left out."""


def _load(names: Sequence[str] = COMMANDS) -> list[ModuleType]:
    modules: list[ModuleType] = []
    for name in names:
        try:
            modules.append(importlib.import_module(f"surfaces.cli.commands.{name}"))
        except ModuleNotFoundError as error:
            if error.name != f"surfaces.cli.commands.{name}":
                raise
    return modules


def _version() -> str:
    try:
        return importlib.metadata.version("maka-runtime")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _requested(argv: Sequence[str]) -> tuple[str, ...]:
    """The one command module ``argv`` runs (its first word names it), else every module (``--help``,
    ``--version``, no or an unknown command): ``maka answer`` then does not import the whole stack."""
    if argv and not argv[0].startswith("-"):
        module = argv[0].replace("-", "_")
        if module in COMMANDS:
            return (module,)
    return COMMANDS


def build_parser(commands: Sequence[str] = COMMANDS) -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The top-level parser and the command modules by subcommand name (of ``commands``, default all)."""
    parser = argparse.ArgumentParser(
        prog="maka", description="Maka Runtime: MCP input_required forms through a durable Host."
    )
    parser.add_argument("--version", action="version", version=f"maka {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    by_name: dict[str, ModuleType] = {}
    for module in _load(commands):
        name: str = module.NAME
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        by_name[name] = module
    return parser, by_name


EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: the exit status a shell shows for a writer whose reader went away."""


def _quiet_closed_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``maka`` console script. Returns the process exit code
    (:data:`EXIT_BROKEN_PIPE` when stdout was closed by its reader)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser, by_name = build_parser(_requested(words))
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = by_name[args.command].run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_closed_stdout()
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
