"""Measured-vs-bound checks, conformance search, the ``fedverify`` command and its benchmarks.

``estimate_constants(problem)`` (exact where known, labelled estimates otherwise),
``check(algorithm, problem, trace_or_pattern, theorem, seeds)`` → ``CheckResult``,
``conformance(algorithm_factory, bound)`` (a hypothesis search for a counterexample) and
``verify.strategies`` (public hypothesis strategies). Every theorem of the four papers is a
``verify.theorems.Theorem`` (what it measures, for whom, at which step sizes, with which
constants); ``user_theorem`` makes one of the user's own. ``RunRecorder`` writes a run made
anywhere as a run record (``ModelMeasure`` and ``StepWeightedAverage`` measure what it needs
on a PyTorch model), ``load_record`` reads one, ``check_run(records, theorem)`` judges it.

The subpackages: ``verify.cli`` (the ``fedverify`` command, one module per command),
``verify.theorems`` (the declarations, their plans and the one judge), ``verify.records`` (run
records, their checks, Flower), ``verify.studies`` (the experiments), ``verify.worst_case`` (the
exact worst case by performance estimation), ``verify.sweep`` (grids of checks and Monte-Carlo
jobs, and where they run) and ``verify.bench`` (``fedverify bench``); the rest of ``verify`` is
the library they share.

Each public name means one thing: ``verify.check`` and ``verify.conformance`` are the
functions (defined in ``verify.checking`` and ``verify.counterexamples``, modules of other
names, so that importing a module never rebinds them). They load on first use, so that
``fedverify --help`` does not import torch, sympy or hypothesis.
"""
from importlib import import_module

#: Public name → the module that defines it.
_HOMES = {
    "check": "checking", "check_many": "checking", "CheckResult": "checking", "covered_algorithms": "checking",
    "estimate_constants": "constants", "EstimatedConstants": "constants",
    "conformance": "counterexamples", "ConformanceResult": "counterexamples",
    "Theorem": "theorems", "user_theorem": "theorems",
    "check_run": "records.checks", "RunRecorder": "records", "load_record": "records",
    "ModelMeasure": "records.model_measures", "StepWeightedAverage": "records.model_measures",
}

__all__ = sorted(_HOMES) + ["strategies"]


def __getattr__(name):
    if name == "strategies":
        return import_module(".strategies", __name__)
    if name in _HOMES:
        value = getattr(import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
