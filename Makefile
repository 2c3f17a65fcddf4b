# One entry point per task. `make demo` and `make test` are all a new user needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The spark and trino kinds' tests run against the servers `make services` starts
# (deploy/local/spark.sh, deploy/local/trino.sh).
export DRIFTGAUGE_TEST_SPARK_URL ?= sc://127.0.0.1:$(or $(DRIFTGAUGE_SPARK_PORT),55002)
export DRIFTGAUGE_TEST_TRINO_URL ?= http://127.0.0.1:$(or $(DRIFTGAUGE_TRINO_PORT),58080)

.PHONY: install services services-stop status tools test test-unit test-differential test-fuzz test-faults test-replicas lint typecheck docs try demo demo-backfill bench bench-faults bench-scale bench-engines bench-fleet dist rules lock clean

$(BIN)/driftgauge: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench]'
	@touch $@

install: $(BIN)/driftgauge ## Create .venv with driftgauge and its dev tools

services: ## Start the local PostgreSQL, MariaDB, OpenSearch, Elasticsearch, Spark Connect and Trino (idempotent)
	deploy/local/stack.sh start

services-stop: ## Stop the local stack
	deploy/local/stack.sh stop

status: ## Report the local stack
	deploy/local/stack.sh status

lint: install ## ruff check and format, mypy and the import layers (.importlinter)
	$(BIN)/ruff check service tests bench tools deploy/compose deploy/prometheus
	$(BIN)/ruff format --check service tests bench tools deploy
	$(BIN)/mypy
	PYTHONPATH=service $(BIN)/lint-imports --no-cache

tools: ## Install helm (built from the Go module proxy) and Debian's prometheus (and promtool), mariadbd and chromium
	deploy/local/helm.sh install
	[ -x /usr/sbin/mariadbd ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null; }
	{ command -v promtool >/dev/null && [ -x /usr/bin/prometheus ]; } || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Line and branch coverage of service/driftgauge (in-process; e2e's serve subprocesses are not
# counted). 88.1% on 2026-12-01; the floor sits a few points below.
COV_FLOOR ?= 85
test: install services tools ## Start the stack and run every test (unit, integration, e2e), with coverage
	$(BIN)/pytest -q --cov --cov-report=xml --cov-fail-under=$(COV_FLOOR)

test-unit: install ## Only the tests that need no stores
	$(BIN)/pytest -q tests/unit

test-differential: install services ## The differential test against the Python oracle, many examples
	HYPOTHESIS_PROFILE=long $(BIN)/pytest -q --hypothesis-show-statistics tests/integration/test_differential.py

test-fuzz: install services ## Schemathesis over every API operation, every phase, 100 examples each
	DRIFTGAUGE_FUZZ_EXAMPLES=100 $(BIN)/pytest -q -s tests/e2e/test_api_fuzz.py

test-faults: install services ## The fault suite: proxies in front of the real stores (also in `make test`)
	$(BIN)/pytest -q tests/faults

docs: install ## Regenerate docs/configuration.md from the config models
	$(BIN)/python tools/config_reference.py

dist: install services tools ## Wheel, sdist and chart into dist/; install them from the lock in a fresh venv and run a check
	$(BIN)/pytest -q tests/deploy/test_dist.py tests/deploy/test_helm.py::test_chart_packages_into_dist_and_the_package_lints

rules: install ## Regenerate the alert rules (and the chart's dashboard copy) from deploy/prometheus/alerts.yml
	$(BIN)/python deploy/prometheus/generate.py

lock: install ## Regenerate requirements.lock from pyproject.toml (LOCK_ARGS=--upgrade moves every pin)
	$(BIN)/pip-compile --quiet --generate-hashes --strip-extras --no-emit-find-links $(LOCK_ARGS) \
	  --output-file requirements.lock pyproject.toml

test-replicas: install services ## Two replicas' canaries over five scheduled minutes, plus the kill -9 tests
	DRIFTGAUGE_E2E_CANARY_TIMES=5 $(BIN)/pytest -q -s tests/e2e/test_runs_replicas.py

try: install ## No services: a DuckDB file checked against its Parquet export, planted drift found
	$(BIN)/python deploy/examples/try/run.py

# The demos start only the stores they use: PostgreSQL and OpenSearch (no Trino download).
demo: install ## A week of the fault bench, then driftgauge serve finding the drift
	deploy/local/stack.sh start postgres opensearch
	$(BIN)/python bench/faults/demo.py $(DEMO_ARGS)

demo-backfill: install ## Night 15 repaired: plan, announce, start, verify, replay, close
	deploy/local/stack.sh start postgres
	$(BIN)/python bench/backfill/demo.py

bench: install services ## Benchmarks; results go to bench/RESULTS.md
	$(BIN)/python bench/run.py

bench-faults: install services ## The seed's nine faults on real stores; results go to bench/RESULTS.md
	$(BIN)/python bench/faults/run.py

bench-fleet: install services ## 500 checks on 3 real replicas for 12 minutes, the exporter killed (long; bench/RESULTS.md "Fleet")
	$(BIN)/python bench/fleet.py --write $(FLEET_ARGS)

# ENGINES_ARGS="--rows 100000000 --shapes clean hours --repeat 2" for the 100M figures.
bench-engines: install services ## N rows PG->Trino and PG->Spark, engine-written files, vs reladiff on Trino (long; bench/RESULTS.md "Scale")
	$(BIN)/python bench/engines.py $(ENGINES_ARGS)

bench-scale: install services ## 10M rows PG->PG and PG->OpenSearch, three drift shapes, vs reladiff (long; bench/RESULTS.md "Scale")
	$(BIN)/python bench/scale.py $(SCALE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
