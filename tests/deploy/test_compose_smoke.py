"""``make compose-smoke`` as ``make test``'s ``containers`` bucket: the Dockerfile and docker-compose.yml built and run
under Podman (scripts/compose_smoke.py; deploy/README.md "The compose smoke"). It needs root (apt, rootful Podman)
and the published loopback ports of docker-compose.yml, so its bucket runs alone, last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.containers, pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_compose_file_runs_under_podman_and_every_check_of_the_smoke_passes() -> None:
    smoke = subprocess.Popen(
        [sys.executable, "-m", "scripts.compose_smoke", "--project", "makatest"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = smoke.communicate(timeout=1500)
    except subprocess.TimeoutExpired:
        smoke.terminate()  # SIGTERM: the smoke still brings its project down
        out, err = smoke.communicate(timeout=240)
    print(out)  # noqa: T201 — the smoke's one line per check, in the test's report
    lines = out.strip().splitlines()
    assert smoke.returncode == 0, out + err[-3000:]
    assert lines[-1].endswith(" passed, 0 failed"), lines[-1:]
    assert not [line for line in lines if line.startswith("FAIL")]
