# Maka Runtime — the two commands a user needs are `make run` and `make test`.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
PYTEST := $(PY) -m pytest

.PHONY: setup gen check-gen lint test test-fast run bench faults conformance e2e browser clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh scripts/setup_node_tools.sh
	scripts/setup.sh
	touch $(STAMP)

gen: setup
	$(PY) scripts/gen_protos.py

check-gen: setup
	$(PY) scripts/gen_protos.py --check

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	cd protos && ../$(VENV)/bin/buf lint && ../$(VENV)/bin/buf format --exit-code > /dev/null

# The whole suite, as CI runs it: lint, gen drift, then every test (unit, service, e2e, browser,
# faults, conformance). Slow suites are marked, never skipped.
test: lint check-gen
	$(PYTEST) -m "not e2e and not browser and not faults and not conformance" -n 2
	$(PYTEST) -m "e2e or faults"
	$(PYTEST) -m "browser"
	$(PYTEST) -m "conformance"

test-fast: setup
	$(PYTEST) -m "not e2e and not browser and not faults and not conformance and not slow" -n 2

e2e: setup
	$(PYTEST) -m e2e

browser: setup
	$(PYTEST) -m browser

faults: setup
	$(PYTEST) -m faults

conformance: setup
	$(PYTEST) -m conformance

run: setup
	$(VENV)/bin/maka up --config examples/mcp.json

bench: setup
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
