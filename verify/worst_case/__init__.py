"""Exact worst cases beside the bounds: performance estimation of federated methods under a
given participation trace.

For an algorithm, a trace, K, its step sizes and a theorem's function class, the worst case of
the theorem's left side at σ² = 0 is the value of a small semidefinite programme (Drori &
Teboulle, Math. Program. 145, 2014; Taylor, Hendrickx & Glineur, Math. Program. 161, 2017),
built with PEPit (Goujaud et al., Math. Program. Comput., 2024) from the algorithm's
transcription and solved with Clarabel (SCS as the alternative):

* ``transcriptions``: the algorithms over an abstract vector algebra, held equal to the engine
  (``algorithms.run``) by the tests;
* ``function_class``: the class (L-smooth clients, Δ_f with f* relaxed to the iterates, F_0,
  bounded heterogeneity);
* ``programme``: the programme, its size and predicted time, the solve (``worst_case``);
* ``conic``: the programme handed to Clarabel directly;
* ``coverage``: which theorems are covered, over which class, and why the others are not;
* ``tuning``: the step size that minimises the worst case on a trace;
* ``theorem_bounds``: a theorem's bound beside the worst case at its step sizes (``against``,
  loaded on first use: it reads the theorems' declarations).

Measured ≤ worst case ≤ bound: bound / worst case is the theorem's slack, worst case / measured
the instance's benignness; a noise-free run measuring above its certified worst case breaks an
assumption of the class.
"""
from .coverage import COVERAGE, Coverage, coverage, covered_theorems, function_class_for
from .function_class import RELAXATION, FunctionClass
from .programme import DEFAULT_SECONDS, MEASURES, SOLVERS, Size, WorstCase, active_sets, programme_size, worst_case
from .transcriptions import SUPPORTED, iterates
from .tuning import BestStep, best_step

def __getattr__(name):
    if name in ("against", "Against"):
        from . import theorem_bounds

        return getattr(theorem_bounds, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["against", "Against", "worst_case", "WorstCase", "FunctionClass", "RELAXATION", "Size", "programme_size", "active_sets",
           "SOLVERS", "MEASURES", "DEFAULT_SECONDS", "iterates", "SUPPORTED", "COVERAGE", "Coverage", "coverage",
           "covered_theorems", "function_class_for", "best_step", "BestStep"]
