# Two commands do everything: `make serve` and `make test` (each installs what it needs).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: serve test migrate bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

serve: $(VENV)/.installed
	$(VENV)/bin/alembic upgrade head
	$(PY) -m service

test: $(VENV)/.installed
	$(PY) -m pytest

migrate: $(VENV)/.installed
	$(VENV)/bin/alembic upgrade head

bench: $(VENV)/.installed
	for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
