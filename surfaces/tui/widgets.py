"""The widgets of ``maka tui``'s form panel (the app itself is :class:`surfaces.tui.app.MakaTui`).

:class:`FormPanel` renders one pending form: provenance, the sensitive-data warning, the message, time left,
one row per field and the three answer buttons, with the stable ids :mod:`surfaces.tui.app` documents. The
field widgets show their state as text as well as by colour (``[x]``/``[ ]``, :data:`FOCUS_MARK`). Untrusted
server text is always passed as plain text (``markup=False``, ``Text``/``Content``), never as markup.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.strip import Strip
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Select, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist

from services.core.form import BooleanField, Field, MultiSelectField, NumberField, SingleSelectField, StringField
from surfaces.common.form_input import (
    RawInput,
    field_hints,
    format_hint,
    plain_text,
)
from surfaces.common.interactions import InteractionView, deadline_text, round_line
from surfaces.common.untrusted import display_text

WARNING_TEXT = "⚠ Do not enter passwords, API keys, access tokens or payment details in this form."
"""The RFC's sensitive-data warning, shown on every form."""

FILTER_THRESHOLD = 8
"""Select fields with more options than this get a filter box."""

FOCUS_MARK = "▶ "
"""Prefix of the focused field's label and the focused button (focus is never shown by colour alone)."""

ACTION_LABELS: dict[str, str] = {"submit": "Submit", "decline": "Decline", "dismiss": "Dismiss (Esc)"}
"""Button id → label of the three answer actions."""


class CheckRadioButton(RadioButton):
    """A Yes/No choice that shows its state as text — ``[x]`` chosen, ``[ ]`` not — as well as by colour."""

    @property
    def _button(self) -> Content:
        style = self.get_visual_style("toggle--button")
        return Content.assemble(("[x]", style) if self.value else "[ ]")


class CheckList(SelectionList[str]):
    """A multi-select list whose rows start with ``[x]`` (picked) or ``[ ]`` — state as text, not colour alone."""

    def render_line(self, y: int) -> Strip:
        line = super(SelectionList, self).render_line(y)  # the option prompt, without the colour-only button
        index = self.scroll_offset.y + y
        try:
            selection = self.get_option_at_index(index)
        except OptionDoesNotExist:
            return line
        base = next(iter(line)).style or self.rich_style
        mark = "[x] " if selection.value in self.selected else "[ ] "
        return Strip([Segment(mark, style=base + Style(meta={"option": index})), *line])


class FilterInput(Input):
    """The option filter of a long select list: Esc clears typed text first; an empty filter lets Esc through
    (to Dismiss)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    def action_clear_filter(self) -> None:
        """Clear the filter text; raises ``SkipAction`` when already empty so the app's Esc binding runs."""
        if not self.value:
            raise SkipAction()
        self.value = ""


class FieldLabel(Label):
    """A field's label; shows :data:`FOCUS_MARK` while the field (or its filter) has focus."""

    def __init__(self, text: str, index: int) -> None:
        super().__init__("  " + text, id=f"label-{index}", classes="field-label", markup=False)
        self.text = text
        self.index = index

    def mark(self, focused: bool) -> None:
        """Show or hide the focus marker."""
        self.update((FOCUS_MARK if focused else "  ") + self.text)


def option_label(label: str, value: str) -> str:
    """An option's display text (the label, or the value when the label is empty), as plain text: callers
    wrap it in ``Text``/``Content`` so Textual never interprets server text as markup."""
    text = plain_text(label, keep_newlines=False)
    return text if text else plain_text(value, keep_newlines=False)


class FormPanel(Vertical):
    """The selected form: provenance header, warning, message, time left, one row per field, actions."""

    def __init__(self, view: InteractionView, raws: list[RawInput], now: datetime) -> None:
        super().__init__(id="form-panel")
        self.view = view
        self.raws = raws
        self._now = now

    def compose(self) -> ComposeResult:
        form = self.view.form
        requester = form.requester
        provider = plain_text(requester.provider_display_name or requester.provider_id or "unknown provider")
        if requester.provider_id and requester.provider_display_name:
            provider += f" ({plain_text(requester.provider_id)})"
        server = plain_text(requester.claimed_server or "?", keep_newlines=False)
        tool = plain_text(requester.claimed_tool or "?", keep_newlines=False)
        yield Static(
            f"Requested by provider: {provider}\n"
            f"Claimed MCP server: {server} · claimed Tool: {tool} (claimed by the server — display only)\n"
            f"Session {self.view.session_id} · call {plain_text(self.view.tool_name)}",
            id="provenance",
            markup=False,
        )
        yield Static(WARNING_TEXT, id="warning", markup=False)
        yield Static(plain_text(form.message), id="message", markup=False)
        yield Static(deadline_text(self.view, self._now), id="time-left", markup=False)
        yield Static(round_line(self.view), id="round", markup=False)
        for index, f in enumerate(form.fields):
            yield from self._field_row(index, f)
        yield Static("", id="form-error", markup=False)
        with Horizontal(id="actions"):
            yield Button(ACTION_LABELS["submit"], id="submit", variant="primary")
            yield Button(ACTION_LABELS["decline"], id="decline", variant="warning")
            yield Button(ACTION_LABELS["dismiss"], id="dismiss")

    def _field_row(self, index: int, f: Field) -> ComposeResult:
        label = plain_text(f.label or f.name, keep_newlines=False)
        hints = ", ".join(field_hints(f))
        yield FieldLabel(display_text(f"{label}{' *' if f.required else ''}  ({hints})"), index)
        if f.description:
            yield Static(plain_text(f.description), id=f"help-{index}", classes="help", markup=False)
        raw = self.raws[index]
        if isinstance(f, StringField | NumberField):
            yield Input(
                # A server's default is shown (and sent, if kept) as the untrusted-text rule shows it.
                value=display_text(raw) if isinstance(raw, str) else "",
                placeholder=format_hint(f),
                id=f"field-{index}",
                select_on_focus=False,
            )
        elif isinstance(f, BooleanField):
            with RadioSet(id=f"field-{index}"):
                yield CheckRadioButton("Yes", value=raw is True, id=f"field-{index}-yes")
                yield CheckRadioButton("No", value=raw is False, id=f"field-{index}-no")
        elif isinstance(f, SingleSelectField):
            if len(f.options) > FILTER_THRESHOLD:
                yield FilterInput(
                    placeholder="type to filter options (Esc clears)", id=f"filter-{index}", classes="filter"
                )
            options = [(Text(option_label(o.label, o.value)), o.value) for o in f.options]
            yield Select(
                options,
                prompt="choose…",
                allow_blank=True,
                value=raw if isinstance(raw, str) and raw else Select.NULL,
                id=f"field-{index}",
            )
        elif isinstance(f, MultiSelectField):
            if len(f.options) > FILTER_THRESHOLD:
                yield FilterInput(
                    placeholder="type to filter options (Esc clears)", id=f"filter-{index}", classes="filter"
                )
            picks = set(raw) if isinstance(raw, tuple) else set()
            yield CheckList(
                *[(Content(option_label(o.label, o.value)), o.value, o.value in picks) for o in f.options],
                id=f"field-{index}",
            )
        yield Static("", id=f"error-{index}", classes="error", markup=False)
