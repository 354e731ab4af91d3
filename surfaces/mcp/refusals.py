"""Why an in-client answer was refused, in the words its re-ask carries (docs/mcp-front-door.md "Answering in
the client").

The text names each field and its rule (``/owner_email: must be a valid email``), as the web page and the TUI
show them, and never a value: the form contract's violations name paths and constraints only
(:class:`services.core.form.FormError`).
"""

from __future__ import annotations

from maka_client import MakaError
from services.core.form import FormError

ASK_AGAIN = "Your answer did not fit the form; please answer again."
"""What the message of a form asked again begins with (never the values that did not fit)."""


def refusal(error: FormError | MakaError) -> str:
    """The fields and rules ``error`` names (``/path: rule; ...``), else its message; never a value."""
    if isinstance(error, FormError):
        return "; ".join(f"{v.path}: {v.description}" for v in error.violations)
    lines = []
    for path, description in error.violations:
        _reason, sep, text = description.partition(": ")
        lines.append(f"{path or '$'}: {text if sep else description}")
    return "; ".join(lines) or error.message


def asked_again(message: str, problem: str) -> str:
    """The message of a form asked again: :data:`ASK_AGAIN`, then ``problem`` (:func:`refusal`), then the form's."""
    return f"{ASK_AGAIN}\n{problem}\n\n{message}" if problem else f"{ASK_AGAIN}\n\n{message}"
