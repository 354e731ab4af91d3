"""The smoke's one report (``scripts.compose_smoke``, ``scripts.kube_smoke``): a line per check, then counts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


def log(message: str) -> None:
    """Print one line of the smoke's output at once."""
    print(message, flush=True)


@dataclass
class Report:
    passed: int = 0
    failed: int = 0
    measured: dict[str, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[list[str]]:
        """One check: ``ok <name> (details)`` or ``FAIL <name>: why``. The yielded list collects details."""
        details: list[str] = []
        started = time.monotonic()
        try:
            yield details
        except Exception as error:
            self.failed += 1
            log(f"FAIL {name}: {type(error).__name__}: {error}")
        else:
            self.passed += 1
            extra = f" ({'; '.join(details)})" if details else ""
            log(f"ok   {name} [{time.monotonic() - started:.1f} s]{extra}")
