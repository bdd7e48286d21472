# Every target installs what it needs into .venv first (nothing by hand on a fresh machine).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CTXSIM := $(VENV)/bin/ctxsim
STAMP  := $(VENV)/.installed
LOCK   := requirements/lock.txt
WORKERS ?= 2

.PHONY: help install test test-deep bench engine-hashes demo sweep example calibration lint lock wheel-check clean

help:
	@echo "make test       run the test suite (creates .venv and installs ctxsim[dev] first)"
	@echo "make demo       generate the default traces, compare all strategies, write reports/demo/"
	@echo "make sweep      which NovaCode thresholds to ship, on 30 synthetic sessions per window and the bundled real logs (sweeps/thresholds.toml); report in reports/sweep/"
	@echo "make bench      speed benchmarks (pytest-benchmark, tests/bench/), runs per minute of a population sweep local and on Dask"
	@echo "make engine-hashes  rewrite tests/data/engine_hashes*.json (the engine identity check) after a change that moves numbers"
	@echo "make test-deep  the property suite with the long hypothesis profile"
	@echo "make example    regenerate the checked-in example report (reports/example/)"
	@echo "make calibration  refit the simulated summariser and the recovery model on real compactions (CALIBRATION_LOGS=folder; harness/data/summary_survival.json, recovery.json)"
	@echo "make lint       ruff"
	@echo "make lock       rewrite requirements/lock.txt from .venv (after changing pyproject.toml's dependencies)"
	@echo "make wheel-check  build the wheel, install it in a fresh venv outside the checkout, run ctxsim there"

# the exact versions of requirements/lock.txt (constraints: only what ctxsim[dev] needs is installed)
$(STAMP): pyproject.toml setup.py $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(LOCK) -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -n $(WORKERS) -p no:cacheprovider tests --ignore=tests/bench

test-deep: $(STAMP)
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -p no:cacheprovider tests --ignore=tests/bench

bench: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider tests/bench --benchmark-enable --benchmark-only --benchmark-sort=name

engine-hashes: $(STAMP)
	$(PY) -m tests.tools.engine_hashes --write
	$(PY) -m tests.tools.engine_hashes --full --write

demo: $(STAMP)
	$(CTXSIM) sweep sweeps/demo.toml --out reports/demo/results --workers $(WORKERS)
	$(CTXSIM) report reports/demo/results --out reports/demo --target 0.5 --title "ctxsim demo: every strategy on long-200k"
	@echo "open reports/demo/index.html (or read reports/demo/report.md)"

# the bundled real logs that reach a 200k window (../shared/traces/real/README.md): read in place, imported
# under reports/sweep/real (ignored by git), run beside the synthetic population at 200k
REAL_LOGS := ../shared/traces/real/claude-code
REAL_SESSIONS := spotter/258c7280-ae70-4798-800f-63464d01a85d spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04 codemie/session-624a4a58

sweep: $(STAMP)
	mkdir -p reports/sweep/real
	for s in $(REAL_SESSIONS); do f=reports/sweep/real/$$(basename $$s).jsonl; test -f $$f || \
	  $(CTXSIM) import claude-code $(REAL_LOGS)/$$s.jsonl -o $$f > /dev/null || exit 1; done
	$(CTXSIM) sweep sweeps/thresholds.toml --out reports/sweep/results --workers $(WORKERS) --with 200000=reports/sweep/real
	$(CTXSIM) report reports/sweep/results --out reports/sweep --target 0.5

example: $(STAMP)
	rm -rf reports/example
	$(CTXSIM) sweep sweeps/example.toml --out reports/example/results --workers $(WORKERS) --no-progress
	$(CTXSIM) report reports/example/results --out reports/example --target 0.5 --title "ctxsim example report"
	rm -rf reports/example/results

# the committed data files are fitted on the development population (../shared/population/README.md:
# lay the logs out, import them, then make calibration CALIBRATION_LOGS=that folder); with none given,
# the bundled real logs (3 compactions)
CALIBRATION_LOGS ?=
calibration: $(STAMP)
	$(CTXSIM) calibrate-summariser $(CALIBRATION_LOGS)
	$(CTXSIM) calibrate-recovery $(CALIBRATION_LOGS)

lock: $(STAMP)
	$(PY) -m pip install -q -e '.[dev]'
	{ sed -n '1,2p' $(LOCK); $(PY) -m pip freeze --exclude-editable | grep -v '^#'; } > $(LOCK).new && mv $(LOCK).new $(LOCK)

wheel-check:
	PYTHON=$(PYTHON) .ci/wheel-check

lint: $(STAMP)
	$(VENV)/bin/ruff check harness strategies tests

clean:
	rm -rf reports/demo reports/sweep .pytest_cache
