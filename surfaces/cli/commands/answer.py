"""``maka answer``: answer one pending form (docs/design.md#running-it; MCP ``ElicitResult`` actions).

``maka answer ID accept --values JSON | decline | cancel [--session S] [--submission-id X] [--json]``

With a pool (``--hosts a,b`` / ``--hosts '*'`` / ``$MAKA_HOST_IDS``) the answer goes to the Host that holds
the form (interaction ids are unique across Hosts).

``maka answer ID`` without an action walks the form interactively (:mod:`surfaces.cli.walk`: field by
field, defaults prefilled, inline validation, then accept / decline / cancel; the same sensitive-data
warning as the other surfaces). End of input sends nothing (exit 3, ``NOT_ANSWERED``).

``accept`` reads the form first (``GetInteraction``) to type the JSON values (integers for integer fields,
lists for multi-selects), then calls ``Answer``. Like a pre-filled form, a field with a default that
``--values`` does not mention is sent with its default; ``"name": null`` clears it (left out, never
refilled); a required field without a default (a required boolean included) must be given. The
Interaction service validates and commits exactly one canonical answer. Prints the outcome (id, state,
action, close reason; never the values). Exit codes: 0 committed; 2 usage (bad ``--values`` JSON, values
with decline/cancel); 3 the answer was refused, with the stable ``ErrorReason`` first on stderr
(``ALREADY_SETTLED``, ``CLOSED``, ``NOT_FOUND``, ``INVALID_ANSWER`` followed by one ``path: problem`` line
per violation, ``STORE_UNAVAILABLE``, ``UNAVAILABLE``, ``UNAUTHENTICATED``, ``PERMISSION_DENIED``,
``NO_STACK``), or its outcome is unknown: ``OUTCOME_UNKNOWN`` when the Interaction service did not answer
within the deadline (gRPC ``DEADLINE_EXCEEDED``, e.g. a frozen service) - the answer may or may not have
committed; the message names the submission id (minted here when ``--submission-id`` is not given) to
repeat the command with, which returns the first outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid

import grpc

from maka_client import MakaError
from services.core import json_text
from services.core.form import Action, Answer, FormValue
from surfaces.cli.commands.pending import fail
from surfaces.cli.walk import WalkAborted, walk
from surfaces.common.form_input import FieldInputError, plain_text, values_from_json
from surfaces.common.interactions import Interactions, InteractionView
from surfaces.common.target import add_target_arguments, host_id, interaction_target, pool

NAME = "answer"
HELP = "answer a pending form: accept --values JSON | decline | cancel"
OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
"""The stable code for a deadline exceeded after the answer may have been sent."""
EXAMPLES = """\
  maka answer ID                                   field by field in the terminal
  maka answer ID accept --values '{"environment":"staging","confirm":true}'
  maka answer ID decline
  maka pending --json                              the IDs and their fields"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``ID``, ``ACTION``, ``--values``, ``--session``, ``--submission-id``, ``--json`` and the target options."""
    parser.add_argument("interaction_id", metavar="ID", help="the Interaction id (from `maka pending`)")
    parser.add_argument(
        "action",
        nargs="?",
        choices=[a.value for a in Action],
        help="accept, decline or cancel; without it the form is walked interactively, field by field",
    )
    parser.add_argument(
        "--values", default=None, metavar="JSON", help='accept only: a JSON object, e.g. \'{"env": "prod"}\''
    )
    parser.add_argument("--session", default="", metavar="S", help="the session the form belongs to (checked)")
    parser.add_argument("--submission-id", default=None, help="idempotency key; repeating it returns the same outcome")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_target_arguments(parser)


def usage(code: str, message: str) -> int:
    """Print ``CODE: message`` on stderr and return exit code 2."""
    print(f"{code}: {message}", file=sys.stderr)
    return 2


async def _walk(args: argparse.Namespace, target: str) -> InteractionView:
    async with Interactions.connect(target, host_id=host_id(args), pool=pool(args), surface_kind="cli") as client:
        view = await client.get(args.interaction_id, session_id=args.session)
        if not view.pending:
            raise WalkAborted(f"{view.interaction_id} is already {view.state.value}")
        print(f"Form {view.interaction_id} (session {view.session_id}, Tool {plain_text(view.tool_name)})")
        answer = await asyncio.to_thread(walk, view.form, input, print)
        return await client.answer(
            args.interaction_id,
            answer,
            submission_id=args.submission_id,
            session_id=view.session_id,
            host_id=view.host_id if client.pooled else None,
        )


async def _answer(args: argparse.Namespace, target: str, raw_values: object) -> InteractionView:
    async with Interactions.connect(target, host_id=host_id(args), pool=pool(args), surface_kind="cli") as client:
        values: dict[str, FormValue] = {}
        action = Action(args.action)
        host: str | None = None  # in a pool: the form's Host (found by the client when not read here)
        if action is Action.ACCEPT:
            view = await client.get(args.interaction_id, session_id=args.session)
            values = values_from_json(view.form, raw_values, untouched_defaults=True)
            host = view.host_id if client.pooled else None
        return await client.answer(
            args.interaction_id,
            Answer(action=action, values=values),
            submission_id=args.submission_id,
            session_id=args.session,
            host_id=host,
        )


def _outcome(view: InteractionView, *, with_host: bool = False) -> dict[str, object]:
    return {
        "id": view.interaction_id,
        "session": view.session_id,
        "state": view.state.value,
        "action": view.answer.action.value if view.answer is not None else None,
        "close_reason": view.close_reason.value if not view.pending else None,
        **({"host": view.host_id} if with_host else {}),
    }


def run(args: argparse.Namespace) -> int:
    """Answer one form; see the module docstring for output and exit codes."""
    raw_values: object = {}
    if args.values is not None:
        if args.action != Action.ACCEPT.value:
            return usage("ANSWER_INVALID_ACTION", f"--values is only allowed with accept, not {args.action}")
        try:
            raw_values = json_text.loads(args.values)
        except json_text.JsonTextError as error:
            return usage("INVALID_VALUES", f"--values is {error}")
        if not isinstance(raw_values, dict):
            return usage("INVALID_VALUES", "--values must be a JSON object")
    try:
        target = interaction_target(args)
    except (FileNotFoundError, ValueError) as error:
        return fail("NO_STACK", str(error))
    if not args.submission_id:
        args.submission_id = f"sub_cli_{uuid.uuid4().hex}"
    try:
        if args.action is None:
            view = asyncio.run(_walk(args, target))
        else:
            view = asyncio.run(_answer(args, target, raw_values))
    except WalkAborted as error:
        print(f"NOT_ANSWERED: {str(error) or 'the input ended; nothing was sent'}", file=sys.stderr)
        return 3
    except FieldInputError as error:
        return usage("INVALID_VALUES", str(error))
    except MakaError as error:
        if error.grpc_status_code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return fail(
                OUTCOME_UNKNOWN,
                "the Interaction service did not answer in time; the answer may or may not have committed."
                f" Repeat with --submission-id {args.submission_id} to learn its outcome",
            )
        code = fail(error.reason, error.message)
        for path, description in error.violations:
            print(f"  {path}: {description}", file=sys.stderr)
        return code
    outcome = _outcome(view, with_host=pool(args) is not None)
    if args.json:
        print(json.dumps(outcome, ensure_ascii=False))
    else:
        print(f"{outcome['id']}: {outcome['state']} ({outcome['action'] or outcome['close_reason']})")
    return 0
