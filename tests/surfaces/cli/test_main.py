"""The ``maka`` entry point loads only the command it runs (a surface command must stay a quick process:
``make scale`` answers forms with hundreds of them), and every command for ``--help``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from surfaces.cli.main import COMMANDS, _requested, main

_PROBE = """
import sys
from surfaces.cli.main import _requested, build_parser
build_parser(_requested(sys.argv[1:]))
print(",".join(sorted(m for m in sys.modules if m == "stack" or m.startswith(("stack.", "services.broker")))))
"""


def _loaded(*argv: str) -> str:
    result = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_a_surface_command_does_not_import_the_stack_or_the_broker() -> None:
    assert _loaded("answer", "ix_1", "decline") == "stack,stack.errors,stack.state_dir"  # endpoints.json only
    assert "stack.topology" in _loaded("up", "--config", "x.json")  # the command that needs it does


def test_help_version_and_unknown_words_load_every_command() -> None:
    assert _requested([]) == COMMANDS
    assert _requested(["--help"]) == COMMANDS
    assert _requested(["answr"]) == COMMANDS
    assert _requested(["auth", "status"]) == ("auth",)
    assert _requested(["conformance-client", "http://x"]) == COMMANDS  # test code now, not a command


def test_an_unknown_command_is_still_a_usage_error_listing_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["answr"])

    assert exit_.value.code == 2
    assert "choose from 'up'" in capsys.readouterr().err
