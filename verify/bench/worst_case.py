"""The bench rows of worst cases: one performance-estimation programme (``verify.worst_case``)
solved by handing it to Clarabel directly (``verify.worst_case.conic``) against PEPit's own
cvxpy path with the same solver (``pep.solve(wrapper="cvxpy", solver="CLARABEL")``), on the
same programme, at several sizes: T, N and K varied one at a time around N = 3, K = 2, T = 8
for FedSUM-B and FedSUM (FedSUM arXiv:2512.18275, Algorithms 1–2), on P1 with ⌊2N/3⌋ clients a
round (seed 0), over FedSUM Thm 4.1's class (L = Δ_f = F_0 = 1) at η_l = 0.03, η_g = 0.6.

Each side builds the programme from the algorithm and solves it; the row's note gives both
times, the predicted time (``programme_size``), the programme's size and both values, which
agree to the solvers' accuracy: the ratio is one of equal work.
"""
from __future__ import annotations

import time
import warnings

from participation import preset

from .rows import Ratio
from ..worst_case import FunctionClass, active_sets, programme_size, worst_case
from ..worst_case.programme import _build
from ..worst_case.theorem_bounds import default_per_round

__all__ = ["SIZES", "QUICK_SIZES", "worst_case_row", "worst_case_ratios"]

#: (algorithm, N, K, T) of the full bench: T, N, K each varied around (3, 2, 8).
SIZES = tuple((name, n, k, t) for name in ("fedsum-b", "fedsum")
              for n, k, t in ((3, 2, 4), (3, 2, 8), (3, 2, 12), (2, 2, 8), (4, 2, 8), (3, 1, 8), (3, 3, 8)))
#: Those of ``--quick``.
QUICK_SIZES = (("fedsum-b", 3, 2, 4), ("fedsum", 2, 1, 4))


def _timed(fn):
    best, out = float("inf"), None
    for _ in range(2):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
        if best > 2.0:
            break
    return best, out


def worst_case_row(name: str, n_clients: int, local_steps: int, rounds: int):
    """One row: the worst case of ``name`` at (N, K, T), direct Clarabel against PEPit's cvxpy path."""
    import algorithms

    trace = preset("P1", n_clients=n_clients, per_round=default_per_round(n_clients)).sample(rounds, seed=0)
    alg = algorithms.get(name, eta_l=0.03, eta_g=0.6, local_steps=local_steps)
    fc = FunctionClass(1.0, 1.0, F0=1.0)
    sets, n = active_sets(trace)
    size = programme_size(name, sets, n, local_steps)

    def cvxpy_path():
        pep, _ = _build(alg, sets, n, fc, "average")
        return pep.solve(wrapper="cvxpy", solver="CLARABEL", verbose=0)

    direct, result = _timed(lambda: worst_case(alg, trace, fc, max_seconds=1e6))
    slow, value = _timed(cvxpy_path)
    note = (f"Gram {size.gram}x{size.gram}, {size.constraints} constraints; predicted {size.seconds:.2f} s; "
            f"worst case {result.value:.6g} (direct, {result.status}) and {float(value):.6g} (cvxpy)")
    return Ratio(f"worst case, {name} N={n_clients} K={local_steps} T={rounds}",
                 f"PEP of {name} on P1 ({default_per_round(n_clients)} of {n_clients}), FedSUM Thm 4.1 class",
                 slow, direct, baseline="PEPit cvxpy+Clarabel", note=note)


def worst_case_ratios(quick: bool = False) -> list:
    """The worst-case rows (``quick``: two small programmes), after one tiny programme on each path
    so that no row pays for loading PEPit, cvxpy or Clarabel. The cvxpy path's warnings (an
    inaccurate solution) are kept out of the bench's output; the note shows both values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        worst_case_row("fedsum-b", 2, 1, 2)
        return [worst_case_row(*size) for size in (QUICK_SIZES if quick else SIZES)]
