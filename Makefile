# Two commands do everything: `make serve` and `make test` (each installs what it needs).
# `make serve` installs the runtime dependencies only; `make test` adds the test extras.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: serve test test-fast lint migrate bench clean label-studio

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
	$(VENV)/bin/annoplan serve

test: $(VENV)/.test
	$(PY) -m pytest

# the suite without the slow tests (live servers, browsers, processes); CI runs everything (make test)
test-fast: $(VENV)/.test
	$(PY) -m pytest -m 'not slow'

# ruff and ruff format on the tree; mypy --strict on planner/ and service/; the import contracts (pyproject.toml)
lint: $(VENV)/.test
	$(VENV)/bin/ruff check planner service tests bench
	$(VENV)/bin/ruff format --check planner service tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

migrate: $(VENV)/.runtime
	$(VENV)/bin/annoplan migrate

bench: $(VENV)/.test
	for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Label Studio in its own virtualenv, for the README's setup and the opt-in live test
# (tests/system/test_label_studio_live.py): legacy API tokens on, webhooks to loopback allowed.
# It listens on loopback only: --internal-host is Label Studio's bind address (default 0.0.0.0);
# its --host is the public URL it writes into links, not where it listens.
LS_VENV ?= .venv-ls
LS_PORT ?= 8080
LABEL_STUDIO_USERNAME ?= admin@example.com
LABEL_STUDIO_PASSWORD ?= annoplan-ls-password
LABEL_STUDIO_TOKEN ?= annoplan-ls-token-0123456789

$(LS_VENV)/bin/label-studio:
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install -q 'label-studio==1.23.2'

label-studio: $(LS_VENV)/bin/label-studio
	LABEL_STUDIO_BASE_DATA_DIR=$(CURDIR)/.label-studio SSRF_PROTECTION_ENABLED=false \
	$(LS_VENV)/bin/label-studio start --no-browser --internal-host 127.0.0.1 --port $(LS_PORT) \
	  --username $(LABEL_STUDIO_USERNAME) --password $(LABEL_STUDIO_PASSWORD) \
	  --user-token $(LABEL_STUDIO_TOKEN) --enable-legacy-api-token

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
