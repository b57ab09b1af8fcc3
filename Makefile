# The README's two commands: `make run` and `make test`. Everything they need is set up here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
REPORT ?= reports/diagnosis.html

.PHONY: install dev system-tools run test lint typecheck unit bench clean

## install: create .venv and install iogauge into it (idempotent; re-runs when pyproject changes)
install: $(VENV)/.installed $(VENV)/.accel $(VENV)/.pyc

## pip's and the build backend's output goes to $(VENV)/install.log, shown only when a step
## fails (`make run` then prints the diagnosis and the report path, not install chatter)
QUIET = >> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing iogauge into $(VENV) (log: $(VENV)/install.log)"
	@: > $(VENV)/install.log
	@$(BIN)/python -m pip install -q --upgrade pip $(QUIET)
	@$(BIN)/python -m pip install -q -e . $(QUIET)
	@touch $@

## the lab's disk models compiled with mypyc (3x faster simulation; pure Python otherwise) and
## the iostat importer's C kernels (numpy otherwise)
$(VENV)/.accel: $(VENV)/.installed scripts/build_accel.py src/iogauge/lab/hdd.py src/iogauge/lab/raid.py src/iogauge/lab/ssd.py src/iogauge/importers/iostat/kernels.c
	@$(BIN)/python scripts/build_accel.py $(QUIET)
	@touch $@

## byte-code of iogauge's modules, written as pip writes it for a regular (non-editable)
## install: without it, where PYTHONDONTWRITEBYTECODE is set, every command compiles them
## again (~0.15 s of each start-up measured for the importer alone)
$(VENV)/.pyc: $(VENV)/.installed $(shell find src -name '*.py')
	@$(BIN)/python -m compileall -q src
	@touch $@

## dev: install plus test and lint tools
dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed $(VENV)/.accel
	@$(BIN)/python -m pip install -q -e '.[dev]' $(QUIET)
	@touch $@

## system-tools: fio, sysstat and fuse3 for the end-to-end tests (installed when missing)
system-tools:
	@bash scripts/ensure-system-tools.sh

## run: live diagnosis of this machine's disks, with an HTML report in $(REPORT)
run: install
	@$(BIN)/iogauge diagnose --duration 10 --html $(REPORT)

## test: lint (ruff), types (mypy on src), then the whole test suite incl. slow e2e tests
test: dev system-tools lint typecheck unit

lint: dev
	$(BIN)/ruff check src tests benchmarks

typecheck: dev
	$(BIN)/mypy src

## unit: the unit tests on a worker per CPU (pytest-xdist; at most 4: each worker loads
## polars), then the end-to-end tests one at a time (they time real devices, cgroup throttles
## and fio; two at once would disturb each other's figures). Both parts run whatever the
## first gave; the exit status is the first failure's.
unit: dev
	rc=0; \
	$(BIN)/python -m pytest tests/unit -n auto --maxprocesses 4 || rc=$$?; \
	$(BIN)/python -m pytest tests/e2e || { e=$$?; [ $$rc -ne 0 ] || rc=$$e; }; \
	exit $$rc

## bench: the performance scripts (figures with same-run baselines)
bench: dev system-tools
	$(BIN)/python benchmarks/collector_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
