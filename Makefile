# Every target creates or reuses the virtualenv itself: a fresh clone needs only `make demo`.
SHELL       := bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# pip on these machines warns about configured local indexes that do not exist; hide only that.
QUIET_PIP := sed -u '/is ignored: it is neither a file nor a directory/d'

# The local model's llama.cpp: "portable" runs on any x86-64 CPU with AVX2, AMX included;
# "native" is tuned for this CPU alone (make llama LLAMA_BUILD=native). docs/local-model.md.
LLAMA_BUILD ?= portable
ifeq ($(filter $(LLAMA_BUILD),portable native),)
$(error LLAMA_BUILD is "$(LLAMA_BUILD)": it must be portable or native)
endif
LLAMA := $(PY) orchestrator/serving/llama_build.py $(if $(filter native,$(LLAMA_BUILD)),--native,)

.PHONY: demo test test-all check bench llama clean

$(STAMP): pyproject.toml orchestrator/serving/llama_build.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== installing into $(VENV); the first time, llama-cpp-python compiles from source (about 5 minutes on 2 cores) =="
	$(PY) -m pip install --upgrade pip 2>&1 | $(QUIET_PIP)
	@# llama.cpp first, built for any x86-64 CPU: the project's install then finds it in place
	$(LLAMA) 2>&1 | $(QUIET_PIP)
	$(PY) -m pip install --progress-bar off -e '.[dev,local,ray,inspect]' 2>&1 | $(QUIET_PIP)
	@touch $@

# Rebuild llama.cpp with other flags (LLAMA_BUILD=native|portable); a build made before with the
# same flags is reused from $(VENV)/llama-wheels, never one from pip's cache.
llama: $(STAMP)
	$(LLAMA) 2>&1 | $(QUIET_PIP)

demo: $(STAMP)
	$(VENV)/bin/orchestrator plan configs/demo.toml
	$(VENV)/bin/orchestrator run configs/demo.toml
	$(VENV)/bin/orchestrator export runs/demo/default --format ai-benchmark
	$(VENV)/bin/orchestrator analyze runs/demo/default
	$(VENV)/bin/orchestrator report runs/demo/default

# The fast tier, a developer's loop (a few minutes): every test but those that run the local
# model, a Ray cluster, a browser, a wheel build or a long end-to-end run (pyproject's markers).
FAST := not (local_model or ray or browser or wheel or slow)
test: $(STAMP)
	$(PY) -m pytest -q -m "$(FAST)" --durations=10

# Everything, as CI runs it.
test-all: $(STAMP)
	$(PY) -m pytest -q --durations=25

# Lint, format, the layer contract, types and the docs site. mypy's errors of today are in
# .ci/mypy-baseline.txt: a new one fails here; after fixing some, shrink the baseline:
# .venv/bin/mypy | .venv/bin/mypy-baseline sync
check: $(STAMP)
	$(VENV)/bin/ruff check orchestrator tests docs
	$(VENV)/bin/ruff format --check orchestrator tests docs
	$(VENV)/bin/lint-imports --no-cache
	$(PY) docs/hooks.py --check
	$(VENV)/bin/mkdocs build --strict --quiet
	@# mypy exits 1 for type errors (the baseline judges them), 2 when it could not check at all
	$(VENV)/bin/mypy > .mypy.out; status=$$?; if [ $$status -gt 1 ]; then cat .mypy.out; exit $$status; fi
	$(VENV)/bin/mypy-baseline filter --hide-stats --no-colors < .mypy.out

bench: $(STAMP)
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) runs site .mypy.out .pytest_cache .mypy_cache .ruff_cache
