# Quick start: `make demo` and `make test` on a fresh machine (see README).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hexamer-installed

.PHONY: setup test test-all demo lint bench-tokenizer bench-quick clean

$(STAMP): pyproject.toml constraints/cpu.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints/cpu.txt -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

test: setup
	$(PY) -m ruff check hexamer tests scripts
	$(PY) -m pytest -q

test-all: setup
	$(PY) -m pytest -q -m ''

demo: setup
	$(VENV)/bin/hexamer demo

lint: setup
	$(PY) -m ruff check hexamer tests scripts
	$(PY) -m ruff format --check hexamer tests scripts

bench-tokenizer: setup
	$(VENV)/bin/hexamer bench tokenizer

bench-quick: setup
	$(VENV)/bin/hexamer bench all --quick --out bench-results

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
