"""verify.theorems.cafed: each CA-Fed inequality judged on its own (Thm 1 eq. (10), Thm 1 eq. (11),
Thm 3 eq. (15), Thm 2 eq. (13)) and Lemma 1's set W.

Every measured quantity is recomputed here in numpy closed form for quadratic clients
f_k(x) = ½(x − b_k)ᵀA_k(x − b_k): minimisers of Σ_k w_k f_k by one linear solve, the runs replayed
with ``algorithms.iterate`` and the local steps of eq. (2) written as a loop. Deliberately false
versions of the bounds (a constant too small, a heterogeneity term set to 0) must be "violated"
on the same runs where the true ones hold.
"""
import dataclasses
import functools
import math

import numpy as np
import pytest
import torch

import algorithms
from algorithms import NoiseStream
from algorithms.problems import Quadratic
from bounds import cafed as bc
from participation import Trace
from participation.patterns import Markov
from verify import theorems
from verify.checking import check
from verify.theorems import cafed as vc

from .test_theorems import Closed

N, DIM, T, E = 6, 3, 30, 2
PI = np.array([0.5, 0.6, 0.7, 0.8, 0.5, 0.9])
LAM = np.array([0.3, 0.0, 0.5, -0.1, 0.2, 0.4])
ALPHA = np.full(N, 1 / N)
BIAS = "measured bias F(w_B*) − F*"


@pytest.fixture(scope="module")
def quad():
    return Quadratic.random(N, DIM, noise_std=0.1, seed=0, diagonal=True, curvature=(0.2, 1.0))


@pytest.fixture(scope="module")
def closed(quad):
    return Closed(quad)


# Two one-dimensional clients with A_k = 1 (κ = 1), minimisers 1 and 5, α = (½, ½), π = (0.9, 0.3):
# q = α gives p = (¾, ¼), w* = 3, w_B* = 2, ε_bias = ½, and the runs start at 0, beyond w_B*
# on the side away from w*. There (10) is nearly tight, so its constants matter.
PI2, LAM2 = np.array([0.9, 0.3]), np.array([0.2, 0.1])


@pytest.fixture(scope="module")
def tight():
    return Quadratic(np.ones((2, 1)), np.array([[1.0], [5.0]]), noise_std=0.3)


def runs_of(name, problem, pattern, seeds=3, rounds=T, local_steps=E, **kwargs):
    """check(...) and every (history, trace, algorithm, seed) it ran."""
    seen = []
    result = check("cafed-unbiased", problem, pattern, name, seeds=seeds, rounds=rounds, local_steps=local_steps,
                   on_run=lambda *run: seen.append(run), **kwargs)
    return result, seen


def averaged(alg, problem, trace, seed, eta_1):
    """w̄_T = Σ_{t<T} η_t w_t / Σ η_t, η_t = η_1/(t + 1) (CA-Fed §III-B with steps (12), a = 1), replayed."""
    states = list(algorithms.iterate(alg, problem, trace, seed=seed, local_schedule=lambda t: (t + 1.0) ** -1))
    x = np.stack([s.x.double().numpy() for s in states])[:-1]
    steps = eta_1 / np.arange(1.0, len(x) + 1)
    return (steps[:, None] * x).sum(axis=0) / steps.sum()


# ------------------------------------------------------------------ the default has a bias


def test_default_weights_ignore_availability_so_p_differs_from_alpha(quad, closed):
    """q = α (weights="target") gives p = π ⊙̃ α ≠ α (eq. (4)) and ε_bias > 0; q = α/π gives p = α, ε_bias = 0."""
    result, seen = runs_of("cafed.theorem_1", quad, Markov(PI, LAM))
    for history, *_ in seen:
        used = history.observed["weights"][~np.isnan(history.observed["weights"]).any(axis=1)]
        assert used == pytest.approx(np.tile(ALPHA, (len(used), 1)), rel=1e-12)
    p = PI * ALPHA / (PI @ ALPHA)
    assert np.abs(p - ALPHA).max() > 0.04
    assert result.extras[BIAS] == pytest.approx(closed.bias(ALPHA, p), abs=1e-9) and result.extras[BIAS] > 1e-3
    assert result.extras["weights"] == "target"
    unbiased = check("cafed-unbiased", quad, Markov(PI, LAM), "cafed.theorem_3", seeds=2, rounds=T,
                     hparams={"weights": "unbiased"})
    assert abs(unbiased.extras[BIAS]) < 1e-12 and unbiased.bound_value < 1e-12


# ------------------------------------------------------------------ the measured sides in closed form


def test_theorem_1_values_are_the_closed_form_gaps(quad, closed):
    """CA-Fed eq. (10) at w̄_T: per run F(w̄_T) − F* − 2κ²(F_B(w̄_T) − F_B*) against 2κ² ε_bias."""
    result, seen = runs_of("cafed.theorem_1", quad, Markov(PI, LAM))
    assert result.verdict == "holds" and result.covered is True and result.conditions_hold, str(result)
    eta_1 = 1 / (2 * closed.L * (1 + 2 * E * (ALPHA / PI).sum()))          # (12) with Q = ‖α/π‖₁
    assert result.step_sizes["eta_1"] == pytest.approx(eta_1, rel=1e-12)
    alg = algorithms.get("cafed-unbiased", eta_l=eta_1, eta_g=1.0, local_steps=E, oracle=((1.0,) * N, (0.0,) * N),
                         alpha=tuple(ALPHA))
    pairs = list(zip((Trace(m) for m in Markov(PI, LAM).sample_batch(T, 3, seed=0)), (0, 1, 2)))
    assert [s for *_, s in seen] == [0, 1, 2]
    kappa2 = (closed.L / closed.mu) ** 2
    p = PI * ALPHA / (PI @ ALPHA)
    _, F_star = closed.minimum(ALPHA)
    _, F_B_star = closed.minimum(p)
    total, opt = [], []
    for trace, seed in pairs:
        w = averaged(alg, quad, trace, seed, eta_1)
        total.append(ALPHA @ closed.losses(w) - F_star)
        opt.append(p @ closed.losses(w) - F_B_star)
    want = np.array(total) - 2 * kappa2 * np.array(opt)
    assert result.values == pytest.approx(want, rel=1e-8, abs=1e-8)
    assert result.extras["F(w̄_T) − F* (mean)"] == pytest.approx(np.mean(total), rel=1e-8)
    assert result.extras["eps_opt = F_B(w̄_T) − F_B* (mean)"] == pytest.approx(np.mean(opt), rel=1e-8)
    assert result.extras["kappa"] == pytest.approx(math.sqrt(kappa2), rel=1e-12)
    assert result.bound_value == pytest.approx(2 * kappa2 * closed.bias(ALPHA, p), rel=1e-7)


@pytest.mark.parametrize("which", ["theorem_1_bias", "theorem_3"])
def test_bias_rows_are_the_closed_form_without_a_run(quad, closed, which):
    """CA-Fed eq. (11) ε_bias ≤ κ²χ²_{α‖p}Γ and eq. (15) ε_bias ≤ 4κ²d_TV²Γ', with no run at all."""
    result = check("cafed-unbiased", quad, Markov(PI, LAM), f"cafed.{which}", seeds=2, rounds=T)
    assert result.verdict == "holds" and result.label == "holds" and result.covered is True, str(result)
    assert result.first_run is None and result.seeds == () and len(result.values) == 1
    p = PI * ALPHA / (PI @ ALPHA)
    w_star, _ = closed.minimum(ALPHA)
    w_b, _ = closed.minimum(p)
    eps = closed.bias(ALPHA, p)
    gamma, gamma_prime = closed.losses(w_star).max(), closed.losses(w_b).max()       # F_k* = 0 (A_k ≻ 0)
    kappa2 = (closed.L / closed.mu) ** 2
    assert result.values[0] == pytest.approx(eps, abs=1e-9) and eps > 1e-3
    assert (result.extras["Gamma"], result.extras["Gamma'"]) == pytest.approx((gamma, gamma_prime), rel=1e-8)
    chi2 = ((ALPHA - p) ** 2 / p).sum()
    tv = 0.5 * np.abs(ALPHA - p).sum()
    want = kappa2 * chi2 * gamma if which == "theorem_1_bias" else 4 * kappa2 * tv ** 2 * gamma_prime
    assert result.bound_value == pytest.approx(want, rel=1e-7)
    assert result.values[0] <= result.bound_value


# ------------------------------------------------------------------ false bounds are caught


def test_false_versions_of_eq_10_are_violated_where_eq_10_holds(tight):
    """CA-Fed eq. (10) with κ² for 2κ², or without ε_bias, is false on runs where (10) holds."""
    theorem = theorems.get("cafed.theorem_1")
    pattern = Markov(PI2, LAM2)
    true, _ = runs_of(theorem, tight, pattern, local_steps=1)
    assert true.verdict == "holds" and true.extras[BIAS] == pytest.approx(0.5, rel=1e-8), str(true)
    assert true.bound_value == pytest.approx(1.0, rel=1e-8)                    # 2κ²ε_bias with κ = 1
    for mutant in (functools.partial(vc._decomposition_plan, factor=1.0), functools.partial(vc._decomposition_plan,
                                                                                          bias=False)):
        false, _ = runs_of(dataclasses.replace(theorem, plan=mutant), tight, pattern, local_steps=1)
        assert false.verdict == "violated", str(false)


@pytest.mark.parametrize("which, function, keyword", [("theorem_1_bias", "theorem_1", "Gamma"),
                                                      ("theorem_3", "theorem_3", "Gamma_prime")])
def test_bias_bounds_without_heterogeneity_are_violated(tight, quad, monkeypatch, which, function, keyword):
    """CA-Fed eqs. (11), (15) with Γ = 0 (resp. Γ' = 0) claim ε_bias = 0: violated when p ≠ α."""
    for problem, pattern in ((tight, Markov(PI2, LAM2)), (quad, Markov(PI, LAM))):
        true = check("cafed-unbiased", problem, pattern, f"cafed.{which}", seeds=2, rounds=T)
        assert true.verdict == "holds", str(true)
    real = getattr(bc, function)
    monkeypatch.setattr(bc, function, lambda *a, **k: real(*a, **{**k, keyword: 0.0}))
    for problem, pattern in ((tight, Markov(PI2, LAM2)), (quad, Markov(PI, LAM))):
        false = check("cafed-unbiased", problem, pattern, f"cafed.{which}", seeds=2, rounds=T)
        assert false.bound_value == 0.0 and false.verdict == "violated", str(false)


# ------------------------------------------------------------------ Lemma 1's W


def local_norms(closed, alg, problem, trace, seed, eta_1) -> tuple[list, np.ndarray]:
    """Server iterates and the largest ‖w^k_{t,j}‖ per round, j = 0..E (local GD, eq. (2), σ = 0)."""
    states = list(algorithms.iterate(alg, problem, trace, seed=seed, local_schedule=lambda t: (t + 1.0) ** -1))
    points, largest = [], []
    for t in range(trace.n_rounds):
        x_t = states[t].x.double().numpy()
        points.append(x_t)
        top = math.nan
        for k in np.flatnonzero(trace.mask[t]):
            x = x_t.copy()
            for _ in range(alg.local_steps + 1):
                points.append(x.copy())
                top = np.linalg.norm(x) if math.isnan(top) else max(top, np.linalg.norm(x))
                x = x - eta_1 / (t + 1) * closed.A[k] @ (x - closed.b[k])
        largest.append(top)
    points.append(states[-1].x.double().numpy())
    return points, np.array(largest)


def test_W_holds_local_iterates_and_D_bounds_every_client_gradient():
    """CA-Fed Lemma 1, eq. (6): ‖∇F_k(w)‖ ≤ D on W, W holding the server and local iterates and every w_k*."""
    problem = Quadratic.random(N, DIM, noise_std=0.0, seed=3, diagonal=False, curvature=(0.2, 1.0))
    closed = Closed(problem)
    result, seen = runs_of("cafed.theorem_2", problem, Markov(PI, LAM), local_steps=3)
    assert result.verdict == "holds" and result.conditions_hold, str(result)
    assert any(c.name.startswith("Lemma 1") and c.holds for c in result.conditions)
    eta_1 = result.step_sizes["eta_1"]
    w_star, _ = closed.minimum(ALPHA)
    points = [w_star, *closed.b]                  # w* = w_B* (q = α/π, p = α), and w_k* = b_k
    for history, trace, alg, seed in seen:
        visited, largest = local_norms(closed, alg, problem, trace, seed, eta_1)
        assert history.observed["local_norm"] == pytest.approx(largest, rel=1e-10, nan_ok=True)
        points += visited
    D = result.extras["D = L·diam(W)"]
    assert D == pytest.approx(closed.L * result.extras["diam(W)"], rel=1e-12)
    norms = [np.linalg.norm(closed.grads(w), axis=1).max() for w in points]
    assert max(norms) <= D
    assert max(np.linalg.norm(w) for w in points) <= result.extras["diam(W)"] / 2 * (1 + 1e-12)
    server = max(max(h.observed["param_norm"].max(), np.linalg.norm(h.final_params)) for h, *_ in seen)
    assert closed.L * 2 * max(server, np.linalg.norm(w_star)) < max(norms)     # W without the w_k*: D too small
    assert result.extras["largest local iterate norm"] == pytest.approx(
        max(np.nanmax(h.observed["local_norm"]) for h, *_ in seen), rel=1e-12)


def test_recording_local_iterates_leaves_the_run_unchanged(quad):
    """The runs of the CA-Fed plans record ‖w^k_{t,j}‖ only: same trajectory bit for bit, same hyper-parameters."""
    trace = Markov(PI, LAM).sample(20, seed=1)
    for name, extra in (("cafed-unbiased", {}), ("cafed", dict(oracle=(tuple(PI), tuple(LAM))))):
        alg = algorithms.get(name, eta_l=0.05, local_steps=2, **extra)
        seen = vc._observing(alg)
        assert seen.name == alg.name and seen.hparams == alg.hparams
        plain = algorithms.run(alg, quad, trace, seed=4, observe=True, local_schedule=lambda t: (t + 1.0) ** -1)
        watched = algorithms.run(seen, quad, trace, seed=4, observe=True, local_schedule=lambda t: (t + 1.0) ** -1)
        assert watched.same_as(plain) and np.array_equal(watched.averaged_params, plain.averaged_params)
        assert np.nanmin(vc.local_iterate_norms(watched)) > 0


def probed_norms(alg, problem, trace, seed, schedule) -> np.ndarray:
    """Per round the largest norm of every point a stochastic gradient is taken at and of the point
    η_t·g later, replayed client by client with the run's draws: the kept clients' local iterates
    w^k_{t,j}, j = 0..E (eq. (2)); an active client that CA-Fed excludes takes only its report's
    gradient at w_{t,0} (the draws of step 0)."""
    states = list(algorithms.iterate(alg, problem, trace, seed=seed, local_schedule=schedule))
    noise = NoiseStream(seed)
    largest = []
    for t in range(trace.n_rounds):
        eta, top = alg.eta_l * schedule(t), math.nan
        for i in np.flatnonzero(trace.mask[t]):
            x = states[t].x
            for k in range(alg.local_steps if states[t + 1].kept[i] else 1):
                g = problem.stochastic_grads(x[None], torch.tensor([i]), noise.draws(t, k, torch.tensor([i])))[0]
                for point in (x, x - eta * g):
                    top = float(point.norm()) if math.isnan(top) else max(top, float(point.norm()))
                x = x - eta * g
        largest.append(top)
    return np.array(largest)


@pytest.mark.parametrize("name, extra", [("cafed-unbiased", {}), ("cafed", dict(kappa2_bar=0.05))])
def test_recorded_local_norms_follow_the_draws_alone_and_in_a_batch(quad, name, extra):
    """``local_norm`` is per run the largest ‖w^k_{t,j}‖ of round t with the round's η_t, on noisy
    clients; a batch with other seeds, traces (one with empty rounds) and step sizes records it bit
    for bit as the runs alone."""
    schedule = lambda t: (t + 1.0) ** -0.75                         # noqa: E731
    masks = [Markov(PI, LAM).sample(12, seed=s).mask.copy() for s in range(3)]
    masks[1][[0, 4, 5]] = False
    algs = [vc._observing(algorithms.get(name, eta_l=e, eta_g=g, local_steps=3, **extra))
            for e, g in ((0.3, 1.0), (0.5, 0.6), (0.2, 1.3))]
    seeds = [2, 7, 2]
    alone = [algorithms.run(a, quad, m, seed=s, observe=True, local_schedule=schedule)
             for a, m, s in zip(algs, masks, seeds)]
    batch = algorithms.run_batch(algs, quad, masks, seeds, observe=True, local_schedule=schedule)
    for a, b, alg, mask, seed in zip(alone, batch, algs, masks, seeds):
        assert a.same_as(b)
        assert np.array_equal(vc.local_iterate_norms(a), vc.local_iterate_norms(b), equal_nan=True)
        want = probed_norms(alg, quad, Trace(mask), seed, schedule)
        assert vc.local_iterate_norms(b) == pytest.approx(want, rel=1e-13, nan_ok=True)
    assert np.isnan(vc.local_iterate_norms(batch[1])[[0, 4, 5]]).all()
    if name == "cafed":                                             # some client was excluded
        assert any((h.observed["weights"] == 0).any() for h in batch)


def test_declarations_and_bound_examples():
    """Every CA-Fed theorem is declared with a summary, patterns, algorithms and a working bound example."""
    from verify.cli import main

    for name in ("cafed.theorem_1", "cafed.theorem_1_bias", "cafed.theorem_2", "cafed.theorem_3"):
        theorem = theorems.get(name)
        assert theorem.summary.startswith("CA-Fed Thm") and theorem.patterns and theorem.algorithms == vc.COVERS
        function = theorem.bound.__name__                       # the bounds function the example evaluates
        assert main(["bound", f"cafed.{function}", *theorem.example.split()]) == 0
