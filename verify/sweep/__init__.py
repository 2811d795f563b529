"""Sweeps: a grid of checks and Monte-Carlo jobs, run in parallel, stored cell by cell.

* :mod:`.spec`: the spec format (what ``fedverify sweep --help`` prints; imports nothing heavy);
* :mod:`.runner`: reading a spec, its cells, running them resumably, reading the results back
  (``load_spec``, ``expand``, ``run_sweep``, ``load_results``, ...);
* :mod:`.executors`: where the cells (and ``fedverify mc``'s replicates) run: this process,
  local worker processes, or a Dask cluster.

The names of :mod:`.runner` are this package's too (``verify.sweep.run_sweep``), loaded on
first use so that importing :mod:`.spec` stays cheap.
"""
from importlib import import_module


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(import_module(".runner", __name__), name)
