"""The ``maka`` command: one subcommand per module in :mod:`surfaces.cli.commands`.

Each command module defines ``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int`` (the exit code). Exit codes are stable: 0 success, 1 the Tool reported an
error, 2 usage error, 3 the call failed, was lost or stopped (``maka call``); other commands use 0/2/3
(3 = the operation failed, with a stable error code on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

COMMANDS: tuple[str, ...] = (
    "up",
    "call",
    "stop",
    "pending",
    "answer",
    "tui",
    "web",
    "conformance_client",
)
"""Modules under ``surfaces.cli.commands``, in ``--help`` order. A missing module is left out."""


def _load() -> list[ModuleType]:
    modules: list[ModuleType] = []
    for name in COMMANDS:
        try:
            modules.append(importlib.import_module(f"surfaces.cli.commands.{name}"))
        except ModuleNotFoundError as error:
            if error.name != f"surfaces.cli.commands.{name}":
                raise
    return modules


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The top-level parser and the command modules by subcommand name."""
    parser = argparse.ArgumentParser(
        prog="maka", description="Maka Runtime: MCP input_required forms through a durable Host."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    by_name: dict[str, ModuleType] = {}
    for module in _load():
        name: str = module.NAME
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        by_name[name] = module
    return parser, by_name


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``maka`` console script. Returns the process exit code."""
    parser, by_name = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = by_name[args.command].run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
