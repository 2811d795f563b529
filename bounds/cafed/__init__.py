"""CA-Fed bounds: Theorems 1–3, Markov mixing quantities and aggregation-weight optimisation.

A. Rodio, F. Faticanti, O. Marfoq, G. Neglia, E. Leonardi, "Federated Learning under
Heterogeneous and Correlated Client Availability", IEEE/ACM Transactions on Networking 2023,
doi:10.1109/TNET.2023.3324257 (numbering of the extended version, hal-04364293; "CA-Fed"
below). Notation follows the paper, not the rest of the toolkit:

* ``alpha`` — target importance α (on the simplex; F = Σ α_k F_k, eq. (1));
* ``q`` — aggregation weights q ≥ 0 (§II, before eq. (3)) with Q = ‖q‖₁ (Thm 2);
* ``pi`` — asymptotic availabilities π_k ∈ (0, 1] (defined after eq. (4));
* p = π ⊙̃ q, p_k = π_k q_k / Σ_h π_h q_h — the biased importance (eq. (4); ⊙̃ as defined after eq. (20)).

Public functions:

* ``theorem_1`` — total error (10) with the χ² bias bound (11);
* ``theorem_2`` — optimisation error (13) under Markov availability (``variant=``);
* ``theorem_3`` — total-variation bias bound (15);
* ``mixing_quantities`` — (ln C_P, T_P, 𝒥_T) of a chain, from ``participation.markov``;
* ``weight_problem`` / ``WeightProblem`` — Problem (212) built from Theorem 2's constants;
* ``optimal_weights`` — closed-form KKT solution of (212) (Appendix E);
* ``solve_weights`` — multi-start scipy solver of the combined problem (14);
* ``greedy_weights`` / ``proxy_objective`` — CA-Fed's exclusion heuristic (Algorithm 1, (20)).

Every theorem is one sympy ``Formula``; the sums over rounds (S_T, Σ η_t², Φ, ...) enter it
as symbols whose values are computed numerically and documented where they are made.
Nothing here imports torch.

Modules, each importing only from those above it:

* :mod:`~bounds.cafed._inputs` — input checks shared by all of them;
* :mod:`~bounds.cafed.bias` — p = π ⊙̃ q, χ², d_TV, Theorems 1 and 3;
* :mod:`~bounds.cafed.mixing` — ln C_P, T_P, λ(P), 𝒥_T of the availability chain;
* :mod:`~bounds.cafed.step_sums` — Theorem 2's sums over rounds (S_T, S₂, Φ, the 𝒥-sum);
* :mod:`~bounds.cafed.optimisation` — Theorem 2;
* :mod:`~bounds.cafed.weights` — Problem (212) and its KKT solution;
* :mod:`~bounds.cafed.weight_solver` — Problem (14) by multi-start SLSQP;
* :mod:`~bounds.cafed.greedy` — the proxy (20) and Algorithm 1's greedy exclusion.
"""
from __future__ import annotations

from . import _inputs, bias, greedy, mixing, optimisation, step_sums, weight_solver, weights
from ._inputs import PAPER, SIMPLEX_TOL
from .bias import biased_importance, chi2, theorem_1, theorem_3, tv
from .greedy import greedy_weights, proxy_objective
from .mixing import ROUNDS_MAX, Mixing, mixing_quantities
from .optimisation import THEOREM_2_VARIANTS, _Jsum, _Phi, _S2, _ST, _Z2, _ell, theorem_2
from .step_sums import DENSE_ROUNDS, FINITE_ROUNDS_MAX, TAIL_START_MAX
from .weight_solver import SLSQP_PASSES, WeightSolution, solve_weights
from .weights import KKT_RTOL, KKTSolution, WeightProblem, _kkt_candidate, optimal_weights, weight_problem

__all__ = [
    "theorem_1", "theorem_2", "theorem_3", "mixing_quantities", "Mixing", "biased_importance", "chi2", "tv",
    "WeightProblem", "weight_problem", "optimal_weights", "KKTSolution", "solve_weights", "WeightSolution",
    "greedy_weights", "proxy_objective", "THEOREM_2_VARIANTS",
]
