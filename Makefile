# Every target creates (or reuses) .venv and installs what it needs; torch is pinned to
# its CPU build through constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean flower

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $(STAMP)

# Flower with its simulation engine (Ray), so that the Flower tests run instead of skipping
$(VENV)/.flower: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,flower]"
	touch $(VENV)/.flower

flower: $(VENV)/.flower

run: $(STAMP)
	$(BIN)/fedverify check

# two worker processes: the suite runs about twice as fast on a two-core machine
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

bench: $(STAMP)
	$(BIN)/fedverify bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
