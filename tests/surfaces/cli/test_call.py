"""``maka call`` and ``maka stop``: arguments, output and exit codes against a scripted broker.

The broker here is a real grpc.aio server on 127.0.0.1:0 whose ``CallTool`` replays a scripted event
list: it stands in for the broker's behaviour so the command's own handling can be checked exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from stack.state_dir import Endpoints, write_endpoints
from surfaces.cli.commands import call, stop
from surfaces.cli.main import build_parser

Script = Callable[[broker_pb2.CallToolRequest], list[broker_pb2.CallToolResponse]]


def _result(payload: dict[str, object], *, is_error: bool = False) -> broker_pb2.CallToolResponse:
    return broker_pb2.CallToolResponse(
        result=broker_pb2.CallResult(call_tool_result_json=json.dumps(payload), is_error=is_error)
    )


def _accepted() -> broker_pb2.CallToolResponse:
    return broker_pb2.CallToolResponse(accepted=broker_pb2.CallAccepted(invocation_id="inv-1", provider_id="mcp:x"))


class ScriptedBroker(broker_pb2_grpc.CapabilityBrokerServiceServicer):
    """Replays ``script(request)`` on ``CallTool``; records requests; ``hang`` keeps the stream open."""

    def __init__(self) -> None:
        self.script: Script = lambda _request: []
        self.requests: list[broker_pb2.CallToolRequest] = []
        self.stops: list[broker_pb2.StopRequest] = []
        self.watches: list[broker_pb2.WatchCallRequest] = []
        self.hang = False
        self.streaming = asyncio.Event()

    async def CallTool(
        self, request: broker_pb2.CallToolRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[broker_pb2.CallToolResponse]:
        self.requests.append(request)
        for event in self.script(request):
            yield event
        self.streaming.set()
        if self.hang:
            await asyncio.Event().wait()

    async def WatchCall(
        self, request: broker_pb2.WatchCallRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[broker_pb2.WatchCallResponse]:
        self.watches.append(request)
        if not self.hang:
            await context.abort(grpc.StatusCode.NOT_FOUND, "the scripted broker keeps no calls")
        yield broker_pb2.WatchCallResponse()

    def Connect(
        self,
        request_iterator: AsyncIterator[broker_pb2.ConnectRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> AsyncIterator[broker_pb2.ConnectResponse]:
        raise NotImplementedError("no provider connects to the scripted broker")

    async def ListTools(
        self, request: broker_pb2.ListToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.ListToolsResponse:
        return broker_pb2.ListToolsResponse()

    async def WatchTools(
        self, request: broker_pb2.WatchToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[broker_pb2.WatchToolsResponse]:
        yield broker_pb2.WatchToolsResponse(revision=1)

    async def Stop(
        self, request: broker_pb2.StopRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.StopResponse:
        self.stops.append(request)
        return broker_pb2.StopResponse(stopped_invocations=2)

    async def ListSignIns(
        self, request: broker_pb2.ListSignInsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.ListSignInsResponse:
        return broker_pb2.ListSignInsResponse()

    async def CompleteSignIn(
        self, request: broker_pb2.CompleteSignInRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.CompleteSignInResponse:
        raise NotImplementedError("no sign-in on the scripted broker")

    async def SignOut(
        self, request: broker_pb2.SignOutRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.SignOutResponse:
        raise NotImplementedError("no sign-in on the scripted broker")

    async def ReportServers(
        self,
        request_iterator: AsyncIterator[broker_pb2.ReportServersRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> broker_pb2.ReportServersResponse:
        raise NotImplementedError("no provider reports to the scripted broker")

    async def GetStatus(
        self, request: broker_pb2.GetStatusRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> broker_pb2.GetStatusResponse:
        return broker_pb2.GetStatusResponse()


@pytest.fixture
async def broker() -> AsyncIterator[tuple[ScriptedBroker, int]]:
    servicer = ScriptedBroker()
    server = grpc.aio.server()
    broker_pb2_grpc.add_CapabilityBrokerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, port
    await server.stop(None)


@pytest.fixture
def state_dir(tmp_path: Path, broker: tuple[ScriptedBroker, int]) -> Path:
    write_endpoints(
        tmp_path, Endpoints(interaction="127.0.0.1:1", broker=f"127.0.0.1:{broker[1]}", web="http://127.0.0.1:8765")
    )
    return tmp_path


def _args(*argv: str) -> argparse.Namespace:
    parser, _ = build_parser()
    return parser.parse_args(list(argv))


async def _call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await call.execute(_args("call", *argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_a_completed_call_prints_the_joined_text_and_exits_0(
    broker: tuple[ScriptedBroker, int], state_dir: Path
) -> None:
    servicer, _ = broker
    servicer.script = lambda _r: [
        _accepted(),
        _result({"content": [{"type": "text", "text": "Deployed"}, {"type": "text", "text": "done"}]}),
    ]

    code, out, err = await _call("examples:deploy", "--args", '{"artifact": "build-42"}', "--state-dir", str(state_dir))

    assert (code, out) == (0, "Deployed\ndone\n")
    request = servicer.requests[0]
    assert request.tool_name == "examples:deploy"
    assert json.loads(request.arguments_json) == {"artifact": "build-42"}
    assert request.session_id == "default"
    assert request.turn_id.startswith("turn-")
    assert f"turn {request.turn_id}" in err


async def test_json_output_is_the_whole_call_tool_result(broker: tuple[ScriptedBroker, int], state_dir: Path) -> None:
    payload = {"content": [{"type": "text", "text": "pong"}], "isError": False, "structuredContent": {"r": 1}}
    broker[0].script = lambda _r: [_result(payload)]

    code, out, _ = await _call("examples:ping", "--json", "--state-dir", str(state_dir))

    assert code == 0
    assert json.loads(out) == payload


async def test_a_tool_error_result_exits_1_and_still_prints_the_text(
    broker: tuple[ScriptedBroker, int], state_dir: Path
) -> None:
    broker[0].script = lambda _r: [
        _result({"content": [{"type": "text", "text": "no"}], "isError": True}, is_error=True)
    ]

    code, out, _ = await _call("examples:deploy", "--state-dir", str(state_dir))

    assert (code, out) == (1, "no\n")


async def test_a_form_shows_where_to_answer_and_the_settled_action(
    broker: tuple[ScriptedBroker, int], state_dir: Path
) -> None:
    broker[0].script = lambda _r: [
        broker_pb2.CallToolResponse(
            awaiting_interaction=broker_pb2.AwaitingInteraction(
                interaction_id="ix-1", message="Choose the deployment target", field_count=2
            )
        ),
        broker_pb2.CallToolResponse(
            interaction_settled=broker_pb2.InteractionSettledEvent(
                interaction_id="ix-1", action=form_pb2.ACTION_DECLINE
            )
        ),
        _result({"content": [{"type": "text", "text": "declined"}]}),
    ]

    code, _, err = await _call("examples:deploy", "--state-dir", str(state_dir))

    assert code == 0
    assert "form ix-1: Choose the deployment target" in err
    assert "waiting for your answer in http://127.0.0.1:8765 (or `maka tui`)" in err
    assert "form ix-1 settled: decline" in err


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            broker_pb2.CallToolResponse(
                failure=broker_pb2.CallFailure(code=broker_pb2.FAILURE_CODE_UNKNOWN_TOOL, message="no such tool")
            ),
            "UNKNOWN_TOOL: no such tool",
        ),
        (broker_pb2.CallToolResponse(lost=broker_pb2.CallLost(reason="provider disconnected")), "LOST: provider"),
        (broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()), "STOPPED: the call was stopped"),
    ],
)
async def test_failed_lost_and_stopped_calls_exit_3_with_a_stable_code(
    broker: tuple[ScriptedBroker, int], state_dir: Path, event: broker_pb2.CallToolResponse, expected: str
) -> None:
    broker[0].script = lambda _r: [_accepted(), event]

    code, out, err = await _call("examples:deploy", "--state-dir", str(state_dir))

    assert (code, out) == (3, "")
    assert expected in err


async def test_a_stream_that_ends_without_a_result_exits_3(broker: tuple[ScriptedBroker, int], state_dir: Path) -> None:
    broker[0].script = lambda _r: [_accepted()]

    code, _, err = await _call("examples:deploy", "--state-dir", str(state_dir))

    assert code == 3
    assert "NO_RESULT" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["deploy"], "expected SERVER:TOOL"),
        (["examples:"], "expected SERVER:TOOL"),
        (["examples:deploy", "--args", "{nope"], "--args is not JSON"),
        (["examples:deploy", "--args", "[1, 2]"], "--args must be a JSON object"),
    ],
)
async def test_usage_errors_exit_2_without_calling_the_broker(
    broker: tuple[ScriptedBroker, int], state_dir: Path, argv: list[str], message: str
) -> None:
    code, _, err = await _call(*argv, "--state-dir", str(state_dir))

    assert code == 2
    assert message in err
    assert broker[0].requests == []


async def test_no_running_stack_exits_3_with_no_stack(tmp_path: Path) -> None:
    code, _, err = await _call("examples:ping", "--state-dir", str(tmp_path / "nothing"))

    assert code == 3
    assert err.startswith("NO_STACK:")


async def test_an_unreachable_broker_exits_3_with_the_grpc_status(tmp_path: Path) -> None:
    write_endpoints(tmp_path, Endpoints(interaction="127.0.0.1:1", broker="127.0.0.1:1"))

    code, _, err = await _call("examples:ping", "--state-dir", str(tmp_path))

    assert code == 3
    assert "UNAVAILABLE:" in err


async def test_interrupting_a_call_stops_its_turn_and_exits_3(
    broker: tuple[ScriptedBroker, int], state_dir: Path
) -> None:
    servicer, _ = broker
    servicer.script = lambda _r: [_accepted()]
    servicer.hang = True
    out, err = io.StringIO(), io.StringIO()
    task = asyncio.create_task(
        call.execute(
            _args("call", "examples:deploy", "--session", "s1", "--turn", "t1", "--state-dir", str(state_dir)), out, err
        )
    )
    async with asyncio.timeout(10):
        await servicer.streaming.wait()

    task.cancel()
    async with asyncio.timeout(10):
        code = await task

    assert code == 3
    assert [(s.session_id, s.turn_id, s.all) for s in servicer.stops] == [("s1", "t1", False)]
    assert "STOPPED: interrupted; turn t1 stopped" in err.getvalue()


async def test_stop_sends_the_session_and_turn_scope(
    broker: tuple[ScriptedBroker, int], state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(
        stop.run, _args("stop", "--session", "s1", "--turn", "t9", "--state-dir", str(state_dir))
    )

    assert code == 0
    assert [(s.session_id, s.turn_id, s.all) for s in broker[0].stops] == [("s1", "t9", False)]
    assert capsys.readouterr().out == "stopped 2 invocation(s) of session s1 turn t9\n"


async def test_stop_all_is_a_global_stop(broker: tuple[ScriptedBroker, int], state_dir: Path) -> None:
    code = await asyncio.to_thread(stop.run, _args("stop", "--all", "--state-dir", str(state_dir)))

    assert code == 0
    assert [(s.session_id, s.turn_id, s.all) for s in broker[0].stops] == [("", "", True)]


def test_stop_defaults_to_the_default_session() -> None:
    assert stop.build_request(_args("stop")) == broker_pb2.StopRequest(session_id="default")


def test_stop_of_one_invocation_names_only_it() -> None:
    assert stop.build_request(_args("stop", "inv_42")) == broker_pb2.StopRequest(invocation_id="inv_42")


def test_stop_of_one_invocation_with_another_scope_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert stop.run(_args("stop", "inv_42", "--session", "s1")) == 2
    assert capsys.readouterr().err.startswith("USAGE: INVOCATION stops one call")


def test_stop_all_with_a_session_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert stop.run(_args("stop", "--all", "--session", "s1")) == 2
    assert capsys.readouterr().err.startswith("USAGE: --all stops everything")


def test_result_text_joins_text_blocks_and_names_other_blocks() -> None:
    result = {
        "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "..."}, {"type": "text", "text": "b"}]
    }

    assert call.result_text(result) == "a\n[image]\nb"
    assert call.result_text({"content": [], "structuredContent": {"x": 1}}) == '{"x": 1}'
