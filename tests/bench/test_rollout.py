"""bench.rollout: the pool target and the rollout report computed from what the calls and SIGTERMs
recorded (the phase itself runs in tests/bench/test_scale_topology.py)."""

from __future__ import annotations

from pathlib import Path

from bench import rollout
from bench.scale_driver import Driver
from bench.topology import Topology, TopologySpec
from maka_client._channel import is_pool_target


def _rollout(tmp_path: Path) -> rollout.Rollout:
    topology = Topology(TopologySpec(), tmp_path, lambda _name, _line: None)
    topology.ports = {f"host-{i}-broker": 50100 + i for i in range(3)}  # not started: the report only
    return rollout.Rollout(topology, Driver(topology), rollout.SMALL)


def _call(run: rollout.Rollout, host: str, *, answered_at: float, outcome: str = "completed") -> rollout.PoolCall:
    call = rollout.PoolCall(host=host, phase=rollout.PHASE, index=len(run.calls))
    call.interaction_id, call.answered_at, call.outcome = f"ix-{call.index}", answered_at, outcome
    call.environment = "staging"
    call.text = f"Deployed {call.artifact} to staging." if outcome == "completed" else ""
    call.started_at = 5.0
    run.calls.append(call)
    return call


def test_the_pool_target_names_every_host_so_the_client_balances_over_them() -> None:
    target = rollout.pool_target(["127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"])

    assert target == "ipv4:127.0.0.1:5001,127.0.0.1:5002,127.0.0.1:5003"
    assert is_pool_target(target)


def test_the_report_counts_the_answers_given_while_their_host_drained(tmp_path: Path) -> None:
    run = _rollout(tmp_path)
    early = _call(run, "host-2", answered_at=9.0)  # answered before its Host's SIGTERM at 10
    drained = _call(run, "host-2", answered_at=14.5)
    other = _call(run, "host-1", answered_at=30.0)  # its Host was not stopped while it waited
    run.sigterms = [
        rollout.Sigterm("host-2", "rolling_update", 10.0, [drained.artifact], exited_at=15.0, restarted_at=20.0),
        rollout.Sigterm("host-2", "scale_in", 40.0, [], exited_at=41.0),
    ]
    run.began, run.operations_ended, run.pending_at_start = 10.0, 41.0, 2

    entry = rollout.report(run, sigkill=None)

    assert (entry["hosts_rolled"], entry["scaled_in_hosts"]) == (1, 1)
    assert entry["forms_pending_at_sigterm"] == 1
    assert entry["answered_after_sigterm"] == 1
    assert entry["max_answer_delay_after_sigterm_s"] == 4.5
    assert (entry["forms_lost"], entry["new_calls_refused"], entry["misdelivered"]) == (0, 0, 0)
    assert entry["outcome"] == "ok"
    assert entry["operations"][1]["exit_to_serving_s"] is None  # type: ignore[index]
    assert early.outcome == other.outcome == "completed"


def test_the_report_fails_a_rollout_that_lost_refused_or_misdelivered_a_call(tmp_path: Path) -> None:
    run = _rollout(tmp_path)
    drained = _call(run, "host-0", answered_at=12.0)
    _call(run, "host-0", answered_at=0.0, outcome="lost")
    refused = _call(run, "pool", answered_at=0.0, outcome="")
    refused.refused = True
    wrong = _call(run, "host-1", answered_at=13.0)
    wrong.text = "Deployed someone-else to production."
    run.sigterms = [rollout.Sigterm("host-0", "node_drain", 10.0, [drained.artifact], exited_at=15.0)]
    run.began, run.operations_ended = 10.0, 15.0

    entry = rollout.report(run, sigkill=None)

    assert (entry["forms_lost"], entry["new_calls_refused"], entry["misdelivered"]) == (1, 1, 1)
    assert entry["lost_outcomes"] == ["lost"]
    assert entry["outcome"] == "FAILED"


def test_the_rollout_table_shows_every_operation_and_the_sigkill_apart(tmp_path: Path) -> None:
    run = _rollout(tmp_path)
    drained = _call(run, "host-2", answered_at=12.0)
    run.sigterms = [rollout.Sigterm("host-2", "scale_in", 10.0, [drained.artifact], exited_at=13.0)]
    run.began, run.operations_ended = 10.0, 13.0
    sigkill: dict[str, object] = {
        "host": "host-2",
        "calls": 2,
        "outcomes": ["lost"],
        "form_close_reasons": ["host_restarted"],
        "pending_after_restart": 0,
    }

    text = "\n".join(rollout.markdown(rollout.report(run, sigkill)))

    assert "| scale_in | host-2 | 1 | 3.0 | not restarted |" in text
    assert "forms closed host_restarted, 0 pending after its restart (never replayed)" in text
