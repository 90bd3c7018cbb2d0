# genq: `make dev` runs the whole stack locally; `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install dev test test-core check format bench soak browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

## Embedded Valkey (unless GENQ_REDIS_URL is set) + gateway + demo worker; prints the URL.
dev: install
	$(BIN)/genq dev

## The whole suite, against a throwaway server (or GENQ_TEST_REDIS_URL).
test: install browser
	$(BIN)/pytest

## The queue core alone.
test-core: install
	$(BIN)/pytest tests/genq

browser:
	bash .ci/install-browser

check: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

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
