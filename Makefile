# Every target creates or reuses the virtualenv itself: a fresh clone needs only `make demo`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing the package and its test dependencies into $(VENV) ..."
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/orchestrator plan configs/demo.toml
	$(VENV)/bin/orchestrator run configs/demo.toml
	$(VENV)/bin/orchestrator export runs/demo/default --format ai-benchmark

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) runs .pytest_cache
