"""LOGIT's three checks on one small default run: inequality (23) with the generation error ε
measured, Thm 1 (eq. (10)) and Thm 2 (eq. (11)) as stated, with ε*, C₁ of Assumption 5.

Cross-checks are independent of the library's measuring code: the runs (which ``check``
batches) are replayed one by one with ``algorithms.iterate`` on a plain ``logit``; the per-client
generation errors e_{n,t}, the staleness τ_n^t and the Assumption 5 envelope are recomputed here
with loops and the quadratics' gradients in numpy closed form (∇F_n(x) = A_n(x − b_n)).
"""
import dataclasses
import math

import numpy as np
import pytest

import algorithms
from algorithms.problems import Quadratic
from bounds import Constants
from bounds import logit as bl
from participation.patterns import Bernoulli
from verify import theorems
from verify.checking import check
from verify.cli import main
from verify.theorems.logit import estimate_generator_constants

N, DIM, ROUNDS, I, SEEDS, P = 6, 3, 20, 2, 3, 0.5
NAMES = ("inequality_23", "theorem_1", "theorem_2")


@pytest.fixture(scope="module")
def quad():
    return Quadratic.random(N, DIM, noise_std=0.1, seed=0, diagonal=True, curvature=(0.2, 1.0))


@pytest.fixture(scope="module")
def closed(quad):
    """(A, b): A_n as (N, d, d) matrices, b_n as (N, d)."""
    A = quad.A.cpu().double().numpy()
    return (np.stack([np.diag(a) for a in A]) if A.ndim == 2 else A), quad.b.cpu().double().numpy()


def run_check(quad, which, **kwargs):
    """``check`` of logit.WHICH on Bernoulli(p = 0.5), recording (history, trace, algorithm, seed) per run."""
    runs = []
    theorem = kwargs.pop("theorem", f"logit.{which}")
    result = check("logit", quad, Bernoulli(P, N), theorem, seeds=SEEDS, rounds=ROUNDS, local_steps=I,
                   on_run=lambda h, trace, alg, seed: runs.append((h, trace, alg, seed)), **kwargs)
    return result, runs


@pytest.fixture(scope="module")
def default(quad):
    """The three rows on the same default run (default hyper-parameters: LOGIT's generator)."""
    return {which: run_check(quad, which) for which in NAMES}


# ------------------------------------------------------------------ loops


def client_errors(closed, states, mask, eta) -> np.ndarray:
    """e_{n,t} = (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖² for n ∉ A_t (NaN for n ∈ A_t), g̃_n = Δ̃_n/(ηI),
    x^n_{t,0} = x_t, x^n_{t,i+1} = x^n_{t,i} − η∇F_n(x^n_{t,i})."""
    A, b = closed
    E = np.full(mask.shape, np.nan)
    for t in range(mask.shape[0]):
        for n in range(N):
            if mask[t, n]:
                continue
            surrogate = states[t + 1].updates[n].double().numpy() / (eta * I)
            x, err = states[t].x.double().numpy(), 0.0
            for _ in range(I):
                g = A[n] @ (x - b[n])
                err += float((surrogate - g) @ (surrogate - g))
                x = x - eta * g
            E[t, n] = err / I
    return E


def staleness_loop(mask) -> np.ndarray:
    """τ_n^t: rounds since client n's last upload, counted from a virtual upload before round 1."""
    tau = np.zeros(mask.shape)
    for n in range(mask.shape[1]):
        last = -1
        for t in range(mask.shape[0]):
            if mask[t, n]:
                last = t
            else:
                tau[t, n] = t - last
    return tau


def replay(runs, problem, closed):
    """Per run: (mask, E, τ, final state), from a plain ``logit`` with the run's hyper-parameters."""
    out = []
    for history, trace, alg, seed in runs:
        plain = algorithms.get("logit", **alg.hparams)
        states = list(algorithms.iterate(plain, problem, trace, seed=seed))
        out.append((trace.mask, client_errors(closed, states, trace.mask, alg.eta_l), staleness_loop(trace.mask),
                    states[-1]))
    return out


def envelope_points(replayed):
    """(client, e, √(τ/t)) of every point n ∉ A_t of every run, t = 1..T."""
    points = []
    for mask, E, tau, _ in replayed:
        for t in range(mask.shape[0]):
            for n in range(N):
                if not mask[t, n]:
                    points.append((n, E[t, n], math.sqrt(tau[t, n] / (t + 1))))
    return points


def envelope_total(points, C1) -> float:
    """Σ_points (ε*_n + C₁x) with ε*_n = max over n's points of (e − C₁x)⁺."""
    floor = [0.0] * N
    for n, e, x in points:
        floor[n] = max(floor[n], e - C1 * x)
    return sum(floor[n] + C1 * x for n, _, x in points)


# ------------------------------------------------------------------ the default surrogate


@pytest.mark.slow
def test_default_surrogate_is_the_learned_generator(quad, closed, default):
    """LOGIT Alg. 1: by default the checks run LOGIT's generator (Sec. 3.2), trained along the run."""
    result, runs = default["theorem_1"]
    assert result.hparams["surrogate"] == "generator"
    assert all(alg.surrogate == "generator" for _, _, alg, _ in runs)
    final = replay(runs[:1], quad, closed)[0][3]
    assert final.params is not None and int(final.steps.sum()) > 0        # the generators were trained
    last, _ = run_check(quad, "theorem_1", hparams={"surrogate": "last"})
    assert last.hparams["surrogate"] == "last" and last.covered is True
    assert last.verdict == "holds"


# ------------------------------------------------------------------ the three rows


def test_three_rows_have_distinct_bounds_and_staleness_terms(closed, default):
    """(23) with ε measured; Thm 1 adds 8C₁√(τ̄_max(1 − p̄_min))/√T (33), Thm 2 8C₁(1 − p_min)^{3/2}/(√T√p_min) (38)."""
    rows = {w: r for w, (r, _) in default.items()}
    values = [rows[w].bound_value for w in NAMES]
    assert len({round(v, 9) for v in values}) == 3, values
    assert all(r.verdict == "holds" and r.conditions_hold for r in rows.values())
    assert rows["theorem_1"].values == rows["theorem_2"].values == rows["inequality_23"].values     # same runs
    assert "staleness" not in rows["inequality_23"].bound.terms
    shared = ("optimization", "variance", "drift_noise", "drift_heterogeneity")
    for which in ("theorem_1", "theorem_2"):
        terms = rows[which].bound.terms
        assert terms["staleness"] > 0
        assert all(terms[k] == pytest.approx(rows["inequality_23"].bound.terms[k], rel=1e-12) for k in shared)
    C1 = rows["theorem_1"].extras["C1"]
    assert C1 > 0 and rows["theorem_2"].extras["C1"] == C1
    _, runs = default["theorem_1"]
    tau_bar = np.mean([staleness_loop(trace.mask).max(axis=0).mean() for _, trace, _, _ in runs])
    assert rows["theorem_1"].extras["tau_max_bar (runs' traces)"] == pytest.approx(tau_bar, rel=1e-12)
    assert rows["theorem_1"].bound.terms["staleness"] == pytest.approx(
        8 * C1 * math.sqrt(tau_bar * (1 - P)) / math.sqrt(ROUNDS), rel=1e-10)
    assert rows["theorem_2"].bound.terms["staleness"] == pytest.approx(
        8 * C1 * (1 - P) ** 1.5 / (math.sqrt(ROUNDS) * math.sqrt(P)), rel=1e-10)
    e_tau = np.mean([[(1 - P) / P * (1 - (1 - P) ** (t - 1)) for _ in range(N)] for t in range(1, ROUNDS + 1)])
    assert rows["theorem_2"].extras["E[tau] (eq. (36), mean over n, t)"] == pytest.approx(e_tau, rel=1e-6)
    for which in ("theorem_1", "theorem_2"):
        extras = rows[which].extras
        assert {"generator error ε (measured)", "eps_star (mean over n, t)", "eps_star source", "C1", "C1 source",
                "sigma3^2", "sigma2^2", "p_bar"} <= set(extras)
        assert extras["eps_star source"].startswith("estimated") and extras["C1 source"].startswith("estimated")
        assert any(n.startswith("ε*, C₁ estimated from the runs: ") for n in rows[which].notes)
        # 4ε̄* with ε̄* = (1/TN) Σ (1 − p) ε*_n
        assert rows[which].bound.terms["generator_floor"] == pytest.approx(
            4 * (1 - P) * extras["eps_star (mean over n, t)"], rel=1e-10)


def test_measured_error_is_the_loop_of_eq_23(quad, closed, default):
    """ε = 4·(1/T) Σ_t (1/N) Σ_{n∉A_t} e_{n,t}, averaged over the runs: the last term of the (23) row."""
    result, runs = default["inequality_23"]
    replayed = replay(runs, quad, closed)
    eps = np.mean([4 * np.nansum(E, axis=1).mean() / N for _, E, _, _ in replayed])
    assert result.extras["generator error ε (measured)"] == pytest.approx(eps, rel=1e-9)
    assert result.bound.terms["generation_error"] == pytest.approx(eps, rel=1e-9)


def test_the_batched_runs_are_the_runs_alone(quad, default):
    """``check`` runs its seeds as one batch (different seeds and traces): each run's history and
    per-client observations are, bit for bit, those of the run alone."""
    _, runs = default["theorem_1"]
    assert len({seed for _, _, _, seed in runs}) == SEEDS
    for history, trace, alg, seed in runs:
        alone = algorithms.run(alg, quad, trace, seed=seed, observe=True)
        assert alone.same_as(history)
        for key in ("generator_error", "client_generator_error", "client_staleness"):
            assert np.array_equal(alone.observed[key], history.observed[key], equal_nan=True), key


def test_estimated_constants_satisfy_assumption_5(quad, closed, default):
    """Assumption 5 with (30), (32): e_{n,t} ≤ ε*_n + C₁√(τ_n^t/t) at every point n ∉ A_t of the runs;
    each ε*_n is attained, and C₁ gives the least Σ_points (ε*_n + C₁√(τ/t))."""
    result, runs = default["theorem_1"]
    replayed = replay(runs, quad, closed)
    for (history, _, _, _), (mask, E, tau, _) in zip(runs, replayed):
        got = history.observed["client_generator_error"]
        assert np.array_equal(np.isnan(got), mask)
        assert got[~mask] == pytest.approx(E[~mask], rel=1e-10)
        assert np.array_equal(history.observed["client_staleness"], tau)
    g = estimate_generator_constants([h for h, _, _, _ in runs], N)
    assert g.C1 == result.extras["C1"] and float(np.mean(g.eps_star)) == result.extras["eps_star (mean over n, t)"]
    points = envelope_points(replayed)
    assert len(points) > 20
    for n, e, x in points:
        assert e <= g.eps_star[n] + g.C1 * x + 1e-12 * max(1.0, e)
    for n in range(N):
        excess = [e - g.C1 * x for m, e, x in points if m == n]
        assert g.eps_star[n] == pytest.approx(max([0.0, *excess]), rel=1e-12, abs=1e-15)
    best = envelope_total(points, g.C1)
    for other in (0.0, 0.9 * g.C1, 0.99 * g.C1, 1.01 * g.C1, 1.1 * g.C1, 2 * g.C1):
        assert best <= envelope_total(points, other) * (1 + 1e-9)


def exact_constants(closed, extra=None) -> Constants:
    """L = max_n λ_max(A_n), σ² = d·0.1², Δ_f = f(0) − f*, F_0 = (1/N) Σ_n ‖A_n b_n‖²."""
    A, b = closed
    x_star = np.linalg.solve(A.sum(axis=0), np.einsum("nij,nj->i", A, b))
    f = (lambda x: float(np.mean([0.5 * (x - b[n]) @ A[n] @ (x - b[n]) for n in range(N)])))
    return Constants(L=float(np.linalg.eigvalsh(A)[:, -1].max()), sigma2=DIM * 0.01, delta_f=f(np.zeros(DIM)) - f(x_star),
                     F0=float(np.mean([np.sum((A[n] @ b[n]) ** 2) for n in range(N)])), n_clients=N, local_steps=I,
                     rounds=ROUNDS, extra=dict(extra or {}))


@pytest.mark.slow
def test_given_constants_are_used_and_marked(quad, closed):
    """ε*, C₁ given (constants.extra): used as given, sources 'given', no estimation note; Thm 1 is then
    (10) at these numbers. C₁ alone (``--set C1=``): ε*_n = max_t (e_{n,t} − C₁√(τ/t))⁺."""
    consts = exact_constants(closed, {"eps_star": 0.01, "C1": 0.5})
    result, runs = run_check(quad, "theorem_1", constants=consts)
    assert result.extras["eps_star source"] == result.extras["C1 source"] == "given"
    assert not any("estimated from the runs" in n for n in result.notes)
    tau_bar = np.mean([staleness_loop(trace.mask).max(axis=0).mean() for _, trace, _, _ in runs])
    c = dataclasses.replace(consts, zeta2=result.extras["sigma3^2"], extra={"sigma2_surrogate": 0.0})
    want = bl.theorem_1(c, np.full((ROUNDS, N), P), tau_bar, 0.01, 0.5, eta=result.step_sizes["eta"])
    assert result.bound_value == pytest.approx(want.value, rel=1e-12)

    result, runs = run_check(quad, "theorem_2", constants=exact_constants(closed), hparams={"C1": 0.5})
    assert result.extras["C1"] == 0.5 and result.extras["C1 source"] == "given"
    assert result.extras["eps_star source"].startswith("estimated")
    floor = [0.0] * N
    for n, e, x in envelope_points(replay(runs, quad, closed)):
        floor[n] = max(floor[n], e - 0.5 * x)
    assert result.extras["eps_star (mean over n, t)"] == pytest.approx(np.mean(floor), rel=1e-10)


# ------------------------------------------------------------------ mutation


def scaled(theorem, factor):
    """A false version of ``theorem``: its bound times ``factor`` (every term scaled)."""
    def plan(setup):
        inner = theorem.plan(setup)
        true = inner.bound
        inner.bound = lambda histories: dataclasses.replace(
            true(histories), value=true(histories).value * factor,
            terms={k: v * factor for k, v in true(histories).terms.items()})
        return inner
    return dataclasses.replace(theorem, name=f"{theorem.name}.false", plan=plan)


@pytest.mark.slow
@pytest.mark.parametrize("which", NAMES)
def test_a_false_bound_is_violated_on_the_run_where_the_true_one_holds(quad, default, which):
    """The same runs judged against the bound scaled by 1/100: 'violated'; the true bound: 'holds'."""
    true, _ = default[which]
    assert true.verdict == "holds"
    false, _ = run_check(quad, which, theorem=scaled(theorems.get(f"logit.{which}"), 0.01))
    assert false.values == true.values
    assert false.bound_value == pytest.approx(0.01 * true.bound_value, rel=1e-12)
    assert false.bound_value < true.measured
    assert false.verdict == "violated", str(false)


# ------------------------------------------------------------------ declarations


@pytest.mark.parametrize("which", NAMES)
def test_declarations_and_their_example_lines(capsys, which):
    """summary, example, patterns, algorithms are declared; the example line evaluates with ``fedverify bound``."""
    theorem = theorems.get(f"logit.{which}")
    assert theorem.summary and "\n" not in theorem.summary
    assert theorem.patterns == ("logit", "P2") and theorem.algorithms == ("logit",)
    assert main(["bound", theorem.name, *theorem.example.split()]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{theorem.name}: ")
    if which == "inequality_23":        # (23) by hand at the example's numbers (L=1, σ₁²=1, Δ=20, N=10, I=5, T=400)
        eta = min(1 / math.sqrt(5 * 400), 1 / (2 * math.sqrt(30) * 5))
        want = 4 * 20 / (eta * 5 * 400) + 2 * eta / 10 * (0.5 + 0.2 * 0.5) + 20 * 5 * eta**2 + 120 * 25 * eta**2 * 0.5 + 0.05
        assert f"value: {want:.6g}" in out


def test_the_envelope_programme_scales_with_the_errors_and_skips_overflowed_points():
    """The least-envelope programme is homogeneous in e (ε*, C₁ scale with it), so errors near the
    float limit give the scaled answer instead of a solver failure; points whose e overflowed carry
    no information and are left out."""
    from types import SimpleNamespace

    rng = np.random.default_rng(4)
    errors = rng.uniform(0.0, 2.0, size=(12, 5))
    errors[rng.uniform(size=errors.shape) < 0.4] = np.nan               # available clients
    stale = np.where(np.isnan(errors), 0.0, rng.integers(1, 6, size=errors.shape).astype(float))
    run = lambda e: SimpleNamespace(observed={"client_generator_error": e, "client_staleness": stale})
    base = estimate_generator_constants([run(errors)], 5)
    huge = estimate_generator_constants([run(errors * 1e250)], 5)
    assert base.C1 > 0 and huge.C1 == pytest.approx(base.C1 * 1e250, rel=1e-9)
    np.testing.assert_allclose(huge.eps_star, base.eps_star * 1e250, rtol=1e-9, atol=0)
    overflowed = errors.copy()
    overflowed[np.nonzero(~np.isnan(errors))[0][0], np.nonzero(~np.isnan(errors))[1][0]] = np.inf
    kept = errors.copy()
    kept[np.nonzero(~np.isnan(errors))[0][0], np.nonzero(~np.isnan(errors))[1][0]] = np.nan
    left_out = estimate_generator_constants([run(overflowed)], 5)
    assert left_out.C1 == pytest.approx(estimate_generator_constants([run(kept)], 5).C1, rel=1e-12)
