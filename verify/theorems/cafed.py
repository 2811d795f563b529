"""CA-Fed (Rodio et al., IEEE/ACM ToN 2023, doi:10.1109/TNET.2023.3324257) as checkable theorems.

The runs: FedAvg with aggregation weights q under Markov availability (Assumption 1), i.e.
``cafed-unbiased`` (q = α/π, fixed) or ``cafed`` (greedy q; covered only when its weights stay
fixed along the run, since Thm 2 is proved for one q), both with the true chain as the oracle
(§V-A, "Benchmarks"), server rate η̄ = 1 (the analysis' rate, App. B) and the diminishing
steps (12), η_t = η_1 t^(−a), η_1 = 1/(2L(1 + 2EQ)) with Q = ‖α/π‖₁ (≥ ‖q‖₁ for every q the
greedy rule picks), a = ``decay`` (default 1).

* Thm 2 bounds E[F_B(w̄_T) − F_B*], w̄_T = Σ_t η_t w_t / Σ_t η_t (§III-B), F_B = Σ_k p_k F_k
  with p = π ⊙̃ q (eq. (4)); evaluated with every sum to T (``horizon="finite"``, valid since
  the proof sums to T only).
* Thm 1 and Thm 3 bound E[F(w̄_T)] − F* by 2κ²(ε̄_opt + bias) ((10) with (11) or (15), in
  expectation; ε̄_opt is Thm 2's bound), κ = L/μ. The measured bias F(w_B*) − F* is reported
  beside the verdict with its bound.

Constants measured here (each is a rigorous input for the runs at hand): F_k* and w*, w_B* by
L-BFGS on the convex objectives; Γ = max_k F_k(w*) − F_k* (eq. (9)), Γ' = max_k F_k(w_B*) − F_k*
(Thm 3), and Thm 2 takes max(Γ, Γ'), which covers both readings of its Γ; diam(W) = twice the
largest of ‖x_t‖ over the runs' server iterates, ‖w*‖ and ‖w_B*‖ (W the ball at 0 holding them:
Assumption 2 with the projection never active; local iterates are not recorded); μ from
``problem.strong_convexity()``; D, G, H from diam(W) as ``bounds.cafed.theorem_2`` derives them.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from bounds import cafed as bc
from participation.patterns import Markov

from .contract import Plan, Setup, Theorem
from .measures import loss_gap_at_average, weighted_losses, weighted_minimum

__all__ = ["THEOREMS"]

COVERS = ("cafed-unbiased", "cafed")


class _Objectives:
    """Minimisers and minima of the weighted objectives Σ w_k F_k of one problem, cached by w."""

    def __init__(self, problem):
        self.problem = problem
        self._cache: dict[tuple, tuple[np.ndarray, float]] = {}

    def minimum(self, weights) -> tuple[np.ndarray, float]:
        key = tuple(np.round(np.asarray(weights, dtype=float), 15))
        if key not in self._cache:
            self._cache[key] = weighted_minimum(self.problem, np.asarray(weights, dtype=float))
        return self._cache[key]

    @lru_cache(maxsize=None)
    def client_minima(self) -> np.ndarray:
        n = self.problem.n_clients
        return np.array([self.minimum(np.eye(n)[k])[1] for k in range(n)])

    def gap(self, x) -> float:
        """max_k F_k(x) − F_k*."""
        return float(np.max(self._losses(x) - self.client_minima()))

    def _losses(self, x) -> np.ndarray:
        import torch

        ref = self.problem.to("cpu", torch.float64)
        return ref.client_losses(torch.as_tensor(x, dtype=torch.float64)).numpy()


def _weights_of(history) -> tuple[np.ndarray, bool]:
    """(q, fixed): the run's aggregation weights (the mean over rounds with clients) and whether they never changed."""
    W = np.asarray(history.observed["weights"], dtype=float)
    W = W[~np.isnan(W).any(axis=1)]
    if not W.size:
        return np.full(history.observed["weights"].shape[1], math.nan), True
    return W.mean(axis=0), bool(np.allclose(W, W[0], rtol=1e-12, atol=0.0))


def _require(setup: Setup, name: str, strong: bool) -> tuple[np.ndarray, np.ndarray, float | None]:
    problem = setup.problem
    if not getattr(problem, "convex", False):
        raise ValueError(f"{name} assumes convex local objectives (CA-Fed Assumptions 3–4); "
                         f"{type(problem).__name__} is not convex")
    problem.client_losses(problem.x0)             # a ValueError names a problem without per-client losses
    mu = problem.strong_convexity() if strong else None
    if not isinstance(setup.pattern, Markov):
        given = "a fixed trace" if setup.pattern is None else type(setup.pattern).__name__
        raise ValueError(f"{name} assumes Markov availability (CA-Fed Assumption 1): give a "
                         f"participation.patterns.Markov pattern, not {given}")
    return np.asarray(setup.pattern.pi, dtype=float), np.asarray(setup.pattern.lam, dtype=float), mu


def _plan(setup: Setup, *, which: str) -> Plan:
    import algorithms

    name = f"cafed.{which}"
    if setup.algorithm not in COVERS and setup.given is None:
        raise ValueError(f"{name} is checked on {', '.join(COVERS)} (FedAvg with weights q), not {setup.algorithm}")
    pi, lam, mu = _require(setup, name, strong=which != "theorem_2")
    n, E, L = setup.n_clients, setup.local_steps, setup.constants.L
    alpha = np.asarray(setup.hparams.get("alpha", np.full(n, 1 / n)), dtype=float)
    decay = float(setup.hparams.get("decay", 1.0))
    if not 0.5 < decay <= 1:
        raise ValueError(f"decay must lie in (1/2, 1] for the step sizes (12) of CA-Fed Thm 2, got {decay}")
    Q = float((alpha / pi).sum())
    eta_1 = 1 / (2 * L * (1 + 2 * E * Q))
    if setup.given is not None:
        algorithm = setup.given
        eta_1 = algorithm.eta_l
    else:
        extra = {k: v for k, v in setup.hparams.items() if k not in ("alpha", "decay")}
        algorithm = algorithms.get(setup.algorithm, eta_l=eta_1, eta_g=1.0, local_steps=E,
                                   oracle=(tuple(pi), tuple(lam)), alpha=tuple(alpha), **extra)
    traces, note = setup.unit_traces("participation")
    objectives = _Objectives(setup.problem)
    w_star, F_star = objectives.minimum(alpha)

    def p_of(q):
        return bc.biased_importance(pi, q)

    def measure(history, problem):
        if which == "theorem_2":
            q, _ = _weights_of(history)
            p = p_of(q)
            return loss_gap_at_average(history, problem, p, objectives.minimum(p)[1])
        return loss_gap_at_average(history, problem, alpha, F_star)

    def pooled_q(histories):
        qs = [_weights_of(h) for h in histories]
        q = np.mean([w for w, _ in qs], axis=0)
        fixed = all(f for _, f in qs) and all(np.allclose(w, qs[0][0], rtol=1e-12, atol=0) for w, _ in qs)
        return q, fixed

    def inputs(histories):
        q, fixed = pooled_q(histories)
        w_b, F_b = objectives.minimum(p_of(q))
        gamma, gamma_prime = objectives.gap(w_star), objectives.gap(w_b)
        radius = max(max(float(np.max(h.observed["param_norm"])) for h in histories),
                     float(np.linalg.norm(w_star)), float(np.linalg.norm(w_b)))
        if not radius > 0:
            raise ValueError("every iterate and both minimisers are 0: W is a point, and CA-Fed Thm 2 needs "
                             "H = D·diam(W) > 0 (start away from the optimum)")
        return dict(q=q, fixed=fixed, w_b=w_b, gamma=gamma, gamma_prime=gamma_prime, diam=2 * radius)

    def theorem_2_bound(v):
        return bc.theorem_2(v["q"], setup.constants, eta=eta_1, chains=(pi, lam), Gamma=max(v["gamma"], v["gamma_prime"]),
                            diam=v["diam"], decay=decay, horizon="finite")

    def bound(histories):
        v = inputs(histories)
        opt = theorem_2_bound(v)
        if which == "theorem_2":
            return opt
        if which == "theorem_1":
            return bc.theorem_1(alpha, v["q"], pi, setup.constants, mu=mu, Gamma=v["gamma"], eps_opt=opt)
        return bc.theorem_3(alpha, v["q"], pi, setup.constants, mu=mu, Gamma_prime=v["gamma_prime"], eps_opt=opt)

    def extras(histories):
        v = inputs(histories)
        bias = weighted_losses(setup.problem, v["w_b"], alpha) - F_star
        out = {"measured bias F(w_B*) − F*": bias, "Gamma": v["gamma"], "Gamma'": v["gamma_prime"],
               "diam(W)": v["diam"], "Q": float(v["q"].sum()), "eta_1": eta_1, "decay": decay, "q fixed": v["fixed"]}
        if which != "theorem_2":
            out["mu"] = mu
            out["Thm 2 bound (eps_opt)"] = theorem_2_bound(v).value
            divergence = bc.chi2(alpha, p_of(v["q"])) if which == "theorem_1" else bc.tv(alpha, p_of(v["q"])) ** 2
            factor = 1 if which == "theorem_1" else 4
            out["bias bound"] = factor * (L / mu) ** 2 * divergence * (v["gamma"] if which == "theorem_1" else v["gamma_prime"])
        return out

    def covered(histories):
        if setup.algorithm not in COVERS:
            return False
        return True if pooled_q(histories)[1] else "its weights changed along the runs; Thm 2 is proved for one fixed q"

    notes = [note] if note else []
    notes.append(f"step sizes (12): η_t = η_1 t^(−{decay:g}), η_1 = {eta_1:.4g}" + (" (the algorithm's own)" if setup.given else
                                                                                  " = 1/(2L(1 + 2EQ)), Q = ‖α/π‖₁"))
    return Plan(algorithm=algorithm, traces=traces, measure=measure, bound=bound, extras=extras, covered=covered,
                run_options={"observe": True, "local_schedule": lambda t: (t + 1.0) ** (-decay)},
                step_sizes={"eta_1": eta_1, "eta_g": 1.0, "decay": decay}, notes=notes)


_NEEDS = {
    "Gamma": "Γ = max_k F_k(w*) − F_k* (eq. (9)), F_k* and w* by L-BFGS on the convex objectives",
    "diam": "diam(W): twice the largest ‖x_t‖ of the runs' server iterates, ‖w*‖, ‖w_B*‖",
    "chain": "π, λ of the Markov pattern (two-state clients, CA-Fed App. F3)",
}
_STRONG = {"mu": "μ: problem.strong_convexity() (Assumption 4)"}
_STEPS = "η_t = η_1 t^(−a) with η_1 = 1/(2L(1 + 2EQ)), a = decay ∈ (1/2, 1] (eq. (12)); server rate 1"
_ASSUME = "convex problems with per-client losses (Quadratic, Logistic), a Markov pattern"


def _theorem(which, bound, lhs, lhs_latex, needs) -> Theorem:
    return Theorem(name=f"cafed.{which}", bound=bound, lhs=lhs, lhs_latex=lhs_latex, expectation="participation",
                   covers=COVERS, steps=_STEPS, plan=lambda setup: _plan(setup, which=which), needs=needs,
                   assumptions=_ASSUME, options=("decay",))


_TOTAL = "F(w̄_T) − F*, w̄_T = Σ_t η_t w_t / Σ_t η_t"
_TOTAL_LATEX = r"F(\bar w_T) - F^*"
THEOREMS = {
    "cafed.theorem_1": _theorem("theorem_1", bc.theorem_1, _TOTAL, _TOTAL_LATEX, {**_NEEDS, **_STRONG}),
    "cafed.theorem_3": _theorem("theorem_3", bc.theorem_3, _TOTAL, _TOTAL_LATEX,
                                {**_NEEDS, **_STRONG, "Gamma'": "Γ' = max_k F_k(w_B*) − F_k* (Thm 3)"}),
    "cafed.theorem_2": _theorem("theorem_2", bc.theorem_2, "F_B(w̄_T) − F_B*, F_B = Σ_k p_k F_k, p = π ⊙̃ q",
                                r"F_B(\bar w_T) - F_B^*", _NEEDS),
}
