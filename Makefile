# Two commands do everything: `make serve` and `make test` (each installs what it needs).
# `make serve` installs the runtime dependencies only; `make test` adds the test extras.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: serve test lint migrate bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.runtime

serve: $(VENV)/.runtime
	$(VENV)/bin/alembic upgrade head
	$(PY) -m service

test: $(VENV)/.test
	$(PY) -m pytest

# ruff on what is lint-clean today (service/ and the service/system tests join once they are)
lint: $(VENV)/.test
	$(VENV)/bin/ruff check planner tests/planner bench
	$(VENV)/bin/mypy

migrate: $(VENV)/.runtime
	$(VENV)/bin/alembic upgrade head

bench: $(VENV)/.test
	for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
