"""``make test`` runs every test exactly once, in one of its buckets (the ``$(PYTEST) -m "..."`` lines of the
Makefile's ``test`` recipe), and a ``serial`` test alone (docs/development.md#how-make-test-runs-the-suite)."""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bucket:
    expression: str
    options: str

    def selects(self, markers: frozenset[str], known: frozenset[str]) -> bool:
        """Whether ``-m expression`` selects a test carrying exactly ``markers`` (pytest's marker expressions are
        Python's ``and``/``or``/``not`` over marker names)."""
        flags = {name: name in markers for name in known}
        return bool(eval(self.expression, {"__builtins__": {}}, flags))


def make_test_buckets() -> list[Bucket]:
    """The ``-m`` expression and the other options of each pytest run of ``make test``, variables expanded."""
    makefile = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+)\s*:=\s*(.*)$", makefile, re.MULTILINE))
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None, "the Makefile has a test target"
    buckets = []
    for line in recipe.group(1).splitlines():
        found = re.fullmatch(r'\t\$\(PYTEST\) -m "([^"]*)"(.*)', line)
        if found:
            expression = re.sub(r"\$\((\w+)\)", lambda name: variables[name.group(1)], found.group(1))
            buckets.append(Bucket(expression, found.group(2).strip()))
    return buckets


def registered_markers() -> frozenset[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        markers = tomllib.load(file)["tool"]["pytest"]["ini_options"]["markers"]
    return frozenset(marker.partition(":")[0] for marker in markers)


def test_every_combination_of_markers_runs_in_exactly_one_bucket_of_make_test() -> None:
    known = registered_markers()
    buckets = make_test_buckets()
    assert len(buckets) >= 4
    assert {"e2e", "faults", "browser", "conformance", "serial"} <= known
    for size in range(len(known) + 1):
        for combination in itertools.combinations(sorted(known), size):
            markers = frozenset(combination)
            chosen = [b.expression for b in buckets if b.selects(markers, known)]
            assert len(chosen) == 1, f"a test marked {sorted(markers)} runs in {chosen}"


def test_a_serial_test_runs_without_workers_and_only_the_e2e_bucket_shares_files_between_two() -> None:
    known = registered_markers()
    buckets = make_test_buckets()
    for bucket in buckets:
        if bucket.selects(frozenset({"serial"}), known) or bucket.selects(frozenset({"serial", "e2e"}), known):
            assert "-n" not in bucket.options.split(), bucket
    e2e = [b for b in buckets if b.selects(frozenset({"e2e"}), known)]
    assert [b.options for b in e2e] == ["-n 2 --dist loadfile"], "a module's shared stack stays in one worker"


def test_the_containers_bucket_is_the_compose_smoke_alone_and_last() -> None:
    """``make compose-smoke`` (tests/deploy/test_compose_smoke.py, marked ``containers``) publishes docker-compose.yml's
    fixed loopback ports and loads the machine: its bucket has no workers and runs after every other."""
    known = registered_markers()
    buckets = make_test_buckets()
    assert "containers" in known
    assert buckets[-1] == Bucket("containers", ""), buckets[-1]
    for bucket in buckets[:-1]:
        assert not bucket.selects(frozenset({"containers"}), known), bucket
    smoke = (ROOT / "tests" / "deploy" / "test_compose_smoke.py").read_text()
    assert "pytest.mark.containers" in smoke
    assert "scripts.compose_smoke" in smoke
    assert "\tscripts.compose_smoke" not in (ROOT / "Makefile").read_text()
    assert "-m scripts.compose_smoke" in (ROOT / "Makefile").read_text().split("compose-smoke: ", 1)[1]
