"""CA-Fed bounds (Rodio et al., IEEE/ACM ToN 2023): verification vectors computed here, KKT vs scipy,
variants, log space, bad inputs, citations."""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as st
from scipy import optimize

from bounds import cafed
from bounds.core import Constants
from participation import markov

CONST = Constants(L=2.0, sigma2=1.0, delta_f=0.0, local_steps=2, rounds=200)
PI3, LAM3 = np.array([0.1, 0.9, 0.5]), np.array([0.9, 0.01, -0.3])
KW = dict(eta=0.02, chains=(PI3, LAM3), Gamma=0.5, D=1.0, H=1.5, diam=2.0)
PI6 = np.array([0.9, 0.9, 0.5, 0.3, 0.1, 0.1])


def thm2(q=None, constants=CONST, **kwargs):
    return cafed.theorem_2(np.full(3, 1 / 3) if q is None else q, constants, **(KW | kwargs))


def problem_212(B: float) -> cafed.WeightProblem:
    """Setup of the verification vectors: σ_k = 1, S₂ = 1, E = 2, C = 0, Q = 1, so A_kk = 2(E+1)π_k = 6π_k."""
    return cafed.WeightProblem(PI6, 6 * PI6, B, 0.0, 1.0)


# ------------------------------------------------------------------------ verification vectors (computed here)
@pytest.mark.parametrize("pi, lam, rate, log_inv, cp, hitting", [
    (0.1, 0.9, 0.95, 0.0513, 2.5612, 100.0),
    (0.9, 0.0, 0.5, 0.6931, 2.5612, 1.111),
    (0.5, 0.5, 0.75, 0.2877, 2.0, 4.0),
    (0.1, -0.05, 0.525, 0.6444, 2.5612, 9.524),
])
def test_two_state_table(pi, lam, rate, log_inv, cp, hitting):
    mix = cafed.mixing_quantities(chains=([pi], [lam]), H=1.0, T=50)
    assert mix.lam_P == pytest.approx(rate, abs=1e-12)
    assert -math.log(mix.lam_P) == pytest.approx(log_inv, abs=1e-4)
    assert mix.C_P == pytest.approx(cp, abs=1e-4) and mix.tp == 0
    P = markov.two_state(pi, lam)
    assert 1 / P[0, 1] == pytest.approx(hitting, rel=1e-3)  # mean inactive run 1/((1−λ)π)


def test_product_of_three_chains_general_and_kronecker_agree():
    via_chains = cafed.mixing_quantities(chains=([0.1, 0.9, 0.5], [0.9, 0.01, -0.3]), H=1.0, T=50)
    P = markov.product_chain(markov.two_state([0.1, 0.9, 0.5], [0.9, 0.01, -0.3])).matrix()
    via_matrix = cafed.mixing_quantities(P, H=1.0, T=50)
    assert via_chains.C_P == pytest.approx(34.7123, abs=1e-4)
    assert via_matrix.C_P == pytest.approx(via_chains.C_P, rel=1e-9)
    assert via_matrix.lam_P == pytest.approx(0.95) and via_chains.log_M == pytest.approx(math.log(8))
    assert tuple(via_matrix) == pytest.approx(tuple(via_chains), rel=1e-12) and len(tuple(via_chains)) == 3


def test_hundred_clients_log_cp_and_type_table():
    pi = np.repeat([0.1, 0.9], 50)
    mix = cafed.mixing_quantities(chains=(pi, np.full(100, 0.9)), H=1.0, T=200)
    assert mix.log_cp == pytest.approx(128.7, abs=0.05) and mix.C_P == pytest.approx(math.exp(mix.log_cp))
    assert 1 / -math.log(mix.lam_P) == pytest.approx(19.50, abs=0.005)
    assert mix.J_T == 200  # 𝒥_t = t through a 200-round run (derived here: the ceiling in (132) is > 2500)
    assert mix.lag(3000, 1.0) == math.ceil((math.log(2 * 3000) + mix.log_cp) / -math.log(0.95))
    weak = cafed.mixing_quantities(chains=(pi, np.full(100, 0.01)), H=1.0, T=200)
    assert 1 / -math.log(weak.lam_P) == pytest.approx(1.46, abs=0.01)


@pytest.mark.parametrize("B, q_star, iota, theta", [
    (5.0, [0.5, 0.5, 0, 0, 0, 0], 7.0556, 3.65),
    (0.05, [0.110, 0.110, 0.125, 0.146, 0.254, 0.254], None, -0.097),
])
def test_problem_212_vectors(B, q_star, iota, theta):
    sol = cafed.optimal_weights(problem_212(B))
    assert sol.q == pytest.approx(q_star, abs=5e-4)
    assert sol.theta == pytest.approx(theta, abs=5e-4)
    assert sol.value == pytest.approx(sol.iota) and sol.value == pytest.approx(problem_212(B).J(sol.q))
    if iota is not None:
        assert sol.iota == pytest.approx(iota, abs=1e-4) and sol.value == pytest.approx(7.0556, abs=1e-4)


def test_guideline_a_only_when_theta_positive():
    """q_k* grows with π_k when θ* > 0 (B = 5) and shrinks with π_k when θ* < 0 (B = 0.05)."""
    big, small = cafed.optimal_weights(problem_212(5.0)), cafed.optimal_weights(problem_212(0.05))
    assert big.theta > 0 and np.all(np.diff(big.q) <= 1e-12)
    assert small.theta < 0 and np.all(np.diff(small.q) >= -1e-12)


def test_chi2_not_convex_on_the_simplex():
    """Exact rational counterexample (found here) to Appendix D, Proposition 2."""
    pi = [Fraction(s) for s in ("0.698", "0.064", "0.19")]
    alpha = [Fraction(s) for s in ("0.138", "0.838", "0.024")]
    q1 = [Fraction(s) for s in ("0.756", "0.107", "0.137")]
    q2 = [Fraction(s) for s in ("0.066", "0.06", "0.874")]

    def chi(q):
        u = sum(a * b for a, b in zip(pi, q))
        return sum((a - p * x / u) ** 2 / (p * x / u) for a, p, x in zip(alpha, pi, q))

    gap = chi([(a + b) / 2 for a, b in zip(q1, q2)]) - (chi(q1) + chi(q2)) / 2
    assert float(gap) == pytest.approx(2.498, abs=1e-3)
    p = cafed.biased_importance([float(x) for x in pi], [float(x) for x in q1])
    assert cafed.chi2([float(a) for a in alpha], p) == pytest.approx(float(chi(q1)))


# ------------------------------------------------------------------------ KKT vs scipy
def random_problem(seed: int, n: int = 6) -> cafed.WeightProblem:
    rng = np.random.default_rng(seed)
    pi = rng.uniform(0.05, 1.0, n)
    return cafed.WeightProblem(pi, rng.uniform(0.1, 3.0, n) * pi, 10 ** rng.uniform(-2, 1), rng.uniform(0, 2),
                               rng.uniform(0.5, 2.0), rng.uniform(1, 5))


@pytest.mark.parametrize("seed", range(6))
def test_kkt_matches_scipy_on_convex_problem(seed):
    problem = random_problem(seed)
    kkt, general = cafed.optimal_weights(problem), cafed.solve_weights(problem, starts=3, seed=seed)
    assert general.value == pytest.approx(kkt.bound, rel=1e-8)
    assert general.q == pytest.approx(kkt.q, abs=1e-5 * problem.Q)
    assert kkt.q.sum() == pytest.approx(problem.Q) and np.all(kkt.q >= 0)


@pytest.mark.parametrize("B", [5.0, 0.05, 0.5])
def test_kkt_stationarity_independently(B):
    """Lagrangian residual from a sympy gradient of J: ∂J/∂q_k = −ν on the support, ≥ −ν off it."""
    problem = problem_212(B)
    sol = cafed.optimal_weights(problem)
    qs = sp.symbols("q0:6", positive=True)
    J = (sum(a * x**2 for a, x in zip(problem.A, qs)) / 2 + B) / sum(p * x for p, x in zip(problem.pi, qs))
    grad = np.array([float(sp.diff(J, x).subs(dict(zip(qs, sol.q)))) for x in qs])
    nu = -grad[sol.support].mean()
    assert grad[sol.support] == pytest.approx(-nu, abs=1e-10)
    assert np.all(grad[~sol.support] >= -nu - 1e-10)
    assert nu == pytest.approx(sol.theta / (problem.pi @ sol.q), rel=1e-9)  # θ* = ν·πᵀq*


@given(st.integers(0, 10**6))
def test_kkt_value_below_random_feasible_points(seed):
    problem = random_problem(seed % 1000, n=5)
    q = problem.Q * np.random.default_rng(seed).dirichlet(np.ones(5))
    assert cafed.optimal_weights(problem).value <= problem.J(q) + 1e-12


@pytest.mark.parametrize("bias", ["chi2", "tv"])
def test_combined_problem_multistart_beats_kkt(bias):
    problem = problem_212(0.5)
    alpha = np.full(6, 1 / 6)
    sol = cafed.solve_weights(problem, alpha=alpha, Gamma=1.0, bias=bias, starts=4)
    kkt = cafed.optimal_weights(problem).q
    div = cafed.chi2 if bias == "chi2" else (lambda a, p: cafed.tv(a, p) ** 2)
    at_kkt = problem.J(kkt) + div(alpha, cafed.biased_importance(PI6, kkt))
    assert sol.value <= at_kkt + 1e-12 and sol.value == pytest.approx(sol.opt + sol.bias)
    assert sol.value <= min(sol.local_values) + 1e-15 and len(sol.local_values) == 7
    assert sol.opt >= cafed.optimal_weights(problem).bound - 1e-12


# ------------------------------------------------------------------------ KKT at large B (M = 2^N)
PI8 = np.repeat([0.9, 0.1], 4)


def kkt_mpmath(problem: cafed.WeightProblem, dps: int = 80):
    """Independent reference: the θ-form (the paper's multipliers ι, θ of (224)–(227), App. E2–E3, closed
    here as in ``cafed.optimal_weights``) at ``dps`` digits, brute force over top-m supports.

    ι = (Q + θa)/b and a(ac − b²)θ² + 2Qac·θ + (cQ² − 2Bb²) = 0 with mpmath; both roots are tried and
    a root is kept when q ≥ 0, ιπ_k ≤ θ off S and ‖q‖₁ = Q (to 1e-30: a spurious root from
    ac − b² ≈ 1e-80 ≠ 0 breaks it). 80 digits leave ≥ 40 after the cancellation θ ≈ ιπ_k for B up to 1e40.
    Returns (J(q*), q*, ι*, θ*) as floats.
    """
    with mpmath.workdps(dps):
        pi, A = [mpmath.mpf(float(x)) for x in problem.pi], [mpmath.mpf(float(x)) for x in problem.A]
        B, Q, C = mpmath.mpf(problem.B), mpmath.mpf(problem.Q), mpmath.mpf(problem.C)
        n = len(pi)
        order = sorted(range(n), key=lambda k: -pi[k])
        best = None
        for m in range(1, n + 1):
            if m < n and pi[order[m - 1]] == pi[order[m]]:
                continue
            S = order[:m]
            a = mpmath.fsum(1 / A[k] for k in S)
            b = mpmath.fsum(pi[k] / A[k] for k in S)
            c = mpmath.fsum(pi[k] ** 2 / A[k] for k in S)
            qa, qb, qc = a * (a * c - b * b), 2 * Q * a * c, c * Q * Q - 2 * B * b * b
            disc = qb * qb - 4 * qa * qc
            if disc < 0:
                continue
            w = -(qb + mpmath.sqrt(disc)) / 2
            for theta in [qc / w] + ([w / qa] if qa != 0 else []):
                iota = (Q + theta * a) / b
                q = [(iota * pi[k] - theta) / A[k] if k in S else mpmath.mpf(0) for k in range(n)]
                u = mpmath.fsum(p * x for p, x in zip(pi, q))
                if (iota <= 0 or u <= 0 or any(q[k] < 0 for k in S) or abs(mpmath.fsum(q) - Q) > Q * 1e-30
                        or any(iota * pi[k] > theta for k in range(n) if k not in S)):
                    continue
                J = (mpmath.fsum(x * x * Ak for x, Ak in zip(q, A)) / 2 + B) / u + C
                if best is None or J < best[0]:
                    best = (J, q, iota, theta)
        J, q, iota, theta = best
        return float(J), np.array([float(x) for x in q]), float(iota), float(theta)


@pytest.mark.parametrize("B", [5.0, 1e6, 1e12, 1e16, 1e20, 1e30, 1e100, 1e300])
def test_kkt_exact_at_any_scale(B):
    """π constant on the support (four clients at 0.9): q* = Q/4 there and J* = (½·4·5.4/16 + B)/0.9 exactly.
    The θ-form gave ‖q‖₁ = 1.00007 at B = 1e12, 2.96 at 1e16 (J = 3.75e15 < J* = 1.11e16) and q = 0 from 1e20."""
    problem = cafed.WeightProblem(PI8, 6 * PI8, B, 0.0, 1.0)
    sol = cafed.optimal_weights(problem)
    assert sol.q.sum() == pytest.approx(1.0, rel=1e-14)
    assert sol.q == pytest.approx([0.25] * 4 + [0.0] * 4, abs=1e-15)
    exact = (0.675 + B) / 0.9
    assert sol.value == pytest.approx(exact, rel=1e-14) and sol.iota == pytest.approx(exact, rel=1e-14)
    assert sol.theta == pytest.approx(0.9 * sol.iota - 0.25 * 5.4, rel=1e-14)  # θ = ιπ_k − A_kk q_k
    assert list(sol.support) == [True] * 4 + [False] * 4


@given(st.integers(0, 10**6), st.floats(-2, 40), st.sampled_from(["distinct", "tied", "ulp"]))
def test_kkt_matches_mpmath(seed, log_b, ties):
    """Stable closed form vs the paper's θ-form at 80 digits, for B up to 1e40, with exact and 1-ulp ties in π."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    pi = rng.choice(rng.uniform(0.05, 1.0, 3), n) if ties == "tied" else rng.uniform(0.05, 1.0, n)
    if ties == "ulp":
        pi[0] = np.nextafter(pi[1:].max(), 0.0)
    problem = cafed.WeightProblem(pi, rng.uniform(0.1, 3.0, n) * pi, 10**log_b, rng.uniform(0, 2),
                                  rng.uniform(0.5, 2.0))
    sol = cafed.optimal_weights(problem)
    J, q, iota, theta = kkt_mpmath(problem)
    assert sol.q.sum() == pytest.approx(problem.Q, rel=1e-13) and np.all(sol.q >= 0)
    assert sol.q == pytest.approx(q, abs=1e-13 * problem.Q)
    assert sol.value == pytest.approx(J, rel=1e-13) and sol.iota == pytest.approx(iota, rel=1e-13)
    assert sol.theta == pytest.approx(theta, abs=1e-13 * iota)


def test_kkt_at_the_papers_size():
    """N = 100 two-state clients (π ∈ {0.1, 0.9}, ln C_P ≈ 128.7, computed here): B = υ ≈ 5.2e29 holds M = 2^100.
    The θ-form returned ‖q‖₁ ≈ 9.9e17 and a 'bound' of 3.4e14 for a true optimum of 4.9e30."""
    pi, lam = np.repeat([0.1, 0.9], 50), np.tile([0.9, 0.0], 50)
    kw = KW | {"chains": (pi, lam)}
    problem = cafed.weight_problem(1.0, CONST, **kw)
    assert problem.B > 1e29
    sol = cafed.optimal_weights(problem)
    J, q, iota, _ = kkt_mpmath(problem)
    assert sol.q.sum() == pytest.approx(1.0, rel=1e-13)
    assert sol.q == pytest.approx(np.where(problem.pi > 0.5, 1 / 50, 0.0), abs=1e-15)
    assert sol.q == pytest.approx(q, abs=1e-15) and sol.value == pytest.approx(J, rel=1e-13)
    assert sol.bound == pytest.approx(cafed.theorem_2(sol.q, CONST, **kw).value, rel=1e-9)
    for other in (np.full(100, 0.01), pi**-1 / np.sum(pi**-1)):
        assert sol.value <= problem.J(other)


def test_kkt_raises_instead_of_returning_off_the_constraint(monkeypatch):
    with pytest.raises(ValueError, match="overflows a float"):  # ι* = J* > 1.8e308: no finite optimum
        cafed.optimal_weights(cafed.WeightProblem([0.1, 0.1, 0.05], [0.6, 0.6, 0.3], 1.7e308))
    exact = cafed._kkt_candidate

    def off(*args):  # a KKT candidate with ‖q‖₁ = Q(1 + 1e-6), as the θ-form produced at large B
        out = exact(*args)
        return None if out is None else (out[0], out[1], out[2] * (1 + 1e-6), out[3])

    monkeypatch.setattr(cafed.weights, "_kkt_candidate", off)
    with pytest.raises(ValueError, match=r"\|\|q\|\|_1 = Q"):
        cafed.optimal_weights(problem_212(5.0))


# ------------------------------------------------------------------------ combined problem: never worse than a start
def combined_objective(problem, q, alpha, coef, bias):
    """J(q)/S_T + coef·D(α, π⊙̃q) through the public χ² / d_TV (a second formula for the solver's own)."""
    p = cafed.biased_importance(problem.pi, q)
    return problem.J(q) / problem.S_T + coef * (cafed.chi2(alpha, p) if bias == "chi2" else cafed.tv(alpha, p) ** 2)


def start_points(problem, alpha, starts, seed):
    rng, n, Q = np.random.default_rng(seed), problem.pi.size, problem.Q
    unbiased = Q * (alpha / problem.pi) / np.sum(alpha / problem.pi)
    return ([cafed.optimal_weights(problem).q, np.full(n, Q / n), unbiased]
            + [Q * rng.dirichlet(np.ones(n)) for _ in range(starts)])


@pytest.mark.parametrize("weight", [1.0, 1e6, 1e8])
def test_solve_weights_reproducer_never_worse_than_unbiased_start(weight):
    """π = (0.9×4, 0.1×4), Γ = 1, χ²: the unbiased start α/π scores 28.1528 (χ² = 0) but SLSQP from the
    perturbed starts failed ('Inequality constraints incompatible', unscaled 1e8-size objective), and the
    result was 1872.6 (weight 1e6) and 111000 (1e8). Independent check: BFGS over q = Q·softmax(z) from α/π."""
    problem, alpha = cafed.WeightProblem(PI8, 6 * PI8, 5.0, 0.0, 1.0), np.full(8, 1 / 8)
    sol = cafed.solve_weights(problem, alpha=alpha, Gamma=1.0, bias="chi2", bias_weight=weight)
    tol = 1e-13 * weight
    assert sol.q.sum() == pytest.approx(1.0, rel=1e-14) and np.all(sol.q >= 0)
    assert sol.value == pytest.approx(combined_objective(problem, sol.q, alpha, weight, "chi2"), rel=1e-12, abs=tol)
    for x in start_points(problem, alpha, 8, 0):
        assert sol.value <= combined_objective(problem, x, alpha, weight, "chi2") + tol
    assert sol.value <= 28.152777777777779 + tol and sol.value == min(sol.local_values)

    def softmax_objective(z):
        q = np.exp(z - z.max())
        return combined_objective(problem, q / q.sum(), alpha, weight, "chi2")

    reference = optimize.minimize(softmax_objective, np.log(alpha / PI8), method="BFGS").fun
    assert sol.value <= reference + 1e-9 * reference
    assert sol.value == pytest.approx(reference, rel=1e-8)


@pytest.mark.slow
@given(st.integers(0, 10**6), st.integers(2, 5), st.sampled_from(["chi2", "tv"]), st.floats(-1, 8))
def test_solve_weights_never_worse_than_any_start(seed, n, bias, log_weight):
    rng = np.random.default_rng(seed)
    pi = rng.uniform(0.05, 1.0, n)
    problem = cafed.WeightProblem(pi, rng.uniform(0.1, 3.0, n) * pi, 10 ** rng.uniform(-2, 3), rng.uniform(0, 2),
                                  rng.uniform(0.5, 2.0), rng.uniform(1, 5))
    alpha, Gamma, weight = rng.dirichlet(np.ones(n)), rng.uniform(0, 2), 10**log_weight
    sol = cafed.solve_weights(problem, alpha=alpha, Gamma=Gamma, bias=bias, bias_weight=weight, starts=2, seed=seed)
    coef = weight * Gamma
    tol = 1e-13 * coef  # χ² at α/π is 0 up to rounding, which the weight amplifies
    assert sol.q.sum() == pytest.approx(problem.Q, rel=1e-12) and np.all(sol.q >= 0)
    value = combined_objective(problem, sol.q, alpha, coef, bias)
    assert sol.value == pytest.approx(value, rel=1e-12, abs=tol)
    for x in start_points(problem, alpha, 2, seed):
        start = combined_objective(problem, x, alpha, coef, bias)
        assert sol.value <= start + 1e-12 * start + tol
    assert sol.value == min(sol.local_values) and len(sol.local_values) == 5


def test_weight_problem_is_theorem_2():
    for variant in ("corrected", "printed"):
        for correlation in ("log", "J"):
            problem = cafed.weight_problem(1.0, CONST, variant=variant, correlation=correlation, **KW)
            for q in (np.full(3, 1 / 3), np.array([0.7, 0.3, 0.0])):
                bound = thm2(q, variant=variant, correlation=correlation)
                assert problem.J(q) / problem.S_T == pytest.approx(bound.value, rel=1e-12)
    assert problem.A == pytest.approx(2 * 3 * PI3 * 1.0 * bound.values[cafed._S2])


# ------------------------------------------------------------------------ Theorem 2
def manual_theorem_2(q, *, T, eta1, gamma_coef):
    """(185)–(187) rebuilt from C_1, C_2, C_3 of the proof of Thm 2 (Steps 1–2) with a plain loop over t ≤ T
    (finite horizon)."""
    E, L, Gam, D, H, diam = 2, CONST.L, 0.5, 1.0, 1.5, 2.0
    G = math.sqrt(D**2 + 1.0)
    lam_P, M = 0.95, 8
    C_P = math.sqrt(7) * math.prod(2 * math.sqrt(2) * math.sqrt(p**2 + (1 - p) ** 2) for p in PI3)
    Q, Pi = sum(q), float(PI3 @ q)
    eta = lambda t: eta1 / max(t, 1)  # η_0 := η_1
    S_T = sum(eta(t) for t in range(1, T + 1))
    S2 = sum(eta(t) ** 2 for t in range(1, T + 1))
    phi = 0.0
    for t in range(1, T + 1):
        J = min(max(math.ceil(math.log(2 * C_P * H * t) / math.log(1 / lam_P)), 0), t)
        phi += math.log(2 * C_P * H * t) * eta(t - J) ** 2
    C1 = E * D * G * Q * Pi * phi
    C3 = (2 / E * diam**2 + (E + 1) * float(np.sum(PI3 * q**2)) * S2 + 2 * E**2 * G**2 * Pi * S2
          + gamma_coef * L * (1 + E * Q) * Gam * Pi * S2
          + M * Q / 4 * sum(eta(t) ** 2 + t**-2.0 for t in range(1, T + 1)))
    return (2 * C1 / math.log(1 / lam_P) + C3) / (S_T * Pi)  # C_2 = 0 as T_P = 0


@pytest.mark.parametrize("variant, coef", [("printed", 4), ("corrected", 8)])
def test_theorem_2_matches_the_proof_identity(variant, coef):
    q = np.array([0.5, 0.3, 0.2])
    bound = thm2(q, variant=variant, horizon="finite", T=300)
    assert bound.value == pytest.approx(manual_theorem_2(q, T=300, eta1=0.02, gamma_coef=coef), rel=1e-10)
    assert bound.variant == variant and "Thm 2" in str(bound.source) and bound.valid


def test_variants_differ_only_in_heterogeneity():
    printed, corrected = thm2(variant="printed"), thm2()
    for name in printed.terms:
        factor = 2 if name == "heterogeneity" else 1
        assert corrected.terms[name] == pytest.approx(factor * printed.terms[name], rel=1e-12)
    assert corrected.value > printed.value
    assert thm2(Gamma=0.0).value == pytest.approx(thm2(Gamma=0.0, variant="printed").value, rel=1e-14)
    assert "8 \\Gamma" in corrected.latex() and "4 \\Gamma" in printed.latex()


def test_infinite_horizon_is_upper_bound_of_finite_sums():
    infinite, finite = thm2(decay=0.75), thm2(decay=0.75, horizon="finite", T=2**18)
    for sym in (cafed._Phi, cafed._Jsum, cafed._S2, cafed._Z2):
        assert finite.values[sym] <= infinite.values[sym] <= finite.values[sym] * 1.05
    assert infinite.values[cafed._ST] == pytest.approx(sum(0.02 * t**-0.75 for t in range(1, 201)))


def test_j_form_can_exceed_the_printed_correlation_term():
    """(142) bounds 𝒥_t by ln(2C_P H t)/ln(1/λ), ignoring the ceiling of (132): with small 2C_P H the
    proof's own quantity (141) is larger than the printed φ/ln(1/λ(P))."""
    kw = {"chains": (PI3, [0.2, 0.0, 0.0]), "H": 0.01}
    assert thm2(correlation="J", **kw).terms["correlation"] > 1.2 * thm2(**kw).terms["correlation"]
    assert thm2(correlation="J").terms["correlation"] < thm2().terms["correlation"]


def test_j_form_sum_and_conditions():
    bound = thm2(correlation="J", horizon="finite", T=50)
    mix = cafed.mixing_quantities(chains=(PI3, LAM3), H=1.5, T=50)
    jsum = sum(mix.lag(t, 1.5) * (0.02 / max(t - mix.lag(t, 1.5), 1)) ** 2 for t in range(1, 51))
    assert bound.values[cafed._Jsum] == pytest.approx(jsum, rel=1e-12)
    big_step = thm2(eta=0.5)
    assert not big_step.valid and "η_1" in big_step.violated[0].name
    assert big_step.step_sizes["eta_1_max"] == pytest.approx(1 / (2 * 2.0 * (1 + 4)))
    constant = thm2(decay=0.0, horizon="finite")
    assert not constant.valid and "diminishing" in constant.violated[0].name


def test_log_space_matches_direct_and_survives_huge_state_spaces():
    assert thm2().value == pytest.approx(thm2(log_space=False).value, rel=1e-12)
    assert thm2().log_value == pytest.approx(math.log(thm2(log_space=False).value), rel=1e-12)
    for n, finite in ((100, True), (1500, False)):
        pi, lam = np.repeat([0.1, 0.9], n // 2), np.tile([0.9, 0.0], n // 2)
        bound = cafed.theorem_2(np.full(n, 1 / n), CONST, **(KW | {"chains": (pi, lam)}))
        assert math.isfinite(bound.log_value) and math.isfinite(bound.value) == finite
        s2, s_t = bound.values[cafed._S2], bound.values[cafed._ST]
        expected = n * math.log(2) + math.log(s2 + math.pi**2 / 6) - math.log(4 * 0.5 * s_t)
        assert bound.log_value >= expected - 1e-9  # the M/4 term alone (Q = 1, πᵀq = 1/2)
        direct = cafed.theorem_2(np.full(n, 1 / n), CONST, log_space=False, **(KW | {"chains": (pi, lam)}))
        assert (direct.value == pytest.approx(bound.value, rel=1e-12)) if finite else direct.value == math.inf


def test_theorem_2_monotone():
    base = thm2().value
    assert thm2(constants=Constants(L=2.0, sigma2=2.0, delta_f=0.0, local_steps=2, rounds=200)).value > base
    assert thm2(constants=Constants(L=3.0, sigma2=1.0, delta_f=0.0, local_steps=2, rounds=200)).value > base
    assert thm2(Gamma=1.0).value > base and thm2(H=3.0).value > base
    assert thm2(chains=(PI3, [0.95, 0.01, -0.3])).value > base  # more correlation: larger λ(P)
    values = [thm2(T=T).value for T in (50, 100, 200, 400)]
    assert all(a > b for a, b in zip(values, values[1:]))  # infinite horizon: only S_T grows with T


def test_reduced_chain_guideline_b():
    """Excluding the correlated client (λ = 0.9) lowers λ(P') and the correlation term (§III-D)."""
    q = np.array([0.0, 0.5, 0.5])
    full, reduced = thm2(q), thm2(q, reduced=True)
    assert reduced.terms["correlation"] < full.terms["correlation"]
    assert reduced.terms["state space"] == pytest.approx(full.terms["state space"] / 2)
    assert reduced.values[cafed._ell] == pytest.approx(-math.log(0.65))


def test_general_matrix_needs_pi():
    P = markov.product_chain(markov.two_state(PI3, LAM3)).matrix()
    bound = thm2(chains=None, P=P, pi=PI3)
    assert bound.value == pytest.approx(thm2().value, rel=1e-9)
    with pytest.raises(ValueError, match="pi is needed"):
        thm2(chains=None, P=P)
    with pytest.raises(ValueError, match="does not match"):
        thm2(pi=[0.2, 0.9, 0.5])


# ------------------------------------------------------------------------ Theorems 1 and 3
ALPHA3 = np.array([0.5, 0.3, 0.2])


def test_unbiased_weights_have_no_bias():
    q = ALPHA3 / PI3
    assert cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=1.0, Gamma=2.0).value == pytest.approx(0, abs=1e-15)
    assert cafed.theorem_3(ALPHA3, q, PI3, CONST, mu=1.0, Gamma_prime=2.0).value == pytest.approx(0, abs=1e-15)


def test_bias_bounds_values_and_total():
    q = np.array([0.2, 0.3, 0.5])
    p = cafed.biased_importance(PI3, q)
    chi, d = cafed.chi2(ALPHA3, p), cafed.tv(ALPHA3, p)
    t1 = cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=0.5, Gamma=2.0)
    assert t1.value == pytest.approx(16 * chi * 2.0) and "Thm 1" in str(t1.source)
    t3 = cafed.theorem_3(ALPHA3, q, PI3, CONST, mu=0.5, Gamma_prime=2.0, eps_opt=0.1)
    assert t3.terms == pytest.approx({"optimisation": 2 * 16 * 0.1, "bias": 2 * 16 * 4 * 16 * d**2 * 2.0})
    total = cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=0.5, Gamma=2.0, eps_opt=thm2())
    assert total.terms["optimisation"] == pytest.approx(2 * 16 * thm2().value)
    excluded = cafed.theorem_1(ALPHA3, [0, 0.5, 0.5], PI3, CONST, mu=0.5, Gamma=2.0)
    assert excluded.value == math.inf
    assert math.isfinite(cafed.theorem_3(ALPHA3, [0, 0.5, 0.5], PI3, CONST, mu=0.5, Gamma_prime=2.0).value)
    assert not cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=3.0, Gamma=2.0).valid  # μ > L


def test_sources_cite_the_paper():
    q = np.array([0.2, 0.3, 0.5])
    bounds = [("Thm 1", cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=0.5, Gamma=2.0)),
              ("Thm 1", cafed.theorem_1(ALPHA3, q, PI3, CONST, mu=0.5, Gamma=2.0, eps_opt=0.1)),
              ("Thm 3", cafed.theorem_3(ALPHA3, q, PI3, CONST, mu=0.5, Gamma_prime=2.0)),
              ("Thm 2", thm2()),
              ("Thm 2", thm2(np.array([0.0, 0.5, 0.5]), variant="printed", correlation="J", horizon="finite",
                             reduced=True, eta0=0.05))]
    for item, bound in bounds:
        source = bound.source
        assert source.paper == "CA-Fed" and source.item == item and source.reference is not None
        assert source.where and "doi:10.1109/TNET.2023.3324257" in str(source.reference)
        text = str(source)
        assert item in text and ".txt" not in text and "line" not in text.lower()


def test_bias_bounds_monotone():
    q = np.array([0.2, 0.3, 0.5])
    f = lambda **kw: cafed.theorem_1(ALPHA3, q, PI3, kw.pop("c", CONST), **({"mu": 0.5, "Gamma": 1.0} | kw)).value
    assert f(Gamma=2.0) > f() > f(mu=1.0)
    assert f(c=Constants(L=3.0, sigma2=1.0, delta_f=0.0)) > f()
    g = lambda qq: cafed.theorem_3(ALPHA3, qq, PI3, CONST, mu=0.5, Gamma_prime=1.0).value
    unbiased = ALPHA3 / PI3 / np.sum(ALPHA3 / PI3)
    path = [g((1 - s) * unbiased + s * np.array([1.0, 0, 0])) for s in (0.0, 0.3, 0.6, 0.9)]
    assert all(a < b for a, b in zip(path, path[1:]))


def test_bias_bounds_hold_on_quadratic_federations():
    """F_k = ½(w − c_k)ᵀH_k(w − c_k) with spectra in [μ, L]: (10), (11), (15) hold exactly."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        n, dim, mu, L = 4, 3, 0.5, 2.0
        Hs = []
        for _ in range(n):
            U = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
            Hs.append(U @ np.diag(rng.uniform(mu, L, dim)) @ U.T)
        cs = rng.normal(size=(n, dim))
        alpha, pi, q = rng.dirichlet(np.ones(n)), rng.uniform(0.1, 1, n), rng.dirichlet(np.ones(n))
        p = cafed.biased_importance(pi, q)
        F = lambda w, wts: sum(a * 0.5 * (w - c) @ Hk @ (w - c) for a, c, Hk in zip(wts, cs, Hs))
        argmin = lambda wts: np.linalg.solve(sum(a * Hk for a, Hk in zip(wts, Hs)),
                                             sum(a * Hk @ c for a, c, Hk in zip(wts, cs, Hs)))
        w_star, w_b = argmin(alpha), argmin(p)
        local = lambda w: np.array([0.5 * (w - c) @ Hk @ (w - c) for c, Hk in zip(cs, Hs)])  # F_k* = 0
        Gamma, Gamma_p = local(w_star).max(), local(w_b).max()
        const = Constants(L=L, sigma2=0.0, delta_f=0.0)
        eps_bias = F(w_b, alpha) - F(w_star, alpha)
        assert eps_bias <= cafed.theorem_1(alpha, q, pi, const, mu=mu, Gamma=Gamma).value * (1 + 1e-9)
        assert eps_bias <= cafed.theorem_3(alpha, q, pi, const, mu=mu, Gamma_prime=Gamma_p).value * (1 + 1e-9)
        w = w_b + rng.normal(size=dim)
        eps_opt = F(w, p) - F(w_b, p)
        total = cafed.theorem_1(alpha, q, pi, const, mu=mu, Gamma=Gamma, eps_opt=eps_opt)
        assert F(w, alpha) - F(w_star, alpha) <= total.value * (1 + 1e-9)


# ------------------------------------------------------------------------ CA-Fed heuristic
def test_greedy_keeps_everyone_for_huge_kappa_and_large_tau():
    alpha, pi = np.full(4, 0.25), np.array([0.9, 0.9, 0.1, 0.1])
    lam, gap = np.array([0, 0.9, 0.9, 0]), np.array([1, 2, 3, 4.0])
    assert cafed.greedy_weights(alpha, pi, lam, gap, kappa2_bar=1e6) == pytest.approx(alpha / pi)
    assert cafed.greedy_weights(alpha, pi, lam, gap, kappa2_bar=0.0, tau=10.0) == pytest.approx(alpha / pi)


def test_greedy_worked_example():
    """κ̄² = 0, so ε̂ = ⟨gap, p⟩ (mean gap of the kept clients). Pass B, |λ| order 2, 1, 3, 0 (by
    modulus: λ_1 = −0.8 comes second): drop 2 (2.5 → 2.33), keep 1 (→ 2.5), drop 3 (→ 1.5), keep 0.
    Pass A, π tied so |λ| order: drop 1 (1.5 → 1.0); 0 is the last client and stays."""
    alpha, pi = np.full(4, 0.25), np.array([0.5, 0.5, 0.5, 0.5])
    lam, gap = np.array([0.0, -0.8, 0.9, 0.1]), np.array([1.0, 2.0, 3.0, 4.0])
    q = cafed.greedy_weights(alpha, pi, lam, gap, kappa2_bar=0.0)
    assert q == pytest.approx([0.5, 0, 0, 0])
    assert cafed.proxy_objective(q, alpha, pi, gap, kappa2_bar=0.0) == pytest.approx(1.0)


def test_greedy_never_excludes_everyone_and_trades_off_bias():
    alpha, pi, lam = np.full(3, 1 / 3), np.array([0.9, 0.5, 0.1]), np.array([0.0, 0.0, 0.9])
    q = cafed.greedy_weights(alpha, pi, lam, np.array([5.0, 5.0, 5.0]), kappa2_bar=0.0)
    assert np.count_nonzero(q) == 1 and q[0] > 0  # ties count (τ = 0); the last client is never dropped
    gap = np.array([0.1, 0.1, 1.0])
    kept = [np.count_nonzero(cafed.greedy_weights(alpha, pi, lam, gap, kappa2_bar=k)) for k in (0.01, 1.0, 100.0)]
    assert kept == sorted(kept) and kept[-1] == 3 and kept[0] < 3


# ------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("call, message", [
    (lambda: cafed.theorem_1([0.6, 0.6, -0.2], [1, 1, 1], PI3, CONST, mu=1, Gamma=1), r"alpha\[2\] = -0.2"),
    (lambda: cafed.theorem_1([0.5, 0.3, 0.3], [1, 1, 1], PI3, CONST, mu=1, Gamma=1), "alpha sums to 1.1"),
    (lambda: cafed.theorem_1(ALPHA3, [1, 1, 1], [0.0, 0.5, 0.5], CONST, mu=1, Gamma=1), r"pi\[0\] = 0.0"),
    (lambda: cafed.theorem_3(ALPHA3, [1, 1, 1], [0.5, 1.2, 0.5], CONST, mu=1, Gamma_prime=1), r"pi\[1\] = 1.2"),
    (lambda: cafed.theorem_1(ALPHA3, [1, -1, 1], PI3, CONST, mu=1, Gamma=1), r"q\[1\] = -1.0"),
    (lambda: cafed.theorem_1(ALPHA3, [1, 1, 1], PI3, CONST, mu=-1, Gamma=1), "mu must be > 0, got -1"),
    (lambda: cafed.theorem_1(ALPHA3, [1, 1, 1], PI3, CONST, mu=1, Gamma=-2), "Gamma must be ≥ 0, got -2"),
    (lambda: cafed.theorem_1(ALPHA3, [1, 1, 1], PI3, CONST, mu=1), "needs Gamma"),
    (lambda: thm2(chains=(PI3, [1.0, 0.0, 0.0])), r"lam\[0\] = 1.0"),
    (lambda: thm2(chains=(PI3, [-0.5, 0.0, 0.0])), r"lam\[0\] = -0.5 .*-0.111"),
    (lambda: thm2(D=-1.0), "D must be > 0, got -1.0"),
    (lambda: thm2(H=0.0), "H must be > 0, got 0.0"),
    (lambda: thm2(sigma2=[1, -1, 1]), r"sigma2\[1\] = -1.0"),
    (lambda: thm2(T=0), "T must be an integer ≥ 1, got 0"),
    (lambda: thm2(variant="paper"), "variant must be one of 'corrected', 'printed', got 'paper'"),
    (lambda: thm2(correlation="tau"), "correlation must be one of"),
    (lambda: thm2(horizon="forever"), "horizon must be one of"),
    (lambda: thm2(decay=0.4), "decay = 0.4"),
    (lambda: thm2(eta=-0.1), "eta must be > 0, got -0.1"),
    (lambda: thm2(Gamma=None), "needs Gamma"),
    (lambda: cafed.greedy_weights(ALPHA3, PI3, [0.0, 1.5, 0.0], [1, 1, 1]), r"lam\[1\] = 1.5"),
    (lambda: cafed.greedy_weights(ALPHA3, PI3, LAM3, [1, -1, 1]), r"loss_gap\[1\] = -1.0"),
    (lambda: cafed.greedy_weights(ALPHA3, PI3, LAM3, [1, 1, 1], tau=-1), "tau must be ≥ 0, got -1"),
    (lambda: cafed.WeightProblem(PI3, [1.0, 0.0, 1.0], 1.0), r"A\[1\] = 0.0"),
    (lambda: cafed.solve_weights(problem_212(1.0), bias="kl"), "bias must be one of"),
    (lambda: cafed.mixing_quantities(H=1.0, T=5), "exactly one of P"),
])
def test_bad_inputs_raise_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()
