"""FormError, Violation and JSON-Pointer paths (maka.form.v1.FieldViolation.path)."""

from __future__ import annotations

import pytest

from services.core.form import FormError, FormErrorReason, Violation
from services.core.form.errors import pointer


def test_pointer_escapes_tilde_and_slash_per_rfc_6901() -> None:
    assert pointer("properties", "a/b~c") == "/properties/a~1b~0c"
    assert pointer("properties", "") == "/properties/"


def test_pointer_with_no_parts_names_the_whole_document() -> None:
    assert pointer() == "$"


def test_pointer_replaces_unpaired_surrogates_so_the_path_always_encodes() -> None:
    path = pointer("a\ud800")
    path.encode("utf-8")
    assert path.startswith("/a")


def test_form_error_lists_every_violation_and_heads_with_the_first_reason() -> None:
    error = FormError(
        [
            Violation("/a", FormErrorReason.ANSWER_WRONG_TYPE, "must be a string"),
            Violation("/b", FormErrorReason.ANSWER_MISSING_REQUIRED, "is required"),
        ]
    )
    assert error.reason is FormErrorReason.ANSWER_WRONG_TYPE
    assert [v.path for v in error.violations] == ["/a", "/b"]
    assert str(error) == "/a: ANSWER_WRONG_TYPE: must be a string; /b: ANSWER_MISSING_REQUIRED: is required"
    assert isinstance(error, ValueError)


def test_form_error_needs_at_least_one_violation() -> None:
    with pytest.raises(ValueError, match="at least one violation"):
        FormError([])
