# genq: `make dev` runs the whole stack locally; `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install dev test test-core chaos check format bench soak browser node-deps usechat clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev,bench]'
	touch $(STAMP)

install: $(STAMP)

## Embedded Valkey (unless GENQ_REDIS_URL is set) + gateway + demo worker; prints the URL.
dev: install
	$(BIN)/genq dev

## The whole suite, against a throwaway server (or GENQ_TEST_REDIS_URL). Three pytest-xdist
## workers (a test file stays on one, each starts its own server): most tests wait on
## processes, browsers and timers, so three at once keep two cores busy.
test: install browser node-deps usechat
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

TEST_WORKERS ?= 3

## The queue core alone.
test-core: install
	$(BIN)/pytest tests/genq

## The failover drills (pytest marker ``chaos``, left out of `make test`): a local primary,
## replica and three sentinels; the primary is SIGKILLed under load, with and without durable
## acceptance, and the accepted jobs missing afterwards are counted. About 40 s.
chaos: install
	$(BIN)/pytest -m chaos

browser:
	bash .ci/install-browser

## The npm packages the Node tests drive (the official openai package, the AI SDK's `ai`),
## pinned by tests/node/package-lock.json (Node 20+).
node-deps:
	npm ci --prefix tests/node --no-audit --no-fund

## The useChat example (examples/usechat), pinned by its lockfile and built for its browser test.
usechat:
	npm ci --prefix examples/usechat --no-audit --no-fund
	npm run build --prefix examples/usechat

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
	$(BIN)/python -m bench.fanout
	$(BIN)/python -m bench.batch

## 1,000 demo generations, 4 worker processes, one killed at random every few seconds.
soak: install
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache artifacts *.egg-info
