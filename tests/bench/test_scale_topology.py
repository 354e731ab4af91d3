"""``make scale --small`` as part of ``make test``: the Kubernetes topology as real processes (3 Hosts of
broker + provider, 2 Interaction replicas, Redis with AUTH, 2 web replicas behind TLS nginx) driven from
the web page, the CLI and the Node.js surface, with every fault of the full run. The report is the
assertion: nothing misdelivered, nothing lost but the killed Host's own calls (lost, forms closed, never
run again).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.system import ROOT

RUN_TIMEOUT = 240.0
"""Bound of the whole small run (it takes about 40 s on an idle 2-core machine)."""

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.slow, pytest.mark.timeout(RUN_TIMEOUT + 30)]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("scale")
    result = subprocess.run(
        [sys.executable, "-m", "bench.scale_topology", "--small", "--quiet", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert (out / "scale.json").exists(), result.stderr[-4000:]
    data: dict[str, object] = json.loads((out / "scale.json").read_text())
    data["exit_code"] = result.returncode
    data["markdown"] = (out / "scale.md").read_text()
    return data


def test_the_small_scale_run_has_the_topology_of_the_kubernetes_overlay(report: dict[str, object]) -> None:
    assert (report["hosts"], report["interaction_replicas"], report["web_replicas"]) == (3, 2, 2)
    surfaces = report["surfaces"]
    assert isinstance(surfaces, dict)
    answers = surfaces["answers"]
    assert isinstance(answers, dict)
    assert set(answers) == {"web", "cli", "polyglot"}
    assert all(count > 0 for count in answers.values()), answers
    assert report["answer_failures"] == []


def test_the_small_scale_run_misdelivers_nothing_and_loses_only_the_killed_hosts_calls(
    report: dict[str, object],
) -> None:
    assert report["misdelivered"] == 0
    assert report["lost_apart_from_the_killed_host"] == 0
    assert report["completed"] == report["calls"] - report["lost"]  # type: ignore[operator]
    assert report["exit_code"] == 0, report["markdown"]


def test_every_fault_of_the_small_scale_run_has_the_outcome_the_topology_promises(report: dict[str, object]) -> None:
    faults = report["faults"]
    assert isinstance(faults, list)
    by_name = {f["name"]: f for f in faults}
    assert list(by_name) == ["steady", "kill_broker", "kill_interaction", "rolling_restart"]
    assert all(f["outcome"] == "ok" for f in faults), faults
    killed = by_name["kill_broker"]
    assert killed["detail"]["killed_host_outcomes"] == ["lost"]
    assert killed["lost"] == killed["detail"]["killed_host_calls"] > 0
    assert "answered" not in killed["detail"]["killed_host_form_close_reasons"]
    assert killed["detail"]["killed_host_forms_pending_after_restart"] == 0  # not run again
    for name in ("steady", "kill_interaction", "rolling_restart"):
        assert by_name[name]["completed"] == by_name[name]["calls"], by_name[name]
    assert "| kill_broker |" in str(report["markdown"])
