"""A PEPit programme handed straight to Clarabel as a conic problem.

After ``PEP._prepare_constraints`` a PEPit programme is: maximise τ over a Gram matrix G ⪰ 0 and
function values F, subject to scalar constraints Tr(A_k G) + a_kᵀF + c_k ≤ 0 (or = 0), each
read with PEPit's ``expression_to_sparse_matrices``. Clarabel takes
min qᵀx s.t. Ax + s = b, s ∈ K with x = (svec(G), F), svec the packed upper triangle of G,
column-major, off-diagonal entries scaled by √2 (Clarabel's ``PSDTriangleConeT``).

Building the sparse problem here instead of through cvxpy leaves the same programme and the
same interior-point solver, without cvxpy's canonicalisation, which costs more than the solve
on these programmes. The returned value is −(Clarabel's dual objective): an upper bound on the
maximum up to the solver's dual feasibility, as PEPit's own dual value is.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["solve_clarabel"]

SQRT2 = math.sqrt(2.0)
#: Clarabel's stopping tolerance on the duality gap (absolute and relative) and the residuals.
TOLERANCE = 1e-6


def _svec_index(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Position of entry (i, j), i ≤ j, in the packed upper triangle, column-major."""
    return j * (j + 1) // 2 + i


def solve_clarabel(pep, *, max_iter: int = 200) -> tuple[float | None, float | None, str]:
    """(upper value, primal value, status) of a prepared PEPit programme, solved with Clarabel.
    Status: "optimal", "optimal_inaccurate", "unbounded", "infeasible" or Clarabel's own word
    for a solve that reached no solution ("NumericalError", "MaxIterations", …), whose values are
    None: its iterate certifies no bound."""
    import clarabel
    import scipy.sparse as sp
    from PEPit.expression import Expression
    from PEPit.point import Point
    from PEPit.tools.expressions_to_matrices import expression_to_sparse_matrices

    n, nf = Point.counter, Expression.counter
    nsvec = n * (n + 1) // 2
    nvar = nsvec + nf
    rows, cols, vals, b = [], [], [], []
    eq_rows, ineq_rows = [], []
    for constraint in pep._list_of_prepared_constraints:
        gi, gj, gv, fi, fv, const = expression_to_sparse_matrices(constraint.expression)
        gi, gj = np.asarray(gi, dtype=np.int64), np.asarray(gj, dtype=np.int64)
        lo, hi = np.minimum(gi, gj), np.maximum(gi, gj)
        gv = np.asarray(gv, dtype=np.float64)
        # Tr(A G) with A symmetric, entry (i, j) and (j, i) of weight w each: 2w G_ij = √2 w svec_ij
        coef = np.where(lo == hi, gv, gv * SQRT2)
        row = len(b)
        rows.append(np.full(len(lo) + len(fi), row))
        cols.append(np.concatenate([_svec_index(lo, hi), nsvec + np.asarray(fi, dtype=np.int64)]))
        vals.append(np.concatenate([coef, np.asarray(fv, dtype=np.float64)]))
        b.append(-float(const))
        (eq_rows if constraint.equality_or_inequality == "equality" else ineq_rows).append(row)
    m = len(b)
    A_scalar = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(m, nvar))
    order = eq_rows + ineq_rows
    A_scalar = A_scalar[order]
    b = np.asarray(b)[order]
    # s = svec(G) in the PSD cone: −svec(G) + s = 0
    A_psd = sp.hstack([-sp.identity(nsvec, format="csc"), sp.csc_matrix((nsvec, nf))])
    A = sp.vstack([A_scalar, A_psd]).tocsc()
    bb = np.concatenate([b, np.zeros(nsvec)])
    q = np.zeros(nvar)
    q[nsvec + pep.objective.counter] = -1.0            # maximise τ = minimise −τ
    cones = []
    if eq_rows:
        cones.append(clarabel.ZeroConeT(len(eq_rows)))
    cones += [clarabel.NonnegativeConeT(len(ineq_rows)), clarabel.PSDTriangleConeT(n)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_iter = max_iter
    settings.direct_solve_method = "faer"
    # Clarabel's default 1e-8 stops these programmes one step short ("AlmostSolved") at a relative
    # gap near 1e-7; 1e-6 on the gap and the residuals is what the result reports as its accuracy.
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = TOLERANCE
    solution = clarabel.DefaultSolver(sp.csc_matrix((nvar, nvar)), q, A, bb, cones, settings).solve()
    status = str(solution.status)
    if status in ("DualInfeasible", "AlmostDualInfeasible"):
        return None, None, "unbounded"
    if status in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
        return None, None, "infeasible"
    if status not in ("Solved", "AlmostSolved"):
        return None, None, status
    word = "optimal" if status == "Solved" else "optimal_inaccurate"
    upper, primal = -float(solution.obj_val_dual), -float(solution.obj_val)
    if not (math.isfinite(upper) and math.isfinite(primal)):
        return None, None, word
    return upper, primal, word
