# Both targets create (or reuse) .venv and install what they need; torch is pinned to
# its CPU build through constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fedverify check

# two worker processes: the suite takes about half the time on a two-core machine (3 min
# instead of 5.5 quiet; 6 min instead of 9 with both cores busy)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

bench: $(STAMP)
	$(BIN)/fedverify bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
