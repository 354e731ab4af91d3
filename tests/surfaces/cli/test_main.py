"""The ``maka`` entry point loads only the command it runs (a surface command must stay a quick process:
``make scale`` answers forms with hundreds of them), and every command for ``--help``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from surfaces.cli.main import COMMANDS, _requested, _state_dir_first, main

_PROBE = """
import sys
from pathlib import Path
from surfaces.cli.main import _requested, build_parser
build_parser(_requested(sys.argv[1:]))
print(",".join(sorted(m for m in sys.modules if m == "stack" or m.startswith(("stack.", "services.broker")))))
"""


def _loaded(*argv: str) -> str:
    result = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_a_surface_command_does_not_import_the_stack_or_the_broker() -> None:
    assert _loaded("answer", "ix_1", "decline") == "stack,stack.access,stack.errors,stack.state_dir"  # endpoints.json
    assert "stack.topology" in _loaded("up", "--config", "x.json")  # the command that needs it does


def test_version_imports_no_command_module() -> None:
    probe = (
        "import sys\nfrom surfaces.cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
    )
    probe += "print(sorted(m for m in sys.modules if m.startswith('surfaces.cli.commands.')))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert result.stdout.startswith("maka ")
    assert result.stdout.splitlines()[-1] == "[]"
    assert "stack.topology" in _loaded("up", "--config", "x.json")  # the probe does see what a command imports


def test_help_and_unknown_words_load_every_command() -> None:
    assert _requested(["--version"]) == ()
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


def test_help_ends_with_examples_and_the_state_dir_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["up", "--help"])
    up = capsys.readouterr().out

    assert "examples:\n  maka up --config examples/mcp.json" in top
    assert "maka call examples:deploy --args" in top
    assert "--state-dir DIR (or set MAKA_STATE_DIR)" in top
    assert "examples:\n  maka up --config examples/mcp.json\n" in up
    assert "make run PORTS=ephemeral" in up


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["--state-dir", "/s", "status", "--json"], ["status", "--state-dir", "/s", "--json"]),
        (["--state-dir=/s", "pending"], ["pending", "--state-dir=/s"]),
        (["status", "--state-dir", "/s"], ["status", "--state-dir", "/s"]),
        (["--state-dir", "/s"], ["--state-dir", "/s"]),
        (["--state-dir", "/s", "--help"], ["--state-dir", "/s", "--help"]),
    ],
)
def test_state_dir_given_before_the_command_is_the_commands_option(words: list[str], expected: list[str]) -> None:
    assert _state_dir_first(words) == expected


def test_state_dir_before_the_command_reaches_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(tmp_path), "status"]) == 3
    assert f"{tmp_path}/endpoints.json" in capsys.readouterr().err
