"""Print (or check) the configuration reference: every ``MAKA_*`` variable of every Settings class.

``python -m scripts.settings_doc`` prints the Markdown tables that ``docs/configuration.md`` carries between
the ``<!-- settings:begin -->`` and ``<!-- settings:end -->`` markers; ``--write`` replaces that block in the
page; ``--check`` exits 1 when the page is out of date (run by the test suite).
"""

from __future__ import annotations

import sys

from pydantic_settings import BaseSettings

from scripts.doc_block import DocBlock
from services.broker.settings import Settings as BrokerSettings
from services.core.settings import ClientTlsSettings, GrpcServerSettings, OidcSettings
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.common.login import LoginSettings
from surfaces.mcp.settings import McpSettings
from surfaces.web.settings import WebSettings

SECTIONS: tuple[tuple[str, type[BaseSettings], type[BaseSettings] | None], ...] = (
    ("Every gRPC service (Interaction service, broker, MCP provider)", GrpcServerSettings, None),
    ("Outgoing connections (TLS to other services)", ClientTlsSettings, None),
    ("Interaction service (`python -m services.interaction.main`)", InteractionSettings, GrpcServerSettings),
    ("Capability broker (`python -m services.broker.main`)", BrokerSettings, GrpcServerSettings),
    ("MCP provider (`python -m services.mcp_provider.main`)", ProviderSettings, GrpcServerSettings),
    ("Web surface (`maka web`, `python -m surfaces.web.main`)", WebSettings, None),
    ("MCP front door (`python -m surfaces.mcp.main`, started by `maka up`)", McpSettings, None),
    ("People signing in from the terminal (`maka login`; `MAKA_OIDC_*` as above)", LoginSettings, OidcSettings),
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


BLOCK = DocBlock("docs/configuration.md", "settings", render, "python -m scripts.settings_doc")
"""The configuration reference's place: ``docs/configuration.md``."""


def main(argv: list[str]) -> int:
    """CLI: no args prints, ``--write`` updates docs/configuration.md, ``--check`` verifies it."""
    return BLOCK.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
