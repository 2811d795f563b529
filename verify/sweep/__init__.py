"""Sweeps: a grid of checks and Monte-Carlo jobs, run in parallel, stored cell by cell.

* :mod:`.spec`: the spec format (what ``fedverify sweep --help`` prints), reading and
  validating a spec (``load_spec``, ``parse_spec``; imports nothing heavy);
* :mod:`.grid`: a spec's tables with every name checked, their sizes, their cells (``iter_cells``,
  ``expand``, ``count_cells``);
* :mod:`.cells`: a cell, its key and its computation (``Cell``, ``cell_key``, ``run_cell``);
* :mod:`.store`: the output folder: records, resuming, claims on cells (``finished_keys``);
* :mod:`.table`: the results as a table (``load_results``, ``write_table``, ``summary_table``);
* :mod:`.runner`: the run (``run_sweep``), and every name of the modules above;
* :mod:`.executors`: where the cells (and ``fedverify mc``'s replicates) run: this process,
  local worker processes, or a Dask cluster.

The names of :mod:`.runner` are this package's too (``verify.sweep.run_sweep``), loaded on
first use so that importing :mod:`.spec` stays cheap. A submodule's own name is never looked
up in :mod:`.runner`: ``from . import worst_case_cells`` in a submodule imports that submodule,
whichever module of the package is imported first.
"""
from importlib import import_module

#: The package's modules: names the import system finds as submodules.
_SUBMODULES = frozenset({"spec", "grid", "cells", "store", "table", "runner", "executors", "worst_case_cells"})


def __getattr__(name):
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(name)
    return getattr(import_module(".runner", __name__), name)
