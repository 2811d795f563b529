"""The worst case of a federated algorithm on one participation trace: a performance-estimation
programme (Drori & Teboulle, Math. Program. 145, 2014; Taylor, Hendrickx & Glineur, Math.
Program. 161, 2017), built with PEPit (Goujaud et al., Math. Program. Comput., 2024) from the
algorithm's transcription (``verify.worst_case.transcriptions``) and solved as a semidefinite
programme.

The programme: N L-smooth clients f_i of the :class:`FunctionClass` and a start x_0; the
algorithm is run on their gradients along the trace's active sets S_0, …, S_{T−1}; every f_i
is also evaluated at every global iterate x_t, so that f(x_t) = (1/N) Σ_i f_i(x_t) and
∇f(x_t) are available. The performance measure is the theorem's left side at σ² = 0:

    "average":  (1/T) Σ_{t=0}^{T−1} ‖∇f(x_t)‖²   (FedSUM Thm 4.1, eq. (12); Server momentum Ḡ of one stage)
    "min":      min_{0≤t≤T} ‖∇f(x_t)‖²            (the measure of the known gradient-descent rates)

maximised over the class. PEPit returns the dual value, a certified upper bound up to the
solver's accuracy; the primal value is an instance's (a lower bound); their relative
difference is reported as ``accuracy``. The programme is dimension-free: its value bounds
runs on problems of every dimension.

PEPit, cvxpy and the solvers load only when a programme is solved.
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field

import numpy as np

from participation import Trace
from participation.budget import positive_setting

from .conic import solve_clarabel
from .function_class import RELAXATION, FunctionClass
from .transcriptions import SUPPORTED, iterates

__all__ = ["WorstCase", "worst_case", "Size", "programme_size", "SOLVERS", "MEASURES", "active_sets",
           "DEFAULT_SECONDS"]

#: Clarabel (an interior-point method) by default; SCS (first-order, through cvxpy) as the
#: alternative. SCS stops at a looser accuracy, and on an unbounded programme (a class without
#: F_0 or σ_g² under partial participation) it can report "optimal" with a finite value:
#: Clarabel reports those as unbounded, so a value from SCS is worth checking against Clarabel.
SOLVERS = ("clarabel", "scs")
MEASURES = ("average", "min")
#: Solves predicted to take longer than this many seconds are refused before any work
#: (``FEDVERIFY_WORST_CASE_SECONDS`` overrides it, ``max_seconds=`` too).
DEFAULT_SECONDS = 120.0
#: Relative duality gap above which a result is reported as inaccurate.
ACCURACY = 1e-5
#: A worst case above this multiple of the class's scale L·Δ_f + F_0 + ζ² is not certified: the
#: solver's tolerances (1e-6 on data of order one) no longer resolve it.
RELIABLE_RANGE = 1e6


def _class_scale(fc: FunctionClass) -> float:
    return fc.L * fc.delta_f + (fc.F0 or 0.0) + (fc.heterogeneity or 0.0)


@dataclass(frozen=True)
class WorstCase:
    """The worst case of ``measure`` over ``function_class`` for ``algorithm`` on one trace.

    ``value``: the certified (dual) value, None when the programme is unbounded (status
    "unbounded"; a class with F_0 is never unbounded, so that answer is refused as a solver
    failure) or certifies nothing (status "unreliable": a value beyond ``RELIABLE_RANGE`` times
    the class's scale, kept for reading but with no accuracy); ``primal``:
    the value of the worst instance found; ``status``: the solver's status ("optimal",
    "optimal_inaccurate", "unbounded", …); ``accuracy``: |value − primal| / max(1, |value|);
    ``relaxation``: how the programme's class contains the theorem's."""

    value: float | None
    primal: float | None
    status: str
    solver: str
    accuracy: float | None
    algorithm: str
    hparams: dict
    measure: str
    function_class: FunctionClass
    n_clients: int
    rounds: int
    size: "Size"
    seconds: float
    relaxation: str = RELAXATION
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """A finite value the solver reached accurately."""
        return (self.value is not None and self.status == "optimal"
                and self.accuracy is not None and self.accuracy <= ACCURACY)

    def as_dict(self) -> dict:
        return {"worst_case": self.value, "primal": self.primal, "status": self.status, "solver": self.solver,
                "accuracy": self.accuracy, "algorithm": self.algorithm, "hparams": self.hparams,
                "measure": self.measure, "class": self.function_class.as_dict(),
                "class_description": self.function_class.describe(), "relaxation": self.relaxation,
                "n_clients": self.n_clients, "rounds": self.rounds, "gram_size": self.size.gram,
                "constraints": self.size.constraints, "seconds": self.seconds, "notes": list(self.notes)}


@dataclass(frozen=True)
class Size:
    """The programme's Gram matrix side and scalar constraints, and the predicted solve time."""

    gram: int
    constraints: int
    seconds: float


def active_sets(trace, n_clients: int | None = None) -> tuple[list[list[int]], int]:
    """(S_0, …, S_{T−1}, N) of a ``participation.Trace``, a (T, N) 0/1 array, or a list of
    active-id lists with ``n_clients``."""
    if isinstance(trace, Trace):
        mask = trace.mask
    elif isinstance(trace, np.ndarray) and trace.ndim == 2:
        mask = Trace(trace).mask
    else:
        if n_clients is None:
            raise ValueError("a trace given as active sets needs n_clients")
        mask = Trace.from_sets(list(trace), n_clients).mask
    if n_clients is not None and mask.shape[1] != n_clients:
        raise ValueError(f"trace has {mask.shape[1]} clients, expected {n_clients}")
    return [np.flatnonzero(row).tolist() for row in mask], int(mask.shape[1])


def _local_points(name: str, local_steps: int) -> int:
    """Gradient points a participating client adds beyond the global iterate."""
    return 0 if name == "fedsum-b" else local_steps - 1


def programme_size(name: str, sets, n_clients: int, local_steps: int) -> Size:
    """The size of the programme of ``name`` on ``sets`` before building it, and its predicted
    time to build and solve it with Clarabel:

        seconds ≈ 3.7·10⁻⁷ · constraints · gram^2.5

    (an interior-point iteration factors a system in the gram(gram+1)/2 entries of the Gram
    matrix against the scalar constraints); the factor is fitted to Clarabel's solves of FedSUM-B
    and FedSUM programmes (``fedverify bench`` measures them)."""
    per_client = np.full(n_clients, len(sets) + 1, dtype=np.int64)
    extra = _local_points(name, local_steps)
    for s in sets:
        per_client[list(s)] += extra
    gram = 1 + int(per_client.sum())
    constraints = int((per_client * (per_client - 1)).sum()) + len(sets) + 2
    seconds = 3.7e-7 * constraints * gram ** 2.5
    return Size(gram=gram, constraints=constraints, seconds=float(seconds))


def _limit(max_seconds) -> float:
    """The solve time a programme may be predicted to take: ``max_seconds`` (``math.inf``: no limit), else
    ``FEDVERIFY_WORST_CASE_SECONDS``, else :data:`DEFAULT_SECONDS`."""
    if max_seconds is not None:                    # math.inf: no limit
        if isinstance(max_seconds, bool) or not isinstance(max_seconds, numbers.Real) or not max_seconds > 0:
            raise ValueError(f"max_seconds must be a number > 0 (math.inf for no limit), got {max_seconds!r}")
        return float(max_seconds)
    value = positive_setting("FEDVERIFY_WORST_CASE_SECONDS", "seconds")
    return DEFAULT_SECONDS if value is None else value


def _check_algorithm(algorithm) -> None:
    from algorithms import Algorithm

    if not isinstance(algorithm, Algorithm):
        raise ValueError(f"algorithm must be an algorithms.Algorithm (algorithms.get), got {type(algorithm).__name__}")
    if algorithm.name not in SUPPORTED:
        raise ValueError(f"no worst case for {algorithm.name!r}: the engine transcribes {', '.join(SUPPORTED)}")


def worst_case(algorithm, trace, function_class: FunctionClass, *, measure: str = "average",
               solver: str = "clarabel", max_seconds: float | None = None, n_clients: int | None = None) -> WorstCase:
    """The worst case of ``measure`` over ``function_class`` for ``algorithm`` (its own η_l, η_g,
    K) along ``trace`` (a Trace, a (T, N) mask, or active sets with ``n_clients``).

    A programme predicted to take longer than ``max_seconds`` (default 120 s or
    ``FEDVERIFY_WORST_CASE_SECONDS``) is refused before it is built; an unbounded programme
    gives ``value=None`` with status "unbounded"; a solver failure is a ValueError naming the
    solver and what it said."""
    _check_algorithm(algorithm)
    if not isinstance(function_class, FunctionClass):
        raise ValueError(f"function_class must be a FunctionClass, got {type(function_class).__name__}")
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")
    solver_key = str(solver).lower()
    if solver_key not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    sets, n = active_sets(trace, n_clients)
    if not sets:
        raise ValueError("the trace has no rounds; a worst case needs T >= 1")
    size = programme_size(algorithm.name, sets, n, algorithm.local_steps)
    limit = _limit(max_seconds)
    if size.seconds > limit:
        raise ValueError(f"the worst-case programme of {algorithm.name} with N={n}, T={len(sets)}, "
                         f"K={algorithm.local_steps} ({size.gram}x{size.gram} Gram matrix, {size.constraints} constraints) "
                         f"would take about {size.seconds:.0f} s, above the limit of {limit:.0f} s "
                         "(FEDVERIFY_WORST_CASE_SECONDS); choose a shorter trace or fewer clients")
    start = time.perf_counter()
    pep, notes = _build(algorithm, sets, n, function_class, measure)
    value, primal, status, name = _solve(pep, solver_key)
    seconds = time.perf_counter() - start
    accuracy = None
    if value is not None and primal is not None:
        accuracy = abs(value - primal) / max(1.0, abs(value))
        if value > RELIABLE_RANGE * _class_scale(function_class):
            status, accuracy = "unreliable", None
            notes = notes + [f"the worst case {value:.3g} is more than {RELIABLE_RANGE:.0e} times the class's scale "
                             f"L·Δ_f + F_0 + ζ² = {_class_scale(function_class):.3g}: the programme's numbers span "
                             "more orders of magnitude than the solver's tolerances resolve, so the value certifies "
                             "nothing (large step sizes make the iterates grow geometrically)"]
    if status == "unbounded" and function_class.F0 is not None:
        raise ValueError(f"the {name} solver reported the programme unbounded, which a class with F_0 cannot be (its "
                         "worst case is finite on a finite trace): a numerical failure, no worst case is reported")
    return WorstCase(value=value, primal=primal, status=status, solver=name, accuracy=accuracy,
                     algorithm=algorithm.name, hparams=dict(algorithm.hparams), measure=measure,
                     function_class=function_class, n_clients=n, rounds=len(sets), size=size, seconds=seconds,
                     notes=tuple(notes))


def _build(algorithm, sets, n, fc: FunctionClass, measure: str):
    from PEPit import PEP
    from PEPit.functions import SmoothFunction

    pep = PEP()
    clients = [pep.declare_function(SmoothFunction, L=fc.L) for _ in range(n)]
    x0 = pep.set_initial_point()
    xs = iterates(algorithm, sets, lambda i, x: clients[i].gradient(x), x0, n)
    grads, values = [], []
    for x in xs:
        oracles = [f.oracle(x) for f in clients]
        g = oracles[0][0]
        v = oracles[0][1]
        for gi, vi in oracles[1:]:
            g, v = g + gi, v + vi
        grads.append((g * (1.0 / n), [gi for gi, _ in oracles]))
        values.append(v * (1.0 / n))
    T = len(sets)
    if measure == "average":
        total = grads[0][0] ** 2
        for gbar, _ in grads[1:T]:
            total = total + gbar ** 2
        pep.set_performance_metric(total * (1.0 / T))
    else:
        for gbar, _ in grads:
            pep.set_performance_metric(gbar ** 2)
    for t in range(1, T + 1):
        pep.set_initial_condition(values[0] - values[t] <= fc.delta_f)
    notes = []
    if fc.F0 is not None:
        first = grads[0][1]
        total = first[0] ** 2
        for gi in first[1:]:
            total = total + gi ** 2
        pep.set_initial_condition(total * (1.0 / n) <= fc.F0)
    if fc.heterogeneity is not None:
        for gbar, each in grads:
            total = (each[0] - gbar) ** 2
            for gi in each[1:]:
                total = total + (gi - gbar) ** 2
            pep.add_constraint(total * (1.0 / n) <= fc.heterogeneity)
        notes.append("heterogeneity bounded at the global iterates only (a relaxation of the class)")
    return pep, notes


def _solve(pep, solver: str):
    """(dual value, primal value, status, solver name); value None when unbounded."""
    name = solver.upper()
    if solver == "clarabel":
        pep._prepare_constraints(verbose=0)
        value, primal, status = solve_clarabel(pep)
        if status == "infeasible":
            raise ValueError("the worst-case programme is infeasible (CLARABEL); the class admits no function")
        if status not in ("optimal", "optimal_inaccurate", "unbounded"):
            raise ValueError(f"the CLARABEL solver stopped without a solution ({status}); no worst case is reported "
                             "(try solver='scs')")
        return value, primal, status, name
    import cvxpy

    try:
        value = pep.solve(wrapper="cvxpy", solver=name, verbose=0)
    except cvxpy.error.SolverError as err:
        raise ValueError(f"the {name} solver failed on the worst-case programme: {str(err).splitlines()[0]}") from None
    status = str(pep.wrapper.prob.status)
    if value is None or status in ("unbounded", "unbounded_inaccurate", "infeasible_or_unbounded"):
        return None, None, "unbounded", name
    if status in ("infeasible", "infeasible_inaccurate"):
        raise ValueError(f"the worst-case programme is infeasible ({name}: {status}); the class admits no function")
    primal = float(pep.objective.eval())
    value = float(value)
    if not (math.isfinite(value) and math.isfinite(primal)):
        return None, None, "unbounded", name
    return value, primal, status, name
