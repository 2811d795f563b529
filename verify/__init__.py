"""Measured-vs-bound checks, conformance search, the ``fedverify`` command and its benchmarks.

``estimate_constants(problem)`` (exact where known, labelled estimates otherwise),
``check(algorithm, problem, trace_or_pattern, bound, seeds)`` → ``CheckResult``,
``conformance(algorithm_factory, bound)`` (a hypothesis search for a counterexample) and
``verify.strategies`` (public hypothesis strategies). ``strategies`` and ``conformance``
import hypothesis, so they load on first use.
"""
from .check import CheckResult, check
from .constants import EstimatedConstants, estimate_constants

__all__ = ["CheckResult", "EstimatedConstants", "check", "conformance", "estimate_constants", "strategies"]


def __getattr__(name):
    if name == "strategies":
        from importlib import import_module

        return import_module(".strategies", __name__)
    if name == "conformance":
        from .conformance import conformance

        return conformance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
