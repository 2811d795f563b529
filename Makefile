# Every target creates (or reuses) .venv and installs what it needs; torch is pinned to
# its CPU build through constraints.txt. Packages are installed without byte-compiling them
# (--no-compile), and one import of the heavy ones then compiles and caches only the modules
# fedverify uses, a small part of torch's, Ray's and Flower's, before anything runs in parallel.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMMA := ,

.PHONY: run test bench clean flower

# A fresh environment with the given extras
define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e ".[$(1)]"
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -c "$(2)"
endef

WARM := import torch, scipy.stats, sympy, matplotlib.figure, participation, bounds, algorithms, verify.checking, PEPit, clarabel, cvxpy
WARM_FLOWER := $(WARM), flwr.simulation, flwr.serverapp, flwr.clientapp, ray

$(STAMP): pyproject.toml constraints.txt
	$(call install,test,$(WARM))
	touch $(STAMP)

# The same with Flower and its simulation engine (Ray), so that the Flower tests run instead of skipping
$(VENV)/.flower: pyproject.toml constraints.txt
	$(call install,test$(COMMA)flower,$(WARM_FLOWER))
	touch $(STAMP) $(VENV)/.flower

flower: $(VENV)/.flower

run: $(STAMP)
	$(BIN)/fedverify check

# two worker processes; an idle one takes over tests queued for the other. Bytecode is written
# even where the environment turns it off (PYTHONDONTWRITEBYTECODE), so that the package's
# modules are compiled once, not in every worker and subprocess, and pytest keeps its
# rewritten test modules
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --dist worksteal

bench: $(STAMP)
	$(BIN)/fedverify bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
