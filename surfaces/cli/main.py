"""The ``maka`` command: one subcommand per module in :mod:`surfaces.cli.commands`.

Each command module defines ``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int`` (the exit code), and may define ``EXAMPLES`` (indented lines for its ``--help``).
Exit codes are stable: 0 success, 1 the Tool reported an
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

from surfaces.common.target import owner_token_env

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
    "history",
    "tui",
    "web",
    "auth",
    "login",
    "logout",
    "answer_key",
)
"""Modules under ``surfaces.cli.commands``, in ``--help`` order. A missing module is left out."""

PERSON_COMMANDS = frozenset(
    {"status", "reload", "tools", "call", "stop", "pending", "answer", "history", "tui", "auth"}
)
"""Commands that act as the person signed in with ``maka login`` when no token variable is set. Not ``web``: the page's
surface token is its own identity and its login secret (people sign in to it themselves), never a person's token."""


EXAMPLES = """\
examples:
  maka up --config examples/mcp.json            start the stack (what `make run` does)
  maka up --config mcp.json --ports ephemeral   ... when the default ports are taken
  maka tools                                    the Tools of the running stack
  maka call examples:deploy --args '{"artifact":"build-42"}'
  maka pending                                  forms waiting for an answer
  maka answer ID                                answer one field by field in the terminal
  maka answer ID accept --values '{"environment":"staging","confirm":true}'
  maka tui                                      every pending form in a terminal UI
  maka history                                  settled forms: outcome, who answered, when
  maka status                                   what runs, MCP servers, recent calls
  maka login                                    sign in as yourself (OpenID Connect) for every command

Other folders: pass --state-dir DIR (or set MAKA_STATE_DIR) to reach the stack `maka up` started there.
`maka COMMAND --help` shows each command's options; docs/cli.md has every command and its exit codes."""
"""The top-level ``--help`` epilog. A command module may define ``EXAMPLES`` (lines) for its own ``--help``."""


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


def _state_dir_first(words: list[str]) -> list[str]:
    """``maka --state-dir DIR COMMAND ...`` as ``maka COMMAND --state-dir DIR ...``: the option is the
    subcommand's, and a newcomer types it before the command too."""
    if words and words[0].startswith("--state-dir="):
        moved, rest = words[:1], words[1:]
    elif len(words) >= 2 and words[0] == "--state-dir":
        moved, rest = words[:2], words[2:]
    else:
        return words
    if not rest or rest[0].startswith("-"):
        return words  # no command follows: argparse says what is wrong
    return [rest[0], *moved, *rest[1:]]


def _requested(argv: Sequence[str]) -> tuple[str, ...]:
    """The one command module ``argv`` runs (its first word names it), else every module (``--help``,
    ``--version``, no or an unknown command): ``maka answer`` then does not import the whole stack, and
    ``maka --version`` imports none."""
    if argv and argv[0] == "--version":
        return ()
    if argv and not argv[0].startswith("-"):
        module = argv[0].replace("-", "_")
        if module in COMMANDS:
            return (module,)
    return COMMANDS


def build_parser(commands: Sequence[str] = COMMANDS) -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The top-level parser and the command modules by subcommand name (of ``commands``, default all)."""
    parser = argparse.ArgumentParser(
        prog="maka",
        description="Maka Runtime: MCP input_required forms through a durable Host.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"maka {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    by_name: dict[str, ModuleType] = {}
    for module in _load(commands):
        name: str = module.NAME
        examples: str | None = getattr(module, "EXAMPLES", None)
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=f"examples:\n{examples}" if examples else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        by_name[name] = module
    return parser, by_name


ISSUER_ENV = "MAKA_OIDC_ISSUER"
"""The issuer whose signed-in person (``maka login``) a command acts as: the one its services trust."""


def _token_env(args: argparse.Namespace) -> dict[str, str] | None:
    """The token variables the command should see (each that is unset): the ID token of the person signed in at
    ``MAKA_OIDC_ISSUER`` (``maka login``; renewed when it expired), else the local stack's owner token. None, after
    saying so on stderr, when the person's sign-in expired and could not be renewed."""
    if not os.environ.get(ISSUER_ENV, "").strip():
        return owner_token_env(args)
    # Imported only with an issuer set: Authlib and the JOSE stack would slow every other `maka` start.
    from surfaces.common import login

    try:
        return login.token_env(args)
    except login.SignInExpired as expired:
        print(f"UNAUTHENTICATED: {expired}", file=sys.stderr)
        return None
    except ValueError as error:  # a bad MAKA_OIDC_* setting
        print(f"USAGE: {error}", file=sys.stderr)
        return None


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
    words = _state_dir_first(list(sys.argv[1:] if argv is None else argv))
    parser, by_name = build_parser(_requested(words))
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    # the signed-in person's token (`maka login`) or the owner's token of the local stack (`maka up` writes it;
    # docs/security.md), for this command only
    if args.command in PERSON_COMMANDS:
        found = _token_env(args)
        if found is None:
            return 3
        injected = found
    else:
        injected = owner_token_env(args) if args.command != "up" else {}
    os.environ.update(injected)
    try:
        code: int = by_name[args.command].run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_closed_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        for name in injected:
            os.environ.pop(name, None)
    return code


if __name__ == "__main__":
    sys.exit(main())
