"""Print (or check) the configuration reference: every ``MAKA_*`` variable of every Settings class.

``python scripts/settings_doc.py`` prints the Markdown tables that README.md carries between the
``<!-- settings:begin -->`` and ``<!-- settings:end -->`` markers; ``--write`` replaces that block in
README.md; ``--check`` exits 1 when README.md is out of date (run by the test suite).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_settings import BaseSettings

from services.broker.settings import Settings as BrokerSettings
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.web.settings import WebSettings

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"

SECTIONS: tuple[tuple[str, type[BaseSettings], type[BaseSettings] | None], ...] = (
    ("Every gRPC service (Interaction service, broker, MCP provider)", GrpcServerSettings, None),
    ("Outgoing connections (TLS to other services)", ClientTlsSettings, None),
    ("Interaction service (`python -m services.interaction.main`)", InteractionSettings, GrpcServerSettings),
    ("Capability broker (`python -m services.broker.main`)", BrokerSettings, GrpcServerSettings),
    ("MCP provider (`python -m services.mcp_provider.main`)", ProviderSettings, GrpcServerSettings),
    ("Web surface (`maka web`, `python -m surfaces.web.main`)", WebSettings, None),
)


def _default(value: object) -> str:
    text = "" if value is None else str(value)
    if text in ("", "[]", "**********"):
        return "—"
    return f"`{text}`"


def render() -> str:
    """The Markdown block (without markers)."""
    lines: list[str] = []
    for title, cls, base in SECTIONS:
        inherited = set(base.model_fields) if base is not None else set()
        lines += [f"**{title}**", "", "| Variable | Default | Meaning |", "| --- | --- | --- |"]
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            if name in inherited:
                continue
            doc = " ".join((field.description or "").split()).replace("|", "\\|")
            lines.append(f"| `{(prefix + name).upper()}` | {_default(field.default)} | {doc} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _spliced(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{render()}{END}{tail}"


def main(argv: list[str]) -> int:
    """CLI: no args prints, ``--write`` updates README.md, ``--check`` verifies it."""
    text = README.read_text()
    if argv == ["--write"]:
        README.write_text(_spliced(text))
        return 0
    if argv == ["--check"]:
        if BEGIN not in text or _spliced(text) != text:
            print("README.md configuration reference is stale: run python scripts/settings_doc.py --write")
            return 1
        return 0
    print(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
