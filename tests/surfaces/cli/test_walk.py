"""The interactive answer walk (``maka answer ID`` without an action): each entry is checked as it is typed."""

from __future__ import annotations

from services.core.form import Action, Form, NumberField, StringField
from services.core.form.model import StringFormat
from surfaces.cli.walk import walk


def test_an_email_url_or_out_of_range_entry_is_refused_at_once_and_asked_again() -> None:
    form = Form(
        "Tell us",
        (
            StringField(name="mail", label="Mail", required=True, format=StringFormat.EMAIL),
            StringField(name="site", label="Site", required=True, format=StringFormat.URI),
            NumberField(name="coverage", label="Coverage", required=True, integer=True, minimum=0, maximum=100),
            StringField(name="note", label="Note"),
        ),
    )
    typed = iter(["not-an-email", "me@example.com", "no url", "https://example.com", "150", "90", "", "accept"])
    prompts: list[str] = []
    said: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return next(typed)

    answer = walk(form, ask, said.append)

    assert answer.action is Action.ACCEPT
    assert answer.values == {"mail": "me@example.com", "site": "https://example.com", "coverage": 90}
    refusals = [line for line in said if line.startswith("    ! ")]
    assert len(refusals) == 3, said
    # each refusal comes right after its own field's entry, before the next field is asked
    headers = [line for line in said if line.startswith("[")]
    assert [h.split("]")[0] for h in headers] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    order = [line for line in said if line.startswith(("[", "    ! "))]
    assert [line[:5] for line in order] == ["[1/4]", "    !", "[2/4]", "    !", "[3/4]", "    !", "[4/4]"]
    assert len(prompts) == 8  # 7 field entries (3 of them again) and the action, nothing asked twice at the end


def test_an_empty_required_field_is_asked_again_before_the_next_field() -> None:
    form = Form("Name?", (StringField(name="name", label="Name", required=True),))
    typed = iter(["", "Ada", "accept"])
    said: list[str] = []

    answer = walk(form, lambda _prompt: next(typed), said.append)

    assert answer.values == {"name": "Ada"}
    assert "    ! this field is required" in said
