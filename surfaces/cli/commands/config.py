"""``maka config check FILE``: read an ``mcpServers`` file the way the MCP provider will.

Prints one line per problem (``mcpServers.<name>.<key>: <what is wrong>``) and per warning (a key
that is ignored, e.g. ``autoApprove`` from another MCP host), then one line per server
(``name: stdio|http|sse, era E[, disabled]``). ``${VAR}`` / ``${VAR:-default}`` are expanded from this
shell's environment (the provider expands them from its own). Values never appear in the output.

Exit codes: 0 valid (warnings allowed); 2 invalid (the problems, then the warnings, were printed on stderr)
or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from services.mcp_provider.config import Config, ConfigError, check_config

NAME = "config"
HELP = "check an mcpServers file (`maka config check FILE`): one line per problem"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``check FILE`` action."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate FILE and list its servers, warnings and problems")
    check.add_argument("file", type=Path, metavar="FILE")


def describe(config: Config) -> list[str]:
    """One line per warning (``warning: ...``), then one per server."""
    lines = [f"warning: {warning}" for warning in config.warnings]
    for server in config.servers:
        extra = ", disabled" if server.disabled else ""
        timeout = f", timeout {server.timeout_seconds:g} s" if server.timeout_seconds is not None else ""
        lines.append(f"{server.name}: {server.transport_name}, era {server.era.value}{timeout}{extra}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Check the file; see the module docstring."""
    try:
        config = check_config(args.file)
    except ConfigError as error:
        for problem in error.problems:
            print(f"CONFIG_INVALID: {args.file}: {problem}", file=sys.stderr)
        for warning in error.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return 2
    for line in describe(config):
        print(line)
    print(f"{args.file}: {len(config.servers)} server{'s' if len(config.servers) != 1 else ''}, valid")
    return 0
