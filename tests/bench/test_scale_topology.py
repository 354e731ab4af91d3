"""``make scale --small`` as part of ``make test``: the Kubernetes topology as real processes (3 Hosts of
broker + provider, 2 Interaction replicas, Redis with AUTH, 2 web replicas behind TLS nginx) driven from
the web page, the CLI and the Node.js surface, with every fault of the full run, then the rollout phase
scaled down (a rolling update of every Host, a node drain and a scale-in of a pool while forms wait and
new calls arrive; answers 1-6 s after their form opened). The report is the assertion: nothing
misdelivered, nothing lost but the killed Host's own calls (lost, forms closed, never run again), and the
rollout loses no form and refuses no new call.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.system import ROOT

RUN_TIMEOUT = 480.0
"""Bound of the whole small run (about 2 min on a shared 2-core machine: 20 s to start, 35 s of fault phases,
50 s of rollout; more under load)."""

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


def test_the_small_rollout_loses_no_pending_form_and_refuses_no_new_call(report: dict[str, object]) -> None:
    rollout = report["rollout"]
    assert isinstance(rollout, dict)
    assert (rollout["hosts_rolled"], rollout["node_drain_hosts"], rollout["scaled_in_hosts"]) == (3, 2, 1)
    assert rollout["forms_pending_at_start"] >= 6
    assert rollout["answered_after_sigterm"] > 0  # people answered while their Host drained
    assert rollout["max_answer_delay_after_sigterm_s"] > 0
    assert rollout["new_calls_during_rollout"] > 0
    assert rollout["forms_lost"] == 0, rollout["lost_outcomes"]
    assert rollout["new_calls_refused"] == 0
    assert len(rollout["calls_by_host"]) == 3, "the pool client spread the calls over every Host"
    assert rollout["misdelivered"] == 0
    assert rollout["completed"] == rollout["calls"]
    assert rollout["outcome"] == "ok"
    operations = [(op["operation"], op["host"]) for op in rollout["operations"]]
    assert operations[:3] == [("rolling_update", f"host-{i}") for i in (2, 1, 0)]
    assert sorted(operations[3:5]) == [("node_drain", "host-0"), ("node_drain", "host-1")]
    assert operations[5:] == [("scale_in", "host-2")]
    assert all(op["forms_pending_at_sigterm"] > 0 for op in rollout["operations"])
    assert "| scale_in | host-2 |" in str(report["markdown"])


def test_the_small_runs_sigkill_is_reported_apart_with_its_forms_closed_and_never_replayed(
    report: dict[str, object],
) -> None:
    rollout = report["rollout"]
    assert isinstance(rollout, dict)
    sigkill = rollout["sigkill"]
    assert sigkill["fault"] == "kill_broker"
    assert sigkill["outcomes"] == ["lost"]
    assert sigkill["form_close_reasons"] == ["host_restarted"]
    assert sigkill["pending_after_restart"] == 0
    assert sigkill["replayed"] is False
