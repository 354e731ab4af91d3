"""``maka tui``: a Textual surface over the Interaction service's ``Attach`` projection
(docs/design.md#surfaces-and-callers).

The app lists every pending form of the attached sessions (several sessions, several rounds of one
call), renders the selected one, and answers it with one of three distinct actions (RFC "Add a
provider-neutral form Interaction"): **Submit** (``accept``, ``#submit``), **Decline** (``decline``,
``#decline``) and **Dismiss** (``cancel``, ``#dismiss`` or Esc; the footer reads "Esc Dismiss (cancel)").
Esc first does what the focused widget gives it — closes an open dropdown, clears a filter that has
text — and only otherwise dismisses. A dismissal waits ``undo_seconds`` (:data:`UNDO_SECONDS`) behind
``#undo-bar`` ("Dismissed — sending in N s", ``#undo`` or Ctrl+Z restores the form with its draft) before
``cancel`` is sent. After an answer the notice names what was sent ("Dismissed (cancel) — sent to the server
..."), then that the Tool received it once the delivery is recorded. Untrusted server text (message,
labels, descriptions, options, claimed server/Tool) is shown as plain text, never as markup. A form
closed elsewhere (answered on another surface, stopped, timed out, Host restarted) disappears with its
reason. No pending list is kept beyond the projection the service streams.

Accessibility (new-user trial, 256-colour tmux): nothing is shown by colour alone — the focused field's
label and the focused button start with ``▶``, focused inputs get a heavy border, Yes/No and multi-select
rows show ``[x]``/``[ ]``; field hints are plain language ("Choose one", "Pick 1 to 3", "Whole number
between 1 and 10", :func:`~surfaces.common.form_input.field_hints`); each form's countdown appears once
(in ``#time-left`` for the form on screen, in ``#pending`` for the others). Enter or Space opens a focused
select.

Stable widget ids for drivers: ``#pending`` (ListView), ``#status`` (connection, sessions, pending count and
how many surfaces are attached, as the web page shows it: ``ListSurfaces``), ``#notice``, ``#servers`` (the MCP
servers' status, when a ``server_status`` source is given), ``#provenance``,
``#warning``, ``#message``, ``#time-left`` (the one deadline: the form's, or the round's when that comes first),
``#round`` (``form 1 of 2 · the round ends …``, the end only when it is the deadline shown),
``#label-<index>`` (field label, ``▶`` while focused),
``#field-<index>`` (the input widget of field ``index``), ``#filter-<index>`` (option filter of long
select lists), ``#error-<index>``, ``#form-error``, ``#submit``, ``#decline``, ``#dismiss``.

Tests drive it through the constructor: ``MakaTui(connect=lambda: backend)`` where ``backend``
implements :class:`FormsBackend` (the real :class:`~surfaces.common.interactions.Interactions`
does, and :class:`surfaces.tui.backend.FollowingBackend`, which ``maka tui`` uses, re-locates the stack
and re-subscribes with a fresh snapshot on every reconnect). ``connect`` is called inside the app's event
loop, on mount.

The form panel's widgets live in :mod:`surfaces.tui.widgets`; the stylesheet is ``app.tcss`` beside this module.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    Label,
    ListItem,
    ListView,
    RadioSet,
    Select,
    SelectionList,
    Static,
)

from maka_client import AttachedSurface, ErrorReason, InteractionErrorReason, MakaError, Reattaching
from maka_client.surface import new_submission_id
from services.core.form import (
    Action,
    Answer,
    Field,
    MultiSelectField,
    SingleSelectField,
)
from surfaces.common.form_input import (
    RawInput,
    check_form_input,
    filter_options,
    initial_raws,
    plain_text,
)
from surfaces.common.interactions import (
    CLOSE_REASON_TEXT,
    LOST_TEXT,
    AttachEvent,
    CloseReason,
    Delivery,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormOpened,
    FormSnapshot,
    InteractionView,
    deadline_text,
    round_line,
)
from surfaces.common.sign_in import SignInView
from surfaces.tui.widgets import ACTION_LABELS, FOCUS_MARK, FieldLabel, FormPanel, option_label

_SETTLED_REASONS = frozenset(
    {InteractionErrorReason.ALREADY_SETTLED, InteractionErrorReason.CLOSED, InteractionErrorReason.NOT_FOUND}
)

SENT_TEXT: dict[Action, str] = {
    Action.ACCEPT: "Submitted (accept)",
    Action.DECLINE: "Declined (decline)",
    Action.CANCEL: "Dismissed (cancel)",
}
"""How the notice names the answer this app sent (``ElicitResult.action`` in parentheses)."""

UNDO_SECONDS = 5.0
"""How long a dismissed form waits before its ``cancel`` is sent; until then Undo (Ctrl+Z, ``#undo``) restores
it with its draft and nothing reaches the Tool."""

ITEM_WIDTH = 44
"""Characters of text per ``#pending`` line; longer Tool names are shortened in the middle there (the form
panel's provenance and the entry's tooltip show the full name)."""

_FOCUS_ID = re.compile(r"(?:field|filter)-(\d+)")


ServerStatusSource = Callable[[], Awaitable[list[dict[str, Any]]]]
"""Returns :func:`surfaces.common.server_status.server_json` of every MCP server (``maka tui`` reads the
broker's ``GetStatus``)."""
SERVER_STATUS_SECONDS = 3.0
SURFACES_POLL_SECONDS = 3.0
"""How often the TUI reads how many surfaces are attached (``ListSurfaces``, shown in ``#status``)."""


class FormsBackend(Protocol):
    """What the app needs from the Interaction service (``Interactions`` implements it)."""

    def attach(self, session_ids: Sequence[str] = (), resume_token: str = "") -> AsyncIterator[AttachEvent]:
        """Typed projection events, reconnecting as needed."""
        ...

    async def answer(
        self,
        interaction_id: str,
        answer: Answer,
        *,
        submission_id: str | None = None,
        session_id: str = "",
    ) -> InteractionView:
        """Commit an answer; raises ``MakaError``."""
        ...

    async def get(self, interaction_id: str, *, session_id: str = "") -> InteractionView:
        """One Interaction, pending or settled; raises ``MakaError`` (``NOT_FOUND``)."""
        ...

    async def list_surfaces(self) -> tuple[list[AttachedSurface], int]:
        """The surfaces attached to the Host (``ListSurfaces``) and how many more the service left out;
        raises ``MakaError``."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


@dataclass(frozen=True)
class Outcome:
    """What happened to an answer this app sent: the action and either the resulting state or an error reason."""

    interaction_id: str
    action: Action
    accepted: bool
    reason: ErrorReason | str = ""


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by an ellipsis in the middle (start and end stay readable)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


SIGN_IN_POLL_SECONDS = 2.0
"""How often the TUI reads the broker's sign-in prompts."""


class MakaTui(App[None]):
    """The Maka forms TUI. See the module docstring for widget ids and the constructor contract.

    Public state for drivers and tests: :attr:`pending` (id → view, in arrival order), :attr:`selected_id`,
    :attr:`closed` (id → reason of forms that disappeared), :attr:`outcomes` (answers this app sent),
    :attr:`attach_state` (``"connecting"``, ``"connected"``, ``"reconnecting"``, ``"failed: REASON"``).
    """

    TITLE = "Maka — pending forms"
    CSS_PATH = "app.tcss"
    """The app's stylesheet, beside this module (packaged with it)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_form", "Dismiss (cancel)", key_display="Esc"),
        Binding("ctrl+s", "submit_form", "Submit"),
        Binding("ctrl+d", "decline_form", "Decline"),
        Binding("ctrl+q", "quit", "Quit"),
        Binding("ctrl+z", "undo_dismiss", "Undo dismiss", show=False),
    ]

    def __init__(
        self,
        connect: Callable[[], FormsBackend],
        *,
        session_ids: Sequence[str] = (),
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sign_ins: Callable[[], Awaitable[list[SignInView]]] | None = None,
        server_status: ServerStatusSource | None = None,
        undo_seconds: float = UNDO_SECONDS,
        show_hosts: bool = False,
    ) -> None:
        super().__init__()
        self._show_hosts = show_hosts
        """The surface follows a pool of Hosts: each ``#pending`` entry names its form's Host."""
        self._undo_seconds = undo_seconds
        """Esc/Dismiss waits this long (Undo restores the form) before sending ``cancel``; 0 sends at once."""
        self._dismissing: dict[str, tuple[Timer, float]] = {}
        """Interaction id → (its countdown, when it sends on the monotonic clock): dismissed, not yet sent."""
        self._answered: dict[str, Action] = {}
        """Interaction id → the action this app's answer committed (to name it when its delivery is recorded)."""
        self._connect = connect
        self._sign_ins = sign_ins
        """Reads the OAuth sign-in prompts (broker ``ListSignIns``); shown in ``#sign-ins`` with the full URL."""
        self._server_status = server_status
        self.server_lines: list[str] = []
        """The MCP server status as shown in ``#servers`` (one line per server; tests read it)."""
        self.surface_count: int | None = None
        """How many surfaces (this one included) are attached to the Host, as ``#status`` shows it (None
        until the Interaction service answered ``ListSurfaces``)."""
        self._session_ids = tuple(session_ids)
        self._now = now
        self._backend: FormsBackend | None = None
        self.pending: dict[str, InteractionView] = {}
        self.selected_id: str | None = None
        self.closed: dict[str, CloseReason] = {}
        self.outcomes: list[Outcome] = []
        self.attach_state = "connecting"
        self._raws: dict[str, list[RawInput]] = {}
        self._submission_ids: dict[str, str] = {}
        self._sent: dict[str, Action] = {}
        """Interaction id → the action this app sent (from the moment it is sent until it fails or the form leaves)."""
        self._busy: set[str] = set()
        self._in_flight = 0

    @property
    def idle(self) -> bool:
        """True when no feed event or answer is being applied (the screen matches :attr:`pending`)."""
        return self._in_flight == 0

    @staticmethod
    def item_id(interaction_id: str) -> str:
        """The DOM id of a form's entry in ``#pending`` (``item-`` + the id, unsafe characters as ``_``)."""
        return "item-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in interaction_id)

    # --- layout -------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("connecting…", id="status", markup=False)
        yield Static("", id="notice", markup=False)
        yield Static("", id="sign-ins", markup=False)
        yield Static("", id="servers", markup=False)
        with Horizontal():
            yield ListView(id="pending")
            # not focusable itself: Tab goes from the list straight to the first field (focused fields scroll into view)
            yield VerticalScroll(Static("No pending forms.", id="empty", markup=False), id="form", can_focus=False)
        yield Footer()

    def on_mount(self) -> None:
        self._backend = self._connect()
        self._feed()
        self.set_interval(1.0, self._tick)
        self.set_interval(SURFACES_POLL_SECONDS, self._poll_surfaces)
        if self._sign_ins is not None:
            self._poll_sign_ins()
            self.set_interval(SIGN_IN_POLL_SECONDS, self._poll_sign_ins)
        self.watch(self.screen, "focused", self._mark_focus)
        if self._server_status is not None:
            self._poll_servers()
            self.set_interval(SERVER_STATUS_SECONDS, self._poll_servers)

    @work(exclusive=True, group="servers")
    async def _poll_servers(self) -> None:
        """``#servers``: the MCP servers' status (the broker's ``GetStatus``, as ``maka status`` shows it)."""
        assert self._server_status is not None
        try:
            servers = await self._server_status()
        except Exception:  # the broker is optional for answering forms: keep the last status
            return
        lines = []
        for server in servers:
            text = f"{server['name']}: {server['state']}"
            if server["state"] != "ready" and server.get("lastError"):
                text += f" — {server['lastError']['summary']}"
            lines.append(plain_text(text, keep_newlines=False))
        self.server_lines = lines
        self.query_one("#servers", Static).update("MCP servers: " + " · ".join(lines) if lines else "")

    @work(exclusive=True, group="surfaces")
    async def _poll_surfaces(self) -> None:
        """``#status``: how many surfaces are attached (the count the web page and ``maka status`` show)."""
        assert self._backend is not None
        try:
            attached, omitted = await self._backend.list_surfaces()
        except Exception:  # the count is extra (e.g. a client closed by a retarget): keep the last one
            return
        self.surface_count = len(attached) + omitted
        if self.attach_state == "connected":
            with contextlib.suppress(NoMatches):
                self._status(self._connected_text())

    @work(exclusive=True, group="sign-ins")
    async def _poll_sign_ins(self) -> None:
        """Show every pending OAuth sign-in: server and full URL to open in a browser (never opened here)."""
        assert self._sign_ins is not None
        try:
            items = await self._sign_ins()
        except Exception:  # the broker is unreachable: keep what is shown
            return
        lines = [
            plain_text(
                f"Sign in to {item.server}: open {item.authorization_url}  (or run `maka auth login {item.server}`)",
                keep_newlines=False,
            )
            for item in items
            if item.state == "sign_in_required"
        ]
        with contextlib.suppress(NoMatches):
            self.query_one("#sign-ins", Static).update("\n".join(lines))

    def _mark_focus(self, focused: Widget | None) -> None:
        """Put :data:`FOCUS_MARK` on the focused field's label and the focused action button."""
        index: int | None = None
        for node in [focused, *focused.ancestors] if focused is not None else []:
            match = _FOCUS_ID.fullmatch(node.id or "") if isinstance(node, Widget) else None
            if match:
                index = int(match.group(1))
                break
        for label in self.query(FieldLabel):
            label.mark(label.index == index)
        for button in self.query("#actions Button"):
            if isinstance(button, Button) and button.id in ACTION_LABELS:
                button.label = (FOCUS_MARK if button is focused else "") + ACTION_LABELS[button.id]

    async def on_unmount(self) -> None:
        if self._backend is not None:
            await self._backend.close()

    # --- the feed -----------------------------------------------------------------------------------

    @work(exclusive=True, group="feed")
    async def _feed(self) -> None:
        assert self._backend is not None
        try:
            async for event in self._backend.attach(self._session_ids):
                self._in_flight += 1
                try:
                    await self._apply(event)
                finally:
                    self._in_flight -= 1
        except NoMatches:
            return  # the static layout (#pending, #form, #status) is only gone while the app shuts down
        except MakaError as error:
            self.attach_state = f"failed: {error.reason}"
            self._status(f"Cannot attach: {error.reason}")

    async def _apply(self, event: AttachEvent) -> None:
        if isinstance(event, Reattaching):
            self.attach_state = "reconnecting"
            self._status(f"Disconnected; reconnecting in {event.delay:.1f}s (attempt {event.attempt})")
            return
        if self.attach_state != "connected":
            self.attach_state = "connected"
            self._status(self._connected_text())
            self._poll_surfaces()  # this surface is attached now: count it at once
        if isinstance(event, FormSnapshot):
            fresh = {v.interaction_id: v for v in event.pending}
            # a pool sends one snapshot per Host: it replaces only that Host's forms
            gone = [view for i, view in self.pending.items() if i not in fresh and event.replaces(view)]
            for view in gone:
                await self._remove(view.interaction_id, None)
            if gone:
                self._explain(gone)
            for view in event.pending:
                if view.interaction_id not in self.pending:
                    await self._add(view)
        elif isinstance(event, FormOpened):
            if event.interaction.pending and event.interaction.interaction_id not in self.pending:
                await self._add(event.interaction)
        elif isinstance(event, FormAnswered):
            await self._remove(event.interaction.interaction_id, CloseReason.ANSWERED)
        elif isinstance(event, FormClosed):
            await self._remove(event.interaction.interaction_id, event.reason)
        elif isinstance(event, FormDeliveryRecorded) and event.interaction.delivery is Delivery.DELIVERED:
            view = event.interaction
            action = self._answered.pop(view.interaction_id, None)
            if action is not None:
                message = plain_text(view.form.message, keep_newlines=False)[:60]
                self._notice(f"{SENT_TEXT[action]} — the Tool received it for “{message}”.")
        elif isinstance(event, FormDeliveryRecorded) and event.interaction.delivery is Delivery.LOST:
            view = event.interaction
            message = plain_text(view.form.message, keep_newlines=False)[:60]
            reason = CLOSE_REASON_TEXT[view.delivery_lost_reason]
            self._notice(f"Form “{message}”: {LOST_TEXT.format(reason=reason)}.")
        self._status(self._connected_text())

    @work(group="explain")
    async def _explain(self, gone: list[InteractionView]) -> None:
        """Forms missing from a fresh snapshot closed while we were away: look up and show why."""
        assert self._backend is not None
        for view in gone:
            try:
                current = await self._backend.get(view.interaction_id, session_id=view.session_id)
            except MakaError:
                continue
            if current.pending or view.interaction_id in self.pending:
                continue
            reason = current.close_reason
            self.closed[view.interaction_id] = reason
            message = plain_text(view.form.message, keep_newlines=False)[:60]
            self._notice(f"Form “{message}” closed: {CLOSE_REASON_TEXT[reason]}.")

    def _connected_text(self) -> str:
        sessions = ", ".join(self._session_ids) if self._session_ids else "all visible sessions"
        text = f"Connected · {sessions} · {len(self.pending)} pending"
        if self.surface_count is not None:
            text += f" · {self.surface_count} surface{'' if self.surface_count == 1 else 's'} attached"
        return text

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def _notice(self, text: str) -> None:
        self.query_one("#notice", Static).update(text)

    def _item_text(self, view: InteractionView) -> str:
        """A ``#pending`` entry: session · Tool (long names shortened in the middle), message, time left — the
        time left only for forms not on screen (the selected form shows it once, in ``#time-left``); following a
        pool, the time-left line ends with the form's Host (``· on HOST``)."""
        message = plain_text(view.form.message, keep_newlines=False)
        if len(message) > 60:
            message = message[:59] + "…"
        width = max(16, ITEM_WIDTH - len(view.session_id) - 3)
        tool = shorten_middle(plain_text(view.tool_name, keep_newlines=False), width)
        where = "shown on the right →" if view.interaction_id == self.selected_id else deadline_text(view, self._now())
        if self._show_hosts:
            where += f" · on {shorten_middle(plain_text(view.host_id, keep_newlines=False), 24)}"
        return f"{view.session_id} · {tool}\n{message}\n{where}"

    def _refresh_items(self) -> None:
        for interaction_id, view in self.pending.items():
            for item in self.query(f"#{self.item_id(interaction_id)} Label"):
                if isinstance(item, Label):
                    item.update(self._item_text(view))

    async def _add(self, view: InteractionView) -> None:
        interaction_id = view.interaction_id
        self.pending[interaction_id] = view
        self._raws.setdefault(interaction_id, initial_raws(view.form))
        self._submission_ids.setdefault(interaction_id, new_submission_id())
        item = ListItem(Label(self._item_text(view), markup=False), id=self.item_id(interaction_id))
        item.tooltip = f"{view.session_id} · {plain_text(view.tool_name, keep_newlines=False)}"
        await self.query_one("#pending", ListView).append(item)
        if self.selected_id is None:
            await self.select(interaction_id)

    async def _remove(self, interaction_id: str, reason: CloseReason | None) -> None:
        if interaction_id not in self.pending:
            return
        was_selected = self.selected_id == interaction_id
        if was_selected:
            self.selected_id = None
        view = self.pending.pop(interaction_id)
        self._raws.pop(interaction_id, None)
        if reason is not None:
            self.closed[interaction_id] = reason
        for item in self.query(f"#{self.item_id(interaction_id)}"):
            await item.remove()
        countdown = self._dismissing.pop(interaction_id, None)
        if countdown is not None:
            countdown[0].stop()  # closed elsewhere while its dismissal waited: nothing will be sent
        sent = self._sent.pop(interaction_id, None)
        if sent is not None:
            self._answered[interaction_id] = sent
            message = plain_text(view.form.message, keep_newlines=False)[:60]
            text = f"{SENT_TEXT[sent]} — sent to the server for “{message}”."
        elif reason is None:
            text = f"Form “{plain_text(view.form.message, keep_newlines=False)[:60]}” is no longer pending."
        else:
            text = (
                f"Form “{plain_text(view.form.message, keep_newlines=False)[:60]}” closed: {CLOSE_REASON_TEXT[reason]}."
            )
        self._notice(text)
        if self.attach_state == "connected":
            self._status(self._connected_text())
        if was_selected:
            following = next(iter(self.pending), None)
            if following is not None:
                await self.select(following)
            else:
                await self._show_empty()

    async def _show_empty(self) -> None:
        container = self.query_one("#form", VerticalScroll)
        await container.remove_children()
        await container.mount(Static("No pending forms.", id="empty", markup=False))

    async def select(self, interaction_id: str) -> None:
        """Show the pending form ``interaction_id`` (its edits so far are kept per form)."""
        view = self.pending[interaction_id]
        container = self.query_one("#form", VerticalScroll)
        await container.remove_children()
        await container.mount(FormPanel(view, self._raws[interaction_id], self._now()))
        self.selected_id = interaction_id  # only once its widgets are mounted
        if interaction_id in self._dismissing:
            await self._show_dismissing(interaction_id)
        self._refresh_errors(show_missing=False)
        self._refresh_items()
        self._mark_focus(self.screen.focused)
        items = self.query_one("#pending", ListView)
        for position, child in enumerate(items.children):
            if child.id == self.item_id(interaction_id) and items.index != position:
                items.index = position

    @on(ListView.Selected, "#pending")
    @on(ListView.Highlighted, "#pending")
    async def _on_item(self, event: ListView.Selected | ListView.Highlighted) -> None:
        item = event.item
        if item is None:
            return
        for interaction_id in self.pending:
            if self.item_id(interaction_id) == item.id and interaction_id != self.selected_id:
                await self.select(interaction_id)
                return

    def _tick(self) -> None:
        now = self._now()
        if self.selected_id is not None and self.selected_id in self.pending:
            view = self.pending[self.selected_id]
            for widget in self.query("#time-left"):
                if isinstance(widget, Static):
                    widget.update(deadline_text(view, now))
            for widget in self.query("#round"):
                if isinstance(widget, Static):
                    widget.update(round_line(view))
        self._refresh_items()
        self._tick_dismissing()

    # --- editing ------------------------------------------------------------------------------------

    def _locate(self, widget: Widget | None) -> tuple[str, int] | None:
        """(interaction id, field index) of a field widget, from its enclosing :class:`FormPanel`."""
        if widget is None or widget.id is None or not widget.id.startswith("field-"):
            return None
        try:
            index = int(widget.id.removeprefix("field-"))
        except ValueError:
            return None
        panel = next((a for a in widget.ancestors if isinstance(a, FormPanel)), None)
        if panel is None or panel.view.interaction_id not in self.pending:
            return None
        if not 0 <= index < len(panel.view.form.fields):
            return None
        return panel.view.interaction_id, index

    def _set_raw(self, widget: Widget, raw: RawInput) -> None:
        where = self._locate(widget)
        if where is None:
            return
        interaction_id, index = where
        raws = self._raws.get(interaction_id)
        if raws is None:
            return
        raws[index] = raw
        if interaction_id == self.selected_id:
            self._refresh_errors(show_missing=False)

    @on(Input.Changed)
    def _on_input(self, event: Input.Changed) -> None:
        widget = event.input
        if widget.id and widget.id.startswith("filter-"):
            self._apply_filter(int(widget.id.removeprefix("filter-")), event.value)
            return
        self._set_raw(widget, event.value)

    @on(RadioSet.Changed)
    def _on_radio(self, event: RadioSet.Changed) -> None:
        self._set_raw(event.radio_set, event.index == 0)

    @on(Select.Changed)
    def _on_select(self, event: Select.Changed) -> None:
        value = event.value
        if isinstance(value, str):
            self._set_raw(event.select, value)
        elif not self._filtering:
            self._set_raw(event.select, None)

    @on(SelectionList.SelectedChanged)
    def _on_selection(self, event: SelectionList.SelectedChanged[Any]) -> None:
        selection = event.selection_list
        where = self._locate(selection)
        if self._filtering or where is None:
            return
        interaction_id, index = where
        field = self.pending[interaction_id].form.fields[index]
        if not isinstance(field, MultiSelectField):
            return
        current = self._raws[interaction_id][index]
        picks = set(current) if isinstance(current, tuple) else set()
        visible = {str(selection.get_option_at_index(i).value) for i in range(selection.option_count)}
        chosen = {str(v) for v in selection.selected}
        picks = (picks - visible) | chosen
        self._set_raw(selection, tuple(o.value for o in field.options if o.value in picks))

    _filtering = False

    def _apply_filter(self, index: int, query: str) -> None:
        if self.selected_id is None:
            return
        field = self.pending[self.selected_id].form.fields[index]
        raw = self._raws[self.selected_id][index]
        self._filtering = True
        try:
            if isinstance(field, SingleSelectField):
                select = self.query_one(f"#field-{index}", Select)
                shown = filter_options(field.options, query)
                select.set_options([(Text(option_label(o.label, o.value)), o.value) for o in shown])
                if isinstance(raw, str) and raw in {o.value for o in shown}:
                    select.value = raw
            elif isinstance(field, MultiSelectField):
                selection: SelectionList[str] = self.query_one(f"#field-{index}", SelectionList)
                picks = set(raw) if isinstance(raw, tuple) else set()
                selection.clear_options()
                selection.add_options(
                    [
                        (Content(option_label(o.label, o.value)), o.value, o.value in picks)
                        for o in filter_options(field.options, query)
                    ]
                )
        finally:
            self._filtering = False

    def _refresh_errors(self, *, show_missing: bool) -> bool:
        """Re-check the selected form; show inline errors; enable Submit only when valid. Returns validity.

        Before the first Submit, "required" is not shown for fields the user has not filled yet.
        """
        if self.selected_id is None:
            return False
        view = self.pending[self.selected_id]
        raws = self._raws[self.selected_id]
        check = check_form_input(view.form, raws)
        for index, f in enumerate(view.form.fields):
            message = check.errors.get(index, "")
            if message == "required" and not show_missing:
                message = ""
            for widget in self.query(f"#error-{index}"):
                if isinstance(widget, Static):
                    widget.update(message)
            self._mark_invalid(index, f, bool(message))
        for widget in self.query("#form-error"):
            if isinstance(widget, Static):
                widget.update("; ".join(check.form_errors) if show_missing else "")
        for button in self.query("#submit"):
            if isinstance(button, Button):
                button.disabled = not check.ok
        return check.ok

    def _mark_invalid(self, index: int, field: Field, invalid: bool) -> None:
        for widget in self.query(f"#field-{index}"):
            widget.set_class(invalid, "-invalid")

    def field_error(self, index: int) -> str:
        """The inline error currently shown under field ``index`` (empty when none)."""
        widget = self.query_one(f"#error-{index}", Static)
        return str(widget.content)

    # --- actions ------------------------------------------------------------------------------------

    @on(Button.Pressed, "#submit")
    def _pressed_submit(self) -> None:
        self.action_submit_form()

    @on(Button.Pressed, "#decline")
    def _pressed_decline(self) -> None:
        self.action_decline_form()

    @on(Button.Pressed, "#dismiss")
    def _pressed_dismiss(self) -> None:
        self.action_dismiss_form()

    def action_submit_form(self) -> None:
        """Submit (``accept``) the selected form when every field is valid; otherwise show the errors inline."""
        if self.selected_id is None or self.selected_id in self._dismissing:
            return
        if not self._refresh_errors(show_missing=True):
            self._form_error("Fix the highlighted fields before submitting.")
            return
        view = self.pending[self.selected_id]
        check = check_form_input(view.form, self._raws[self.selected_id])
        if check.answer is not None:
            self._send(self.selected_id, check.answer)

    def action_decline_form(self) -> None:
        """Decline (``decline``) the selected form."""
        if self.selected_id is not None and self.selected_id not in self._dismissing:
            self._send(self.selected_id, Answer(action=Action.DECLINE))

    def action_dismiss_form(self) -> None:
        """Dismiss (``cancel``) the selected form after the undo countdown (at once when it is 0)."""
        interaction_id = self.selected_id
        if interaction_id is None or interaction_id in self._dismissing or interaction_id in self._busy:
            return
        if self._undo_seconds <= 0:
            self._send(interaction_id, Answer(action=Action.CANCEL))
            return
        timer = self.set_timer(self._undo_seconds, lambda: self._dismiss_due(interaction_id))
        self._dismissing[interaction_id] = (timer, time.monotonic() + self._undo_seconds)
        self._in_flight += 1
        self._dismiss_shown(interaction_id)

    @work(group="dismissing")
    async def _dismiss_shown(self, interaction_id: str) -> None:
        try:
            if self.selected_id == interaction_id:
                await self._show_dismissing(interaction_id)
        finally:
            self._in_flight -= 1

    @on(Button.Pressed, "#undo")
    def _pressed_undo(self) -> None:
        self.action_undo_dismiss()

    def action_undo_dismiss(self) -> None:
        """Undo the selected form's dismissal while its countdown runs: nothing is sent, the draft is kept."""
        interaction_id = self.selected_id
        countdown = self._dismissing.pop(interaction_id, None) if interaction_id is not None else None
        if interaction_id is None or countdown is None:
            return
        countdown[0].stop()
        self._in_flight += 1
        self._restore_panel(interaction_id, undone=True)

    @work(group="dismissing")
    async def _restore_panel(self, interaction_id: str, *, undone: bool) -> None:
        try:
            for bar in self.query("#undo-bar"):
                await bar.remove()
            for panel in self.query("#form-panel"):
                panel.display = True
            view = self.pending.get(interaction_id)
            if undone and view is not None:
                message = plain_text(view.form.message, keep_newlines=False)[:60]
                self._notice(f"Undone: “{message}” was not dismissed; nothing was sent.")
                for button in self.query("#dismiss"):
                    button.focus()
        finally:
            self._in_flight -= 1

    async def _show_dismissing(self, interaction_id: str) -> None:
        """Hide the selected form's panel (its widgets, and so the draft, stay) behind the undo bar."""
        for panel in self.query("#form-panel"):
            panel.display = False
        if not self.query("#undo-bar"):
            bar = Vertical(
                Static(self._dismissing_text(interaction_id), id="undo-text", markup=False),
                Button("Undo (Ctrl+Z)", id="undo", variant="primary"),
                id="undo-bar",
            )
            await self.query_one("#form", VerticalScroll).mount(bar, before=0)
        self.query_one("#undo", Button).focus()

    def _dismissing_text(self, interaction_id: str) -> str:
        countdown = self._dismissing.get(interaction_id)
        left = math.ceil(max(0.0, countdown[1] - time.monotonic())) if countdown is not None else 0
        return f"Dismissed — sending in {left} s. Undo keeps the form and sends nothing."

    def _tick_dismissing(self) -> None:
        if self.selected_id in self._dismissing:
            for widget in self.query("#undo-text"):
                if isinstance(widget, Static):
                    widget.update(self._dismissing_text(self.selected_id or ""))

    def _dismiss_due(self, interaction_id: str) -> None:
        """The countdown ended: send ``cancel`` now."""
        if self._dismissing.pop(interaction_id, None) is None or interaction_id not in self.pending:
            return
        if self.selected_id == interaction_id:
            self._in_flight += 1
            self._restore_panel(interaction_id, undone=False)
        self._send(interaction_id, Answer(action=Action.CANCEL))

    def _form_error(self, text: str) -> None:
        for widget in self.query("#form-error"):
            if isinstance(widget, Static):
                widget.update(text)

    def _send(self, interaction_id: str, answer: Answer) -> None:
        if interaction_id in self._busy:
            return
        self._busy.add(interaction_id)
        self._sent[interaction_id] = answer.action
        self._in_flight += 1
        self._answer_worker(interaction_id, answer)

    @work(group="answers")
    async def _answer_worker(self, interaction_id: str, answer: Answer) -> None:
        assert self._backend is not None
        view = self.pending.get(interaction_id)
        if view is None:
            self._sent.pop(interaction_id, None)
            self._busy.discard(interaction_id)
            self._in_flight -= 1
            return
        try:
            result = await self._backend.answer(
                interaction_id,
                answer,
                submission_id=self._submission_ids[interaction_id],
                session_id=view.session_id,
            )
        except MakaError as error:
            self._sent.pop(interaction_id, None)
            self.outcomes.append(Outcome(interaction_id, answer.action, accepted=False, reason=error.reason))
            if error.reason in _SETTLED_REASONS:
                await self._remove(interaction_id, _settled_reason(error))
                self._notice(f"Not sent ({error.reason}): the form was already settled elsewhere.")
            else:
                if self.selected_id == interaction_id:
                    self._show_violations(error)
                if (
                    error.reason == InteractionErrorReason.INVALID_ANSWER
                ):  # a rejected attempt: the next one is a new submission
                    self._submission_ids[interaction_id] = new_submission_id()
                # otherwise (UNAVAILABLE, ...) a retry reuses the id, so it cannot commit twice
        else:
            self.outcomes.append(Outcome(interaction_id, answer.action, accepted=True))
            reason = result.close_reason if not result.pending else None
            if reason is not None:
                await self._remove(interaction_id, reason)
        finally:
            self._busy.discard(interaction_id)
            self._in_flight -= 1

    def _show_violations(self, error: MakaError) -> None:
        view = self.pending.get(self.selected_id or "")
        names = [f.name for f in view.form.fields] if view is not None else []
        lines: list[str] = []
        for path, description in error.violations:
            index = next((i for i, name in enumerate(names) if path == "/" + name), None)
            if index is not None:
                for widget in self.query(f"#error-{index}"):
                    if isinstance(widget, Static):
                        widget.update(description)
            else:
                lines.append(description)
        self._form_error(f"Not accepted ({error.reason})" + (": " + "; ".join(lines) if lines else ""))


def _settled_reason(error: MakaError) -> CloseReason | None:
    """The close reason an ALREADY_SETTLED/CLOSED error names (``ErrorInfo.metadata["close_reason"]``)."""
    if error.reason == InteractionErrorReason.ALREADY_SETTLED:
        return CloseReason.ANSWERED
    name = error.metadata.get("close_reason", "").removeprefix("CLOSE_REASON_").lower()
    try:
        return CloseReason(name)
    except ValueError:
        return None
