# genq: `make dev` runs the whole stack locally; `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install dev test test-core check format bench soak browser node-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev,bench]'
	touch $(STAMP)

install: $(STAMP)

## Embedded Valkey (unless GENQ_REDIS_URL is set) + gateway + demo worker; prints the URL.
dev: install
	$(BIN)/genq dev

## The whole suite, against a throwaway server (or GENQ_TEST_REDIS_URL). Two pytest-xdist
## workers (a test file stays on one, each starts its own server): most tests wait on
## processes, browsers and timers, so two at once halve the wall time on two cores.
test: install browser node-deps
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

TEST_WORKERS ?= 2

## The queue core alone.
test-core: install
	$(BIN)/pytest tests/genq

browser:
	bash .ci/install-browser

## The official openai npm package, pinned by tests/node/package-lock.json (Node 20+).
node-deps:
	npm ci --prefix tests/node --no-audit --no-fund

## Lint, types (mypy strict on every package) and the floors (import-linter contracts).
check: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python bench/queue.py
	$(BIN)/python bench/workers.py
	$(BIN)/python bench/fanout.py

## 1,000 demo generations, 4 worker processes, one killed at random every few seconds.
soak: install
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache artifacts *.egg-info
