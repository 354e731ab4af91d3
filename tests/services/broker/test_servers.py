"""``ServerTable``: the providers' latest ``ReportServers`` snapshots, bounded before they are kept."""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from maka.broker.v1 import broker_pb2
from services.broker.servers import MAX_CONFIG_LINE_CHARS, MAX_CONFIG_LINES, ServerTable, refused, unavailable_message
from services.core import messages


def test_a_report_keeps_its_reload_time_and_at_most_twenty_one_config_lines_of_three_hundred_characters() -> None:
    table = ServerTable()
    report = table.open()
    when = timestamp_pb2.Timestamp(seconds=1_700_000_000)
    table.update(
        report,
        broker_pb2.ReportServersRequest(
            reporter_id="p",
            config_generation=3,
            config_errors=[f"mcpServers.s{i}.command: " + "x" * 400 for i in range(30)],
            config_reload_time=when,
        ),
    )
    (reporter,) = table.reporters()
    assert reporter.config_generation == 3
    assert reporter.config_reload_time == when
    assert len(reporter.config_errors) == MAX_CONFIG_LINES
    assert reporter.config_errors[0].startswith("mcpServers.s0.command: x")
    assert {len(line) for line in reporter.config_errors} == {MAX_CONFIG_LINE_CHARS}


def test_a_report_without_a_reload_has_no_reload_time() -> None:
    table = ServerTable()
    table.update(table.open(), broker_pb2.ReportServersRequest(reporter_id="p", config_generation=1))
    (reporter,) = table.reporters()
    assert not reporter.HasField("config_reload_time")


def test_only_a_failed_server_whose_cause_starts_refused_by_the_broker_counts_as_refused() -> None:
    cause = messages.claim_refused("server fx is already registered by provider other")
    failed = broker_pb2.ServerStatus(
        name="fx", state=broker_pb2.SERVER_STATE_FAILED, last_error=broker_pb2.ServerError(summary=cause)
    )
    ready = broker_pb2.ServerStatus(
        name="fx", state=broker_pb2.SERVER_STATE_READY, last_error=broker_pb2.ServerError(summary=cause)
    )
    other = broker_pb2.ServerStatus(
        name="fx", state=broker_pb2.SERVER_STATE_FAILED, last_error=broker_pb2.ServerError(summary="exited (code 1)")
    )

    assert cause == "refused by the broker: server fx is already registered by provider other"
    assert refused(failed)
    assert not refused(ready)
    assert not refused(other)
    assert not refused(broker_pb2.ServerStatus(name="fx", state=broker_pb2.SERVER_STATE_FAILED))
    assert unavailable_message(failed).startswith(f"MCP server fx failed to connect: {cause}")
