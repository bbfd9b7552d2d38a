VENV ?= .venv
PY := $(VENV)/bin/python
CONFIG ?= config/kept.json

.PHONY: run test test-fast lint format bench clean

# The venv is rebuilt when pyproject.toml changes, so a pull that adds a
# dependency needs no manual step.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/kept run --config $(CONFIG)

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

# The edit-test loop: every test but those marked slow (no lint).
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow"

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(VENV)/.installed
	$(PY) bench/turn.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
