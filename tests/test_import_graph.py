"""No import cycles among the project's modules (docs/development.md: imports at the top, no cycles).

``lint-imports`` (``make lint``) checks the layer contracts in ``pyproject.toml`` and cycles between sibling
packages; this test asks grimp (import-linter's graph library) for every module-level cycle, including
those through a package's ``__init__``, over the same root packages plus the tests, the benchmarks and the
scripts. Imports inside functions count: they are cycles too, only deferred.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
EXTRA_PACKAGES = ("tests", "bench", "scripts", "examples")


def _root_packages() -> tuple[str, ...]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return (*config["root_packages"], *EXTRA_PACKAGES)


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Each cycle once, as the modules along it (first == last), found from each direct import back."""
    cycles: set[tuple[str, ...]] = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                members = (importer, *back[:-1])
                start = members.index(min(members))
                cycles.add((*members[start:], *members[:start], min(members)))
    return sorted(cycles)


def test_the_cycle_finder_names_every_module_of_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    graph.add_import(importer="pkg.d", imported="pkg.a")

    assert import_cycles(graph) == [("pkg.a", "pkg.b", "pkg.c", "pkg.a")]


def test_the_project_has_no_import_cycles() -> None:
    graph = grimp.build_graph(*_root_packages(), cache_dir=None)

    cycles = import_cycles(graph)

    assert not cycles, "import cycles (break each by moving the shared part to a module both import):\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles
    )
