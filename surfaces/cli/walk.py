"""``maka answer ID`` without an action: walk the form in the terminal, field by field.

Shows the form's provenance, the sensitive-data warning every surface shows, and the message; then
asks each field in order with its kind, limits, choices and default (Enter keeps the default). Each
entry is checked as soon as it is typed, by the rule of the whole answer
(:func:`surfaces.common.form_input.check_form_input` on that one field: its type, format such as email or
URL, range, length and item count; a bad entry is explained and asked again), the whole answer is checked
once more at the end (a field it rejects is asked again), and last the action: accept, decline or
cancel. A select field takes an option's number or value; any other text filters the options
(type-to-filter, for long lists like time zones). Lines are read with ``input()`` (a terminal or a
pipe); end of input cancels the walk without answering. Values are never echoed back after entry.
"""

from __future__ import annotations

from collections.abc import Callable

from services.core.form import (
    Action,
    Answer,
    BooleanField,
    Field,
    Form,
    MultiSelectField,
    Option,
    SingleSelectField,
)
from surfaces.common.form_input import (
    RawInput,
    check_form_input,
    field_hints,
    filter_options,
    initial_raw,
    plain_text,
)
from surfaces.common.untrusted import display_text

WARNING_TEXT = "Do not enter passwords, API keys, access tokens or payment details in this form."
"""The RFC's sensitive-data warning (the same text as the web page and the TUI)."""
MAX_LISTED_OPTIONS = 30
"""Options listed at once; type to filter the rest."""

Ask = Callable[[str], str]
Say = Callable[[str], None]


class WalkAborted(Exception):
    """The input ended before an action was chosen: nothing is sent."""


def _options_text(options: list[Option], all_options: tuple[Option, ...]) -> list[str]:
    lines = []
    for option in options[:MAX_LISTED_OPTIONS]:
        number = all_options.index(option) + 1
        value = plain_text(option.value, keep_newlines=False)
        label = plain_text(option.label, keep_newlines=False) or value  # an empty title shows the value
        lines.append(f"    {number}) {label}" + (f" [{value}]" if value != label else ""))
    if len(options) > MAX_LISTED_OPTIONS:
        lines.append(f"    ... and {len(options) - MAX_LISTED_OPTIONS} more: type part of a name to filter")
    return lines


def _pick(token: str, options: tuple[Option, ...]) -> Option | None:
    token = token.strip()
    if token.isdigit() and 1 <= int(token) <= len(options):
        return options[int(token) - 1]
    for option in options:
        if token in (option.value, option.label):
            return option
    return None


def _default_text(field: Field, raw: RawInput) -> str:
    if raw in (None, "", ()):
        return ""
    if isinstance(field, BooleanField):
        return "yes" if raw else "no"
    if isinstance(raw, tuple):
        return ", ".join(raw)
    return str(raw)


def ask_field(field: Field, ask: Ask, say: Say, index: int, total: int) -> RawInput:
    """Ask one field until its input parses; returns the raw input (``None``/empty = left empty)."""
    label = plain_text(field.label or field.name, keep_newlines=False)
    say(f"[{index}/{total}] {label}{' (required)' if field.required else ''}: {'; '.join(field_hints(field))}")
    if field.description:
        say("    " + plain_text(field.description, keep_newlines=False))
    default = initial_raw(field)
    options = field.options if isinstance(field, SingleSelectField | MultiSelectField) else ()
    shown = list(options)
    while True:
        if options:
            say("\n".join(_options_text(shown, options)))
        hint = _default_text(field, default)
        prompt = "    > " if not hint else f"    [{hint}] > "
        if isinstance(field, BooleanField):
            prompt = "    yes/no" + (f" [{hint}]" if hint else "") + " > "
        elif isinstance(field, MultiSelectField):
            prompt = "    numbers or values, comma-separated" + (f" [{hint}]" if hint else "") + " > "
        try:
            text = ask(prompt)
        except EOFError:
            raise WalkAborted from None
        raw: RawInput
        if text.strip() == "":
            raw = default
        elif isinstance(field, BooleanField):
            answer = text.strip().lower()
            if answer not in ("y", "yes", "n", "no"):
                say("    ! answer yes or no")
                continue
            raw = answer.startswith("y")
        elif isinstance(field, SingleSelectField):
            picked = _pick(text, options)
            if picked is None:
                shown = filter_options(options, text)
                say(f"    {len(shown)} option(s) match; pick a number" if shown else "    ! no option matches")
                shown = shown or list(options)
                continue
            raw = picked.value
        elif isinstance(field, MultiSelectField):
            picks = [_pick(token, options) for token in text.split(",") if token.strip()]
            if any(p is None for p in picks):
                say("    ! pick listed numbers or values, separated by commas")
                continue
            raw = tuple(p.value for p in picks if p is not None)
        else:
            raw = text
        problem = check_field_input(field, raw)
        if problem is not None:
            say(f"    ! {'this field is required' if problem == 'required' else problem}")
            continue
        return raw


def check_field_input(field: Field, raw: RawInput) -> str | None:
    """What is wrong with ``raw`` as ``field``'s input, by the very rule the whole answer is checked with
    (:func:`check_form_input`: typed input, then formats such as email and URL, ranges, lengths and item
    counts), so a bad entry is asked again at once rather than after the last field; None when it passes."""
    return check_form_input(Form("", (field,)), {0: raw}).errors.get(0)


def _shown_ask(ask: Ask) -> Ask:
    return lambda prompt: ask(display_text(prompt))


def _shown_say(say: Say) -> Say:
    return lambda text: say(display_text(text, multiline=True))


def walk(form: Form, ask: Ask, say: Say) -> Answer:
    """Walk ``form`` (see the module docstring) and return the answer to send.

    Raises :class:`WalkAborted` when the input ends first. Everything said and every prompt (which shows a
    server's default) passes :func:`display_text`: no server string reaches the terminal untouched."""
    ask, say = _shown_ask(ask), _shown_say(say)
    requester = form.requester
    say(
        f"From {plain_text(requester.provider_display_name or requester.provider_id)}"
        f" (claimed MCP server {plain_text(requester.claimed_server)}, Tool {plain_text(requester.claimed_tool)})"
    )
    say(f"⚠ {WARNING_TEXT}")
    say(plain_text(form.message))
    raws: list[RawInput] = [initial_raw(f) for f in form.fields]
    pending = list(range(len(form.fields)))
    while pending:
        for index in pending:
            raws[index] = ask_field(form.fields[index], ask, say, index + 1, len(form.fields))
        check = check_form_input(form, raws)
        pending = sorted(check.errors)
        for index in pending:
            label = plain_text(form.fields[index].label or form.fields[index].name, keep_newlines=False)
            say(f"    ! {label}: {check.errors[index]}")
        if check.form_errors and not pending:
            for problem in check.form_errors:
                say(f"    ! {problem}")
            pending = list(range(len(form.fields)))
    while True:
        try:
            text = ask("Send: accept, decline or cancel? [accept] > ").strip().lower() or "accept"
        except EOFError:
            raise WalkAborted from None
        if text in ("accept", "a"):
            check = check_form_input(form, raws)
            assert check.answer is not None
            return check.answer
        if text in ("decline", "d"):
            return Answer(Action.DECLINE, {})
        if text in ("cancel", "c"):
            return Answer(Action.CANCEL, {})
        say("    ! type accept, decline or cancel")
