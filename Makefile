# One entry point for contributors: each target bootstraps what it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: chromium serve test lint typecheck pytest bench bench-vector bench-locomo bench-journal bench-hub bench-replication bench-http bench-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py $(wildcard memstore/*.c memstore/*.h) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,bench,embed,http,langgraph,mcp,server,postgres]'
	touch $(STAMP)

## serve: MemoryProtocol 0.1 on 127.0.0.1:8080 over ./data (prints a token on first start).
serve: $(STAMP)
	$(BIN)/memstore serve --data data

## test: lint, type-check and run the whole test suite (doctests included).
test: chromium lint typecheck pytest

## chromium: Debian's Chromium for the inspector's browser tests (tests/ui), when missing.
## Playwright drives this system Chromium; it never downloads a browser of its own.
## Where apt-get cannot run (no Debian, not root) it says so and the browser tests skip.
CHROMIUM ?= $(or $(MEMSTORE_CHROMIUM),/usr/bin/chromium)
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update && apt-get install -y chromium; \
	else \
		echo "make chromium: no $(CHROMIUM), and apt-get cannot install it here (no apt-get, or not root): the browser tests (tests/ui) will skip. Install Chromium and set MEMSTORE_CHROMIUM to run them."; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check memstore memstore_index memstore_hub tests benchmarks examples scripts
	$(BIN)/ruff format --check memstore memstore_index memstore_hub tests benchmarks examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy --strict memstore memstore_index memstore_hub

## pytest: the suite in PYTEST_WORKERS processes (pytest-xdist; 0 runs it in this one).
## Many tests wait on servers and child processes: two workers halve the wall time on two cores.
## The packages are byte-compiled first: hundreds of tests start a child Python (the CLI, the
## servers), and where PYTHONDONTWRITEBYTECODE is set each child would compile all of memstore
## from source again (~0.25 s a child on a slow two-core machine; the CLI tests run ~16% faster).
PYTEST_WORKERS ?= 2
pytest: $(STAMP)
	$(BIN)/python -m compileall -q memstore memstore_index memstore_hub
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) README.md docs tests memstore memstore_index memstore_hub

## bench: the full lexical benchmark (1k, 10k, 100k items; several minutes).
bench: $(STAMP)
	$(BIN)/python benchmarks/lexical.py

## bench-vector: CellStore against raw hnswlib and a flat scan (10k, 100k; ~10 minutes).
bench-vector: $(STAMP)
	$(BIN)/python benchmarks/vector.py

## bench-locomo: retrieval quality on the LoCoMo development conversations.
LOCOMO ?= ../shared/datasets/locomo/dev.json
bench-locomo: $(STAMP)
	$(BIN)/python benchmarks/locomo.py --data $(LOCOMO)

## bench-journal: durable writes, batches, restore and as_of on the SQLite journal.
bench-journal: $(STAMP)
	$(BIN)/python benchmarks/journal.py

## bench-hub: the change hub: publish and delivery throughput, fan-out latency (~3 minutes).
bench-hub: $(STAMP)
	$(BIN)/python benchmarks/hub.py

## bench-replication: writes to PostgreSQL, replication lag and catch-up (needs a server;
## MEMSTORE_TEST_PG_DSN, default postgresql://postgres@127.0.0.1:5432/test; several minutes).
bench-replication: $(STAMP)
	$(BIN)/python benchmarks/replication.py

## bench-http: the HTTP server under load (concurrency 32, 10k chunks; hash and local model).
bench-http: $(STAMP)
	$(BIN)/python benchmarks/http.py

## bench-smoke: the same scripts on tiny inputs, as CI runs them.
bench-smoke: $(STAMP)
	$(BIN)/python benchmarks/lexical.py --smoke
	$(BIN)/python benchmarks/hub.py --smoke
	$(BIN)/python benchmarks/http.py --smoke --out /tmp/memstore-http-smoke.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build memstore/_speedups.*.so
