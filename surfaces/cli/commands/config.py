"""``maka config check FILE``: read a config file the way the MCP provider will.

The file may be Maka's ``mcpServers`` file or another MCP host's (VS Code, Cursor, Windsurf, Cline, Claude,
Gemini CLI: docs/configuration.md#files-from-other-mcp-hosts). Prints one line per problem
(``mcpServers.<name>.<key>: <what is wrong>``) and per warning (a key that is ignored, e.g. ``autoApprove``
from another MCP host; a stdio ``command`` not found on ``PATH``), the format when it is not the default
``mcpServers`` one, then one line per server (``name: stdio|http|sse, era E[, disabled]``) followed by one
indented line per variable reference and how it expanded (``env.API_KEY: ${env:API_KEY} → set``).
Variables are expanded from this shell's environment (the provider expands them from its own). The values
of environment variables never appear in the output.

Exit codes: 0 valid (warnings allowed); 2 invalid (the problems, then the warnings, were printed on stderr)
or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from services.mcp_provider.config import Config, ConfigError, HostFormat, check_config, missing_commands

NAME = "config"
HELP = "check an MCP servers file (`maka config check FILE`): one line per problem"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``check FILE`` action."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate FILE and list its servers, variables, warnings and problems")
    check.add_argument("file", type=Path, metavar="FILE")


def describe(config: Config) -> list[str]:
    """One line per warning (``warning: ...``), the format unless it is the default, then one per server
    followed by its variables (indented)."""
    lines = [f"warning: {warning}" for warning in [*config.warnings, *missing_commands(config)]]
    if config.format is not HostFormat.MCP_SERVERS:
        lines.append(f"format: {config.format.label}")
    for server in config.servers:
        extra = ", disabled" if server.disabled else ""
        timeout = f", timeout {server.timeout_seconds:g} s" if server.timeout_seconds is not None else ""
        lines.append(f"{server.name}: {server.transport_name}, era {server.era.value}{timeout}{extra}")
        prefix = f"{config.servers_key}.{server.name}."
        for variable in config.variables:
            if variable.path.startswith(prefix):
                lines.append(f"  {variable.path.removeprefix(prefix)}: {variable.reference} → {variable.outcome}")
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
