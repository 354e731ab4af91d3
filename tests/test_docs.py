"""Citations in the repository point into the repository: ``docs/*.md`` sections, the MCP spec, RFC criteria.

Every source and documentation file is read (Python, Lua, protos, TypeScript, Markdown, YAML, shell, the
Makefile, the Dockerfile; not ``node_modules``, build output or ``bench/results``, which holds measurement
output). A file fails when it cites the design by its old outside name or by a section number, names an
issue number, or points at a path outside the checkout; and every ``docs/NAME.md#anchor`` cited anywhere must
be a heading of that page (GitHub's anchor rules), as must every in-page ``(#anchor)`` link of the docs, so
comments can cite ``docs/design.md#redis-layout`` and a renamed heading cannot leave a citation dangling.
A section number of a public standard (``RFC 8259 §6``, ``JSON-RPC 2.0 §5.1``, ``JSON Schema 2020-12 core
§8.2.1``) is a citation of that standard and stays.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

from services.interaction.keys import Keys, wake_key

ROOT = Path(__file__).resolve().parent.parent
TOP_FILES = ("README.md", "Makefile", "Dockerfile", "docker-compose.yml", "pyproject.toml")
TOP_FOLDERS = (
    "services",
    "surfaces",
    "stack",
    "clients",
    "tests",
    "bench",
    "scripts",
    "protos",
    "gen",
    "deploy",
    "docs",
    "examples",
    ".ci",
)
SUFFIXES = frozenset(
    {".py", ".pyi", ".lua", ".proto", ".ts", ".mjs", ".js", ".md", ".yaml", ".yml", ".toml", ".sh", ".html", ".css"}
)
SKIPPED_PARTS = frozenset({"node_modules", "dist", "__pycache__", ".venv", ".tools", ".mypy_cache", ".pytest_cache"})
SKIPPED_FOLDERS = (ROOT / "bench" / "results",)

OUTSIDE_DESIGN = re.compile(r"\bDESIGN\.md\b")
"""The design's old name outside the repository (the repository's page is ``docs/design.md``)."""
SECTION_NUMBER = re.compile(r"§\s*\d")
PUBLIC_STANDARD = re.compile(r"(RFC \d{3,5}|JSON-RPC|JSON Schema)[^§]{0,40}$")
"""What may stand right before a section number: a public standard cited by its own numbering."""
ISSUE_NUMBER = re.compile(r"\bissues?[ -]#?\d+|(?<![\w/&])#\d{1,4}\b(?!\.\d)", re.IGNORECASE)
"""``issue 16``, ``issue-16``, ``issues 5``, a GitHub-style ``#16`` (not an HTML entity)."""
OUTSIDE_PATH = re.compile(r"\.\./shared\b|(?<![\w.~-])/" + r"work/")
ANCHOR_CITATION = re.compile(r"\bdocs/([\w-]+)\.md#([\w-]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def source_files() -> Iterator[Path]:
    """Every file whose text can cite something, in a stable order (skipped folders are never entered)."""
    for name in TOP_FILES:
        path = ROOT / name
        if path.is_file():
            yield path
    for folder in TOP_FOLDERS:
        for directory, subdirectories, files in os.walk(ROOT / folder):  # pruned in place, so not sorted here
            base = Path(directory)
            subdirectories[:] = sorted(
                name for name in subdirectories if name not in SKIPPED_PARTS and base / name not in SKIPPED_FOLDERS
            )
            for name in sorted(files):
                path = base / name
                if path.suffix in SUFFIXES or name in TOP_FILES:
                    yield path


def lines_of(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    yield from enumerate(text.splitlines(), start=1)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page``, with GitHub's ``-1``, ``-2`` suffixes for repeated headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for _number, line in lines_of(page):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def where(path: Path, number: int, line: str) -> str:
    return f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def test_no_file_cites_the_outside_design_a_section_number_an_issue_or_a_path_outside_the_repository() -> None:
    this_file = Path(__file__).resolve()
    problems: list[str] = []
    for path in source_files():
        if path.resolve() == this_file:
            continue
        for number, line in lines_of(path):
            if OUTSIDE_DESIGN.search(line):
                problems.append("cites DESIGN.md (cite docs/design.md#anchor): " + where(path, number, line))
            for match in SECTION_NUMBER.finditer(line):
                if not PUBLIC_STANDARD.search(line[: match.start()]):
                    problems.append("cites a section number (cite a heading anchor): " + where(path, number, line))
            if ISSUE_NUMBER.search(line):
                problems.append("cites an issue number (say the reason): " + where(path, number, line))
            if OUTSIDE_PATH.search(line):
                problems.append("points outside the repository: " + where(path, number, line))
    assert not problems, "\n".join(problems)


def test_every_cited_docs_anchor_is_a_heading_of_that_page() -> None:
    pages: dict[str, set[str] | None] = {}
    problems: list[str] = []
    cited = 0
    for path in source_files():
        if path.resolve() == Path(__file__).resolve():
            continue
        for number, line in lines_of(path):
            for match in ANCHOR_CITATION.finditer(line):
                name, anchor = match.groups()
                if name not in pages:
                    page = ROOT / "docs" / f"{name}.md"
                    pages[name] = anchors(page) if page.is_file() else None
                known = pages[name]
                cited += 1
                if known is None:
                    problems.append(f"docs/{name}.md does not exist: " + where(path, number, line))
                elif anchor not in known:
                    problems.append(f"docs/{name}.md has no heading #{anchor}: " + where(path, number, line))
    assert cited > 20, "the code cites the design by anchor; finding almost none means the scan is broken"
    assert not problems, "\n".join(problems)


def test_the_design_headings_are_unique_anchors_and_name_the_sections_comments_cite() -> None:
    page = ROOT / "docs" / "design.md"
    slugs = [slug(m.group(2)) for _n, line in lines_of(page) if (m := HEADING.match(line))]
    assert len(slugs) == len(set(slugs)), sorted(s for s in slugs if slugs.count(s) > 1)
    for section in ("authorities", "data-path-of-one-call", "redis-layout", "lifecycle", "security"):
        assert section in slugs, section


def test_the_design_lists_every_key_the_key_builder_makes() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    placeholders = {
        "interaction_id": "{id}",
        "invocation_id": "{invocation}",
        "session_id": "{sid}",
        "epoch": "{epoch}",
    }
    builder = Keys("H")
    built: list[str] = []
    for name, method in inspect.getmembers(builder, inspect.ismethod):
        parameters = list(inspect.signature(method).parameters)
        if name.startswith("_") or parameters == ["scope"]:
            continue  # ``events(scope)`` picks one of the session and Host-wide Streams built below
        built.append(method(*(placeholders[parameter] for parameter in parameters)))
    built.append(wake_key("T", "{replica}", 0).replace(":0", ":{lane}"))
    assert len(built) >= 12, built
    missing = sorted(key for key in built if f"`{key}`" not in design)
    assert not missing, missing


def test_the_design_lists_every_redis_key_that_keys_py_documents() -> None:
    keys_doc = (ROOT / "services" / "interaction" / "keys.py").read_text(encoding="utf-8")
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    documented = re.findall(r"``(maka:\{[HT]\}:[^`]+)``", keys_doc)
    assert len(documented) >= 10, documented
    normalised = {key.replace("{invocation_id}", "{invocation}") for key in documented}
    missing = sorted(key for key in normalised if f"`{key}`" not in design)
    assert not missing, missing


def test_the_slug_follows_githubs_anchor_rules() -> None:
    assert slug("Stop, provider loss and supersession") == "stop-provider-loss-and-supersession"
    assert slug("`requestState`") == "requeststate"
    assert slug("gRPC for a replicated tier") == "grpc-for-a-replicated-tier"
    assert slug("Fan-out") == "fan-out"


def test_every_in_page_link_of_the_docs_is_a_heading_of_that_page() -> None:
    problems: list[str] = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        known = anchors(page)
        for number, line in lines_of(page):
            for anchor in re.findall(r"\]\(#([\w-]+)\)", line):
                if anchor not in known:
                    problems.append(f"no heading #{anchor}: " + where(page, number, line))
    assert not problems, "\n".join(problems)


def test_every_link_between_the_readme_and_the_docs_pages_resolves() -> None:
    """A relative link (``[cli](docs/cli.md)``, ``[OAuth](security.md#oauth)``) names a file of the repository,
    and a heading of that page when it has an anchor: moving a section cannot leave a link dangling."""
    problems: list[str] = []
    checked = 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in lines_of(page):
            for target in re.findall(r"\]\(([^)\s#][^)\s]*)\)", line):
                if re.match(r"[a-z][a-z+.-]*:", target):
                    continue  # https:, mailto: ...
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve()
                checked += 1
                if not resolved.exists():
                    problems.append(f"no file {path}: " + where(page, number, line))
                elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                    problems.append(f"{path} has no heading #{anchor}: " + where(page, number, line))
    assert checked > 10, "the README links every docs page; finding almost none means the scan is broken"
    assert not problems, "\n".join(problems)
