"""A generated block of a Markdown page: the text between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``.

``python -m scripts.settings_doc`` (the configuration reference) and ``python -m scripts.limits_doc`` (the caps) render
their tables from the code and keep them in their pages through :class:`DocBlock`: no argument prints the
block, ``--write`` replaces it in the page, ``--check`` exits 1 when the page is out of date (the test suite
runs it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class DocBlock:
    """The block ``name`` of ``page`` (relative to the repository root), rendered by ``render``."""

    page: str
    name: str
    render: Callable[[], str]
    command: str

    @property
    def path(self) -> Path:
        return ROOT / self.page

    @property
    def begin(self) -> str:
        return f"<!-- {self.name}:begin -->"

    @property
    def end(self) -> str:
        return f"<!-- {self.name}:end -->"

    def spliced(self, text: str) -> str:
        """``text`` with the block between the markers replaced by a fresh rendering."""
        head, _, rest = text.partition(self.begin)
        _, _, tail = rest.partition(self.end)
        return f"{head}{self.begin}\n{self.render()}{self.end}{tail}"

    def is_fresh(self) -> bool:
        text = self.path.read_text(encoding="utf-8")
        return self.begin in text and self.end in text and self.spliced(text) == text

    def main(self, argv: list[str]) -> int:
        """CLI: no args prints, ``--write`` updates the page, ``--check`` verifies it."""
        if argv == ["--write"]:
            self.path.write_text(self.spliced(self.path.read_text(encoding="utf-8")), encoding="utf-8")
            return 0
        if argv == ["--check"]:
            if not self.is_fresh():
                print(f"{self.page}: the generated {self.name} block is stale: run {self.command} --write")
                return 1
            return 0
        print(self.render())
        return 0
