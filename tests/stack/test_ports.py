"""Port specs: ``maka up --ports`` and ``--metrics``."""

from __future__ import annotations

import pytest

from stack.ports import Ports, parse_metrics_ports


def test_ports_parse_accepts_ephemeral_defaults_and_named_ports() -> None:
    assert Ports.parse("ephemeral") == Ports(0, 0, 0, 0, 0)
    assert Ports.parse("default") == Ports(50051, 50052, 50053, 8765)
    assert Ports.parse("web=9000,broker=0") == Ports(50051, 0, 50053, 9000)


@pytest.mark.parametrize("bad", ["web", "gui=80", "web=http", "web=70000"])
def test_ports_parse_rejects_bad_specs_with_a_clear_message(bad: str) -> None:
    with pytest.raises(ValueError, match="bad port"):
        Ports.parse(bad)


def test_metrics_specs_parse_to_a_port_per_service() -> None:
    assert parse_metrics_ports("ephemeral") == {"interaction": 0, "broker": 0, "provider": 0}
    assert parse_metrics_ports("broker=9101") == {"interaction": 0, "broker": 9101, "provider": 0}
    with pytest.raises(ValueError, match="bad metrics port spec 'web=1'"):
        parse_metrics_ports("web=1")
    with pytest.raises(ValueError, match="bad metrics port number"):
        parse_metrics_ports("broker=x")
