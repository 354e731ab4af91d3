"""scripts/setup.sh picks the newest supported CPython: MAKA_PYTHON, then python3.X on PATH and pyenv's installs."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = platform.python_version()
MINOR = ".".join(VERSION.split(".")[:2])


def _which_python(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / "setup.sh"), "--which-python"], env=env, capture_output=True, text=True, timeout=60
    )


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _link(path: Path, target: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def _env(tmp_path: Path, path_dir: Path) -> dict[str, str]:
    # The tools the script itself runs (ls, grep, sort, readlink) come from the system; no python3.X there.
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("bash", "dirname", "ls", "grep", "sort", "readlink", "id"):
        found = next((Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists()), None)
        if found is not None and not (tools / tool).exists():
            (tools / tool).symlink_to(found)
    return {"PATH": f"{path_dir}:{tools}", "HOME": str(tmp_path / "home"), "PYENV_ROOT": str(tmp_path / "pyenv")}


def test_maka_python_chooses_the_interpreter_and_setup_names_its_version(tmp_path: Path) -> None:
    env = {**_env(tmp_path, tmp_path / "bin"), "MAKA_PYTHON": sys.executable}
    done = _which_python(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"setup: Python {VERSION} ({sys.executable})\n"


def test_a_maka_python_that_does_not_run_stops_setup(tmp_path: Path) -> None:
    broken = _script(tmp_path / "bin" / "python", "exit 1")
    done = _which_python({**_env(tmp_path, tmp_path / "bin"), "MAKA_PYTHON": str(broken)})
    assert done.returncode == 1
    assert f"MAKA_PYTHON={broken} is not a CPython 3.11, 3.12 or 3.13" in done.stderr


def test_a_pyenv_install_is_found_when_the_path_has_only_an_inactive_shim_and_the_newest_patch_wins(
    tmp_path: Path,
) -> None:
    # A pyenv shim of a version that is not activated exits 127; the installs themselves run.
    _script(tmp_path / "bin" / f"python{MINOR}", "echo 'pyenv: command not found' >&2; exit 127")
    versions = tmp_path / "pyenv" / "versions"
    _link(versions / f"{MINOR}.2" / "bin" / f"python{MINOR}", sys.executable)
    newest = _link(versions / f"{MINOR}.10" / "bin" / f"python{MINOR}", sys.executable)
    _script(versions / f"{MINOR}.11" / "bin" / "python3-broken", "exit 1")  # no python3.X in it: skipped
    done = _which_python(_env(tmp_path, tmp_path / "bin"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"setup: Python {VERSION} ({newest})\n"


def test_a_newer_python_on_the_path_wins_over_an_older_python3(tmp_path: Path) -> None:
    _script(tmp_path / "bin" / "python3", "exit 1")  # python3 comes last, and this one does not run
    on_path = _link(tmp_path / "bin" / f"python{MINOR}", sys.executable)
    done = _which_python(_env(tmp_path, tmp_path / "bin"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"setup: Python {VERSION} ({on_path})\n"


def test_no_supported_python_stops_setup_saying_so(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    done = _which_python(_env(tmp_path, tmp_path / "bin"))
    assert done.returncode == 1
    assert "no CPython 3.11, 3.12 or 3.13 found" in done.stderr
