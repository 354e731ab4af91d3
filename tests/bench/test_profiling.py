"""bench.profiling: child environment and report parsing."""

from __future__ import annotations

from pathlib import Path

from bench import profiling


def test_profile_env_puts_the_hook_first_on_pythonpath(tmp_path: Path) -> None:
    env = profiling.profile_env(tmp_path)
    assert env["PYTHONPATH"].split(":")[0] == str(profiling.HOOK_DIR)
    assert (profiling.HOOK_DIR / "sitecustomize.py").is_file()
    assert env[profiling.DIR_ENV] == str(tmp_path)


def test_cpu_seconds_reads_the_pyinstrument_header() -> None:
    header = "  Recorded: 09:32:11  Samples:  11172\n  Duration: 29.420    CPU time: 9.667\n"
    assert profiling.cpu_seconds(header) == 9.667
    assert profiling.cpu_seconds("no header") is None
