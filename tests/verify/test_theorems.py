"""verify.theorems: the measured left sides, the checks of Server momentum, LOGIT and CA-Fed,
coverage, the registry, a user's theorem, the Jupyter display and ``fedverify check --theorem``.

Every measured quantity is recomputed here from the paper's definition, independently of the
library's measuring code: the runs are replayed with ``algorithms.iterate`` and the quantities
are written as loops over its states, with the quadratics' gradients, losses and minimisers in
numpy closed form (f_i(x) = ½(x − b_i)ᵀA_i(x − b_i)).
"""
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import algorithms
from algorithms.problems import Classifier, Logistic, Quadratic
from bounds import Constants
from bounds import cafed as bc
from bounds import logit as bl
from bounds import momentum as bm
from bounds.core import Bound
from participation import Trace
from participation.patterns import Bernoulli, Markov, ReshuffledCyclic, Uniform
from verify import theorems
from verify.checking import check
from verify.cli import main
from verify.theorems import NotCheckable, Theorem, measures
from verify.verdicts import CheckResult

N, DIM, T = 6, 3, 30
PI = np.array([0.5, 0.6, 0.7, 0.8, 0.5, 0.9])
LAM = np.array([0.3, 0.0, 0.5, -0.1, 0.2, 0.4])


# ------------------------------------------------------------------ closed forms


class Closed:
    """A Quadratic in numpy: A_i as (N, d, d) matrices, b_i, and what the papers define from them."""

    def __init__(self, problem: Quadratic):
        A = problem.A.cpu().double().numpy()
        self.A = np.stack([np.diag(a) for a in A]) if A.ndim == 2 else A
        self.b = problem.b.cpu().double().numpy()
        self.n, self.d = self.b.shape
        eig = np.linalg.eigvalsh(self.A)
        self.L, self.mu = float(eig[:, -1].max()), float(eig[:, 0].min())

    def grads(self, x):
        """∇f_i(x) = A_i(x − b_i), (N, d)."""
        return np.einsum("nij,nj->ni", self.A, np.asarray(x, float)[None, :] - self.b)

    def grad(self, x):
        return self.grads(x).mean(axis=0)

    def losses(self, x):
        D = np.asarray(x, float)[None, :] - self.b
        return 0.5 * np.einsum("ni,nij,nj->n", D, self.A, D)

    def minimum(self, w):
        """argmin and min of Σ_k w_k f_k: x = (Σ w_k A_k)⁻¹ Σ w_k A_k b_k."""
        w = np.asarray(w, float)
        x = np.linalg.solve(np.einsum("n,nij->ij", w, self.A), np.einsum("n,nij,nj->i", w, self.A, self.b))
        return x, float(w @ self.losses(x))

    def bias(self, alpha, p) -> float:
        """ε_bias = F(w_B*) − F*, w_B* the minimiser of Σ_k p_k f_k (CA-Fed eq. (10))."""
        w_b, _ = self.minimum(p)
        return float(np.asarray(alpha, float) @ self.losses(w_b)) - self.minimum(alpha)[1]

    def constants(self, noise_std, K, rounds) -> Constants:
        """L = max_i λ_max(A_i), σ² = d s², Δ_f = f(0) − f*, F_0 = (1/N) Σ_i ‖A_i b_i‖² (FedSUM Thm 4.1)."""
        _, f_star = self.minimum(np.full(self.n, 1 / self.n))
        zero = np.zeros(self.d)
        return Constants(L=float(np.linalg.eigvalsh(self.A)[:, -1].max()), sigma2=self.d * noise_std ** 2,
                         delta_f=float(self.losses(zero).mean() - f_star),
                         F0=float((self.grads(zero) ** 2).sum(axis=1).mean()), n_clients=self.n, local_steps=K,
                         rounds=rounds)


def states_of(algorithm, problem, trace, seed, local_schedule=None) -> list:
    return list(algorithms.iterate(algorithm, problem, trace, seed=seed, local_schedule=local_schedule))


def xs(states) -> np.ndarray:
    return np.stack([s.x.detach().double().numpy() for s in states])


def grad_norm2(closed: Closed, states) -> np.ndarray:
    """‖∇f(x_t)‖² for t < T."""
    return np.array([closed.grad(x) @ closed.grad(x) for x in xs(states)[:-1]])


def paired_runs(pattern, rounds, seeds):
    """The (trace, seed) pairs of a bound over the participation: one trace per seed, drawn with seed 0."""
    return list(zip((Trace(m) for m in pattern.sample_batch(rounds, len(seeds), seed=0)), seeds))


def stage_means(g, lengths) -> float:
    """(1/S) Σ_s (1/T_s) Σ_{t in stage s} g_t, by a loop over the stages."""
    start, means = 0, []
    for length in lengths:
        means.append(sum(g[start:start + length]) / length)
        start += length
    return sum(means) / len(means)


def heterogeneity(closed: Closed, x) -> np.ndarray:
    """‖∇f_i(x) − ∇f(x)‖² per client."""
    G = closed.grads(x)
    return ((G - G.mean(axis=0)) ** 2).sum(axis=1)


@pytest.fixture(scope="module")
def quad():
    return Quadratic.random(N, DIM, noise_std=0.1, seed=0, diagonal=True, curvature=(0.2, 1.0))


@pytest.fixture(scope="module")
def closed(quad):
    return Closed(quad)


def exact(closed, K, rounds=T) -> Constants:
    return closed.constants(0.1, K, rounds)


def test_closed_forms_agree_with_the_problem(quad, closed):
    """The test's numpy quadratic is the library's (f, ∇f_i, client losses, exact constants)."""
    x = np.array([0.3, -1.2, 0.7])
    t = torch.as_tensor(x)
    assert quad.client_grads(t).numpy() == pytest.approx(closed.grads(x), rel=1e-12)
    assert quad.grads_at(t.expand(2, -1), torch.tensor([1, 4])).numpy() == pytest.approx(closed.grads(x)[[1, 4]])
    assert float(quad.loss(t)) == pytest.approx(closed.losses(x).mean(), rel=1e-12)
    c, pc = exact(closed, 1), quad.constants()
    assert (c.L, c.sigma2, c.delta_f, c.F0) == pytest.approx((pc.L, pc.sigma2, pc.delta_f, pc.F0), rel=1e-9)
    assert quad.strong_convexity() == pytest.approx(min(np.linalg.eigvalsh(closed.A)[:, 0]), rel=1e-12)


# ------------------------------------------------------------------ 1. the measured left sides


def test_stage_average_is_the_loop_over_stages(quad, closed):
    """Server momentum Sec. 4.2: Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s} ‖∇f(x_t)‖²."""
    schedule = bm.constant_and_drop((2.0, 1.0, 0.5), T, 0.01, nu=0.7, beta1=0.9)
    alg = algorithms.get("fedgm", schedule=schedule, local_steps=2)
    trace = Uniform(N, 3).sample(T, seed=1)
    history = algorithms.run(alg, quad, trace, seed=2)
    want = stage_means(grad_norm2(closed, states_of(alg, quad, trace, 2)), schedule.lengths)
    assert schedule.n_stages == 3 and sum(schedule.lengths) == T
    assert measures.stage_average(history, schedule.lengths) == pytest.approx(want, rel=1e-10)
    assert measures.stage_average(history, (T,)) == pytest.approx(history.mean_grad_norm2, rel=1e-12)
    with pytest.raises(ValueError, match="cover 29 rounds"):
        measures.stage_average(history, (10, 19))
    with pytest.raises(ValueError, match="record_every"):
        measures.stage_average(algorithms.run(alg, quad, trace, seed=2, record_every=2), schedule.lengths)


@pytest.mark.parametrize("schedule", [None, lambda t: (t + 1.0) ** -1], ids=["constant", "1/(t+1)"])
def test_averaged_params_is_the_step_weighted_average(quad, schedule):
    """CA-Fed §III-B: w̄_T = Σ_{t<T} η_t w_t / Σ_{t<T} η_t, η_t the local step of round t."""
    alg = algorithms.get("fedavg", eta_l=0.2, eta_g=1.0, local_steps=2)
    trace = Markov(PI, LAM).sample(T, seed=3)
    history = algorithms.run(alg, quad, trace, seed=1, local_schedule=schedule)
    x = xs(states_of(alg, quad, trace, 1, schedule))[:-1]
    eta = np.array([0.2 * (1.0 if schedule is None else schedule(t)) for t in range(T)])
    assert history.averaged_params == pytest.approx((eta[:, None] * x).sum(axis=0) / eta.sum(), rel=1e-12)
    if schedule is None:
        assert history.averaged_params == pytest.approx(x.mean(axis=0), rel=1e-12)
    else:   # a decaying step weights the early iterates more: not the plain mean
        assert not np.allclose(history.averaged_params, x.mean(axis=0))


def generator_errors(closed, states, mask, eta, I) -> np.ndarray:
    """LOGIT eq. (23)'s summand per round: (1/N) Σ_{n∉A_t} (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖², with
    g̃_n = Δ̃_n/(ηI) (the surrogate used in round t) and x^n_{t,i+1} = x^n_{t,i} − η∇F_n(x^n_{t,i}),
    x^n_{t,0} = x_t."""
    out = []
    for t in range(len(states) - 1):
        before, after = states[t], states[t + 1]
        total = 0.0
        for n in np.flatnonzero(~mask[t]):
            surrogate = after.updates[n].double().numpy() / (eta * I)
            x = before.x.double().numpy()
            err = 0.0
            for _ in range(I):
                g = closed.grads(x)[n]
                err += float((surrogate - g) @ (surrogate - g))
                x = x - eta * g
            total += err / I
        out.append(total / closed.n)
    return np.array(out)


@pytest.mark.parametrize("surrogate", ["last", "ws", "generator"])
def test_logit_generator_error_is_the_loop_of_eq_23(quad, closed, surrogate):
    """LOGIT eq. (23): the per-round generation error ``observe`` records, re-derived from the states."""
    extra = dict(hidden=4, history=2) if surrogate == "generator" else {}
    alg = algorithms.get("logit", eta_l=0.05, eta_g=1.0, local_steps=2, surrogate=surrogate, **extra)
    mask = Bernoulli(0.5, N).sample(20, seed=4).mask.copy()
    mask[7] = True                                     # a round with every client: no error
    history = algorithms.run(alg, quad, Trace(mask), seed=3, observe=True)
    want = generator_errors(closed, states_of(alg, quad, Trace(mask), 3), mask, 0.05, 2)
    got = history.observed["generator_error"]
    assert got.shape == (20,) and got[7] == 0.0 and (want > 0).sum() >= 10
    assert got == pytest.approx(want, rel=1e-10, abs=1e-15)


def test_autonomous_observations_are_the_states_arrivals(quad):
    """Server momentum Sec. 5.1 / App. H.1: K_{t,i} = E_{t,i}·K, τ_{t,i} ≤ min(D − 1, t) of the arrived clients."""
    alg = algorithms.get("fedgm-autonomous", eta_l=0.02, local_steps=2, max_delay=3, max_epochs=2)
    for trace in (Uniform(N, 3).sample(T, seed=0), Bernoulli(0.3, N).sample(T, seed=5)):
        history = algorithms.run(alg, quad, trace, seed=1, observe=True)
        states = states_of(alg, quad, trace, 1)
        steps, delays = history.observed["local_steps"], history.observed["delays"]
        assert len(steps) == len(delays) == T
        for t in range(T):
            after = states[t + 1]
            assert np.array_equal(np.flatnonzero(after.arrived.numpy()), np.flatnonzero(trace.mask[t]))
            assert np.array_equal(np.asarray(steps[t]), after.steps[after.arrived].numpy())
            assert np.array_equal(np.asarray(delays[t]), after.delays[after.arrived].numpy())
            assert set(np.asarray(steps[t]).tolist()) <= {2, 4}
            assert np.all(np.asarray(delays[t]) <= min(2, t))
    assert isinstance(steps, tuple) and any(len(s) == 0 for s in steps)   # Bernoulli: ragged, empty rounds


def test_cafed_weights_are_the_states_weights_times_eta_g(quad):
    """CA-Fed App. B: the analysis' weights are q^(t)·η̄; Unbiased with the oracle has q = α/π (§V-A)."""
    mask = Markov(PI, LAM).sample(T, seed=2).mask.copy()
    mask[4] = False                                   # a round without clients: no weights used
    alg = algorithms.get("cafed-unbiased", eta_l=0.05, eta_g=0.5, oracle=(tuple(PI), tuple(LAM)))
    history = algorithms.run(alg, quad, Trace(mask), seed=0, observe=True)
    states = states_of(alg, quad, Trace(mask), 0)
    W = history.observed["weights"]
    assert W.shape == (T, N) and np.isnan(W[4]).all()
    for t in range(T):
        if mask[t].any():
            assert W[t] == pytest.approx(0.5 * states[t + 1].weights.numpy(), rel=1e-15)
            assert W[t] == pytest.approx(0.5 * (1 / N) / PI, rel=1e-12)
    greedy = algorithms.get("cafed", eta_l=0.05, eta_g=1.0, oracle=(tuple(PI), tuple(LAM)), kappa2_bar=0.0)
    Wg = algorithms.run(greedy, quad, Trace(mask), seed=0, observe=True).observed["weights"]
    for t, state in enumerate(states_of(greedy, quad, Trace(mask), 0)[1:]):
        if mask[t].any():
            assert Wg[t] == pytest.approx(state.weights.numpy(), rel=1e-15)
    used = Wg[mask.any(axis=1)]
    assert not np.allclose(used, used[0]) and (used == 0).any()      # the greedy rule excludes, and re-chooses


def test_heterogeneity_and_param_norm_are_the_per_client_loop(quad, closed):
    """Server momentum A3 / LOGIT Assumption 4: (1/N) Σ_i ‖∇f_i(x_t) − ∇f(x_t)‖², its max over i; ‖x_t‖."""
    alg = algorithms.get("fedavg", eta_l=0.1, local_steps=2)
    trace = Bernoulli(0.5, N).sample(T, seed=0)
    history = algorithms.run(alg, quad, trace, seed=0, observe=True)
    x = xs(states_of(alg, quad, trace, 0))[:-1]
    spread = np.array([heterogeneity(closed, xt) for xt in x])
    assert history.observed["heterogeneity"] == pytest.approx(spread.mean(axis=1), rel=1e-10)
    assert history.observed["heterogeneity_max"] == pytest.approx(spread.max(axis=1), rel=1e-10)
    assert history.observed["param_norm"] == pytest.approx(np.linalg.norm(x, axis=1), rel=1e-12)
    recorded = algorithms.run(alg, quad, trace, seed=0, observe=True, record_every=7).observed["heterogeneity"]
    assert recorded == pytest.approx(spread.mean(axis=1)[::7], rel=1e-10)


@pytest.mark.parametrize("diagonal", [True, False], ids=["diagonal", "dense"])
def test_weighted_minimum_is_the_closed_form(diagonal):
    """CA-Fed eq. (4): argmin Σ_k w_k f_k = (Σ_k w_k A_k)⁻¹ Σ_k w_k A_k b_k for quadratics."""
    problem = Quadratic.random(5, 3, noise_std=0.1, seed=1, diagonal=diagonal, curvature=(0.2, 1.0))
    closed = Closed(problem)
    w = np.array([0.1, 0.3, 0.0, 0.4, 0.2])
    x, value = measures.weighted_minimum(problem, w)
    want_x, want = closed.minimum(w)
    assert x == pytest.approx(want_x, abs=1e-7) and value == pytest.approx(want, rel=1e-10)
    point = np.array([1.0, -0.5, 2.0])
    assert measures.weighted_losses(problem, point, w) == pytest.approx(w @ closed.losses(point), rel=1e-12)
    one = measures.weighted_minimum(problem, np.eye(5)[2])
    assert one[0] == pytest.approx(closed.b[2], abs=1e-6) and one[1] == pytest.approx(0.0, abs=1e-12)


def test_client_losses_average_to_the_loss():
    """f = (1/N) Σ_i f_i (FedSUM eq. (1)), for Quadratic and Logistic; μ = reg for Logistic."""
    q = Quadratic.random(4, 3, noise_std=0.1, seed=0, diagonal=True, curvature=(0.2, 1.0))
    lg = Logistic.synthetic(n_clients=4, n_samples=120, dim=3)
    rng = np.random.default_rng(0)
    for problem in (q, lg):
        for _ in range(3):
            x = torch.as_tensor(rng.standard_normal(problem.dim))
            losses = problem.client_losses(x)
            assert losses.shape == (4,)
            assert float(losses.mean()) == pytest.approx(float(problem.loss(x)), rel=1e-12)
    x = rng.standard_normal(3)
    assert q.client_losses(torch.as_tensor(x)).numpy() == pytest.approx(Closed(q).losses(x), rel=1e-12)
    assert lg.strong_convexity() == lg.reg > 0
    with pytest.raises(ValueError, match="per-client losses"):
        Classifier.synthetic(n_clients=3, n_samples=40, dim=3, hidden=2).client_losses(torch.zeros(3))


@pytest.mark.parametrize("name, extra", [
    ("fedgm", {}), ("logit", dict(surrogate="generator", hidden=4, history=2)),
    ("cafed", dict(oracle=(tuple(PI), tuple(LAM)))), ("fedgm-autonomous", dict(max_delay=3, max_epochs=2))])
def test_observing_does_not_change_the_run(quad, name, extra):
    """observe=True only records: the trajectory is the same bit for bit."""
    alg = algorithms.get(name, eta_l=0.05, local_steps=2, **extra)
    trace = Markov(PI, LAM).sample(20, seed=1)
    plain = algorithms.run(alg, quad, trace, seed=4)
    seen = algorithms.run(alg, quad, trace, seed=4, observe=True)
    assert seen.same_as(plain) and np.array_equal(seen.averaged_params, plain.averaged_params)
    assert plain.observed == {} and {"heterogeneity", "heterogeneity_max", "param_norm"} <= set(seen.observed)


# ------------------------------------------------------------------ 2. the theorems hold


def check_common(result, theorem_name, algorithm, extras):
    assert result.verdict == "holds", str(result)
    assert result.label == "holds" and result.covered is True and result.conditions_hold
    assert result.bound_name == theorem_name and result.algorithm == algorithm
    assert result.lhs == theorems.get(theorem_name).lhs
    assert set(extras) <= set(result.extras), set(result.extras)
    assert result.upper <= result.bound_value


MOMENTUM_EXTRAS = {"sigma_g2", "sigma_g2 source", "stages", "m"}


@pytest.mark.parametrize("name, beta, nu", [("fedgm", 0.9, 0.7), ("fedavgm", 0.9, 1.0), ("fedavg", 0.0, 0.0)])
def test_momentum_theorem_4_1_holds_under_full_participation(quad, closed, name, beta, nu):
    """Server momentum Thm 4.1 (full participation); FedAvgM is ν = 1, FedAvg ν = 0 (Sec. 3)."""
    K = 2
    consts = exact(closed, K)
    trace = Trace(np.ones((T, N), dtype=bool))
    result = check(name, quad, trace, "momentum.theorem_4_1", seeds=2, rounds=T, local_steps=K, constants=consts)
    check_common(result, "momentum.theorem_4_1", name, MOMENTUM_EXTRAS)
    assert result.extras["stages"] == 1 and result.extras["m"] == N
    eta_l = result.step_sizes["eta_l"]
    schedule = bm.single_stage(T, 1.0, eta_l, beta=beta, nu=nu)
    # η_l is the largest admissible: the hypotheses fail 0.11% above it (bisection to 0.1%)
    above = bm.theorem_4_1(dataclasses.replace(consts, zeta2=1.0), bm.single_stage(T, 1.0, eta_l * 1.0011, beta, nu))
    assert eta_l == pytest.approx(1 / (8 * K * consts.L)) or not above.valid
    # the runs, replayed: Ḡ per seed and σ_g² = the largest heterogeneity at their iterates
    if name == "fedavgm":    # FedAvgM(η' = η(1 − β), β) is FedGM(η, β, ν = 1)
        alg = algorithms.get("fedavgm", eta_l=eta_l, eta_g=1.0 - beta, beta=beta, local_steps=K)
        assert result.hparams["eta_g"] == pytest.approx(0.1)
    elif name == "fedavg":
        alg = algorithms.get("fedavg", eta_l=eta_l, eta_g=1.0, local_steps=K)
        assert any("FedAvg is FedGM with ν = 0" in n for n in result.notes)
    else:
        alg = algorithms.get("fedgm", schedule=schedule, local_steps=K)
    runs = [states_of(alg, quad, trace, seed) for seed in (0, 1)]
    assert result.values == pytest.approx([stage_means(grad_norm2(closed, s), (T,)) for s in runs], rel=1e-10)
    sigma_g2 = max(heterogeneity(closed, x).mean() for s in runs for x in xs(s)[:-1])
    assert result.extras["sigma_g2"] == pytest.approx(sigma_g2, rel=1e-10)
    want = bm.theorem_4_1(dataclasses.replace(consts, zeta2=sigma_g2), schedule)
    assert result.bound_value == pytest.approx(want.value, rel=1e-9)


@pytest.mark.parametrize("stages", [None, (2.0, 1.0, 0.5)], ids=["one stage", "constant and drop"])
def test_momentum_theorem_4_6_holds_under_uniform_sampling(quad, closed, stages):
    """Server momentum Thm 4.6 (m of n uniformly, footnote 4), over the noise and the sampling."""
    K, m, seeds = 1, 3, (0, 1, 2)
    consts = exact(closed, K)
    hparams = {} if stages is None else {"stages": stages}
    result = check("fedgm", quad, Uniform(N, m), "momentum.theorem_4_6", seeds=3, rounds=T, local_steps=K,
                   constants=consts, hparams=hparams)
    check_common(result, "momentum.theorem_4_6", "fedgm", MOMENTUM_EXTRAS)
    assert result.expectation and len(result.values) == 3 and len(set(result.per_trace_tau)) > 1
    eta_l = result.step_sizes["eta_l"]
    schedule = (bm.single_stage(T, 1.0, eta_l, 0.9, 0.7) if stages is None
                else bm.constant_and_drop(stages, T, eta_l, nu=0.7, beta1=0.9))
    assert result.extras["stages"] == schedule.n_stages and result.extras["m"] == m
    assert result.step_sizes["eta_g"] == schedule.eta_g[0]
    alg = algorithms.get("fedgm", schedule=schedule, local_steps=K)
    runs = [states_of(alg, quad, trace, seed) for trace, seed in paired_runs(Uniform(N, m), T, seeds)]
    assert result.values == pytest.approx([stage_means(grad_norm2(closed, s), schedule.lengths) for s in runs],
                                          rel=1e-10)
    sigma_g2 = max(heterogeneity(closed, x).mean() for s in runs for x in xs(s)[:-1])
    want = bm.theorem_4_6(dataclasses.replace(consts, zeta2=sigma_g2), schedule, m)
    assert result.bound_value == pytest.approx(want.value, rel=1e-9)


def local_step_stats(runs, k_max) -> bm.LocalStepStats:
    """φ_1, φ_2, φ_3 (Server momentum footnote 5) over every round with arrivals of every run."""
    rows = [s.steps[s.arrived].double().numpy() for states in runs for s in states[1:] if s.arrived.any()]
    phi1, phi2 = np.mean([r.mean() for r in rows]), np.mean([(r ** 2).mean() for r in rows])
    phi3 = np.mean([(1 / r).mean() for r in rows])
    return bm.LocalStepStats(float(phi1), float(phi2), float(phi3), float(max(k_max, max(r.max() for r in rows))))


@pytest.mark.parametrize("which, pattern", [("theorem_5_1", Uniform(N, 3)), ("corollary_g1", ReshuffledCyclic(N, 2))])
def test_momentum_autonomous_theorems_hold(quad, closed, which, pattern):
    """Server momentum Thm 5.1 (uniform arrival) and Cor G.1 (any arrival), τ = D − 1, φ from the logged K_{t,i}."""
    K, seeds, D, E = 1, (0, 1, 2), 3, 2
    consts = exact(closed, K)
    name = f"momentum.{which}"
    result = check("fedgm-autonomous", quad, pattern, name, seeds=3, rounds=T, local_steps=K, constants=consts,
                   hparams={"max_delay": D, "max_epochs": E})
    check_common(result, name, "fedgm-autonomous",
                 MOMENTUM_EXTRAS | {"phi1", "phi2", "phi3", "K_max", "tau", "largest observed delay"})
    assert result.hparams["max_delay"] == D and result.hparams["max_epochs"] == E
    eta_l = result.step_sizes["eta_l"]
    schedule = bm.single_stage(T, 1.0, eta_l, 0.9, 0.7)
    alg = algorithms.get("fedgm-autonomous", schedule=schedule, local_steps=K, max_delay=D, max_epochs=E)
    pairs = paired_runs(pattern, T, seeds)
    runs = [states_of(alg, quad, trace, seed) for trace, seed in pairs]
    assert result.values == pytest.approx([grad_norm2(closed, s).mean() for s in runs], rel=1e-10)
    stats = local_step_stats(runs, K * E)
    m = 3 if which == "theorem_5_1" else max(1, round(np.mean([t.mask.sum(axis=1).mean() for t, _ in pairs])))
    assert result.extras["m"] == m and result.extras["tau"] == D - 1
    assert (result.extras["phi1"], result.extras["phi2"], result.extras["phi3"], result.extras["K_max"]) == \
        pytest.approx((stats.phi1, stats.phi2, stats.phi3, stats.k_max), rel=1e-12)
    assert result.extras["largest observed delay"] == max(float(s.delays[s.arrived].max()) for r in runs for s in r[1:]
                                                          if s.arrived.any()) <= D - 1
    sigma_g2 = max(heterogeneity(closed, x).mean() for s in runs for x in xs(s)[:-1])
    function = bm.theorem_5_1 if which == "theorem_5_1" else bm.corollary_g1
    want = function(dataclasses.replace(consts, zeta2=sigma_g2), schedule, m, D - 1, stats)
    assert result.bound_value == pytest.approx(want.value, rel=1e-9)


LOGIT_EXTRAS = {"generator error ε (measured)", "sigma3^2", "sigma3^2 source", "sigma2^2", "p_bar"}
LOGIT_GENERATOR_EXTRAS = {"eps_star (mean over n, t)", "eps_star source", "C1", "C1 source"}


@pytest.mark.parametrize("surrogate", ["last", "generator"])
@pytest.mark.parametrize("which", ["inequality_23", "theorem_1", "theorem_2"])
def test_logit_theorems_hold(quad, closed, which, surrogate):
    """LOGIT eq. (23) with ε measured (= Thm 1 with 4ε̄* = ε, C₁ = 0); Thms 1–2 (eqs. (10)–(11)) add
    the staleness terms of (33) and (38) on top of ε*, C₁ of Assumption 5 (tests/verify/test_logit_checks.py)."""
    I, seeds, rounds = 2, (0, 1, 2), 20
    consts = exact(closed, I, rounds)
    extra = dict(hidden=4, history=2) if surrogate == "generator" else {}
    name = f"logit.{which}"
    result = check("logit", quad, Bernoulli(0.5, N), name, seeds=3, rounds=rounds, local_steps=I, constants=consts,
                   hparams={"surrogate": surrogate, **extra})
    check_common(result, name, "logit", LOGIT_EXTRAS | (LOGIT_GENERATOR_EXTRAS if which != "inequality_23" else set()))
    eta = min(1 / math.sqrt(I * rounds), 1 / (2 * math.sqrt(30) * consts.L * I))     # Thm 1, corrected cap
    assert result.step_sizes == {"eta": pytest.approx(eta, rel=1e-12), "eta_g": 1.0}
    alg = algorithms.get("logit", eta_l=eta, eta_g=1.0, local_steps=I, surrogate=surrogate, **extra)
    pairs = paired_runs(Bernoulli(0.5, N), rounds, seeds)
    runs = [states_of(alg, quad, trace, seed) for trace, seed in pairs]
    assert result.values == pytest.approx([grad_norm2(closed, s).mean() for s in runs], rel=1e-10)
    eps = np.mean([4 * generator_errors(closed, s, trace.mask, eta, I).mean() for s, (trace, _) in zip(runs, pairs)])
    sigma3 = max(heterogeneity(closed, x).max() for s in runs for x in xs(s)[:-1])
    assert result.extras["generator error ε (measured)"] == pytest.approx(eps, rel=1e-9)
    assert result.extras["sigma3^2"] == pytest.approx(sigma3, rel=1e-10)
    assert result.extras["sigma2^2"] == 0.0 and result.extras["p_bar"] == 0.5
    c = dataclasses.replace(consts, zeta2=result.extras["sigma3^2"], extra={"sigma2_surrogate": 0.0})
    eps_star = result.extras["generator error ε (measured)"] / (4 * (1 - 0.5))
    measured_23 = bl.theorem_1(c, np.full((rounds, N), 0.5), 0.0, eps_star, 0.0, eta=eta).value
    if which == "inequality_23":
        assert result.bound_value == pytest.approx(measured_23, rel=1e-12)
    else:
        assert result.bound.terms["staleness"] > 0 and result.bound_value > measured_23
        assert result.extras["C1 source"].startswith("estimated") and result.extras["C1"] > 0


CAFED_EXTRAS = {"measured bias F(w_B*) − F*", "Gamma", "Gamma'", "diam(W)", "D = L·diam(W)", "H = D·diam(W)",
                "largest local iterate norm", "Q", "eta_1", "decay", "q fixed", "weights"}


def test_cafed_theorem_2_holds_for_unbiased_weights(quad, closed):
    """CA-Fed Thm 2 (§III-B, eq. (13)) on w̄_T with steps (12). Thms 1 (eqs. (10), (11)) and 3 (eq. (15))
    are each judged on their own inequality: tests/verify/test_cafed_checks.py."""
    E, seeds = 1, (0, 1, 2)
    consts = exact(closed, E)
    name = "cafed.theorem_2"
    result = check("cafed-unbiased", quad, Markov(PI, LAM), name, seeds=3, rounds=T, local_steps=E, constants=consts)
    check_common(result, name, "cafed-unbiased", CAFED_EXTRAS)
    alpha = np.full(N, 1 / N)
    q = alpha / PI
    eta_1 = 1 / (2 * consts.L * (1 + 2 * E * q.sum()))                 # (12) with Q = ‖α/π‖₁
    assert result.step_sizes["eta_1"] == pytest.approx(eta_1, rel=1e-12)
    assert result.extras["Q"] == pytest.approx(q.sum(), rel=1e-12)
    alg = algorithms.get("cafed-unbiased", eta_l=eta_1, eta_g=1.0, local_steps=E, oracle=(tuple(PI), tuple(LAM)),
                         alpha=tuple(alpha))
    decay = lambda t: (t + 1.0) ** -1                                  # noqa: E731
    runs = [xs(states_of(alg, quad, trace, seed, decay)) for trace, seed in paired_runs(Markov(PI, LAM), T, seeds)]
    w_star, F_star = closed.minimum(alpha)
    p = PI * q / (PI @ q)                                              # π ⊙̃ q = α for the unbiased weights
    assert p == pytest.approx(alpha)
    steps = eta_1 / np.arange(1.0, T + 1)
    averages = [(steps[:, None] * x[:-1]).sum(axis=0) / steps.sum() for x in runs]
    assert result.values == pytest.approx([alpha @ closed.losses(w) - F_star for w in averages], rel=1e-7, abs=1e-12)
    # Γ = max_k F_k(w*) − F_k* with F_k* = 0 (each A_k ≻ 0); w_B* = w* here, so Γ' = Γ
    gamma = float(closed.losses(w_star).max())
    # W: the ball at 0 holding the server iterates, the local iterates (recorded), w* = w_B* and every w_k* = b_k
    radius = max(max(np.linalg.norm(x, axis=1).max() for x in runs), np.linalg.norm(w_star),
                 np.linalg.norm(closed.b, axis=1).max(), result.extras["largest local iterate norm"])
    assert (result.extras["Gamma"], result.extras["Gamma'"]) == pytest.approx((gamma, gamma), rel=1e-8)
    assert result.extras["diam(W)"] == pytest.approx(2 * radius, rel=1e-8)
    assert result.extras["measured bias F(w_B*) − F*"] == pytest.approx(0.0, abs=1e-10)
    assert result.extras["q fixed"] is True and result.extras["weights"] == "unbiased"
    opt = bc.theorem_2(q, consts, eta=eta_1, chains=(PI, LAM), Gamma=gamma, diam=2 * radius, decay=1.0,
                       horizon="finite")
    assert result.bound_value == pytest.approx(opt.value, rel=1e-6)


# ------------------------------------------------------------------ 3. coverage


def test_logit_without_surrogate_is_a_reference_row(quad):
    """LOGIT eq. (8) weighs every client 1/N; surrogate="none" (1/|A_t|, FedAvg) is not covered."""
    result = check("logit", quad, Bernoulli(0.5, N), "logit.theorem_1", seeds=2, rounds=20,
                   hparams={"surrogate": "none"})
    assert result.covered is False and "(ref)" in result.label
    assert any("not surrogate='none'" in n for n in result.notes)
    assert any("leave the setting of logit.theorem_1" in n for n in result.notes)


def test_reference_row_text_does_not_deny_the_covered_algorithm(quad):
    """verdicts.CheckResult.__str__: a covered algorithm whose run leaves the setting is not 'not proved for' it."""
    result = check("logit", quad, Bernoulli(0.5, N), "logit.theorem_1", seeds=2, rounds=20,
                   hparams={"surrogate": "none"})
    assert result.covered is False
    assert "is not proved for logit" not in str(result)


def test_cafed_greedy_weights_that_change_leave_the_setting(quad, closed):
    """CA-Fed Thm 2 is proved for one fixed q; greedy CA-Fed (Algorithm 1) re-chooses q every round."""
    result = check("cafed", quad, Markov(PI, LAM), "cafed.theorem_2", seeds=2, rounds=T, local_steps=1,
                   hparams={"kappa2_bar": 0.0})
    assert result.covered is False and result.label.endswith("(ref)") and result.extras["q fixed"] is False
    assert any("weights changed" in n for n in result.notes)
    # with κ̄² = 2 (Algorithm 1 excludes a client above it) no client is excluded on these runs: q stays fixed
    fixed = check("cafed", quad, Markov(PI, LAM), "cafed.theorem_2", seeds=2, rounds=T, local_steps=1,
                  hparams={"kappa2_bar": 2.0})
    assert fixed.extras["q fixed"] is True and fixed.covered is True


@pytest.mark.parametrize("pattern", [Uniform(N, 3), Bernoulli(0.5, N), Trace(np.eye(N, dtype=bool)[np.arange(T) % N])],
                         ids=["uniform", "bernoulli", "trace"])
def test_momentum_4_1_needs_full_participation(quad, pattern):
    """Server momentum Thm 4.1 assumes every client in every round."""
    with pytest.raises(ValueError, match="full participation") as err:
        check("fedgm", quad, pattern, "momentum.theorem_4_1", seeds=2, rounds=T)
    assert "\n" not in str(err.value) and "momentum.theorem_4_6" in str(err.value)


def test_momentum_4_1_checks_the_trace_it_runs_on_after_round_50(quad):
    """Server momentum Thm 4.1: the trace actually run must be full, not only its first 50 rounds."""
    p = np.ones((60, N))
    p[50:, 0] = 0.01                                  # client 0 almost never joins after round 50
    pattern = Bernoulli(p)
    assert not pattern.sample(60, seed=0).mask.all()  # the trace check runs on (trace_seed 0)
    with pytest.raises(ValueError, match="full participation"):
        check("fedgm", quad, pattern, "momentum.theorem_4_1", seeds=2, rounds=60)


def test_momentum_4_1_checks_the_trace_of_trace_seed(quad):
    """Server momentum Thm 4.1 judged on the trace of ``trace_seed`` (check's conditional-bound rule)."""
    pattern = Bernoulli(0.999, N)
    assert pattern.sample(T, seed=1).mask.all() and not pattern.sample(T, seed=0).mask.all()
    result = check("fedgm", quad, pattern, "momentum.theorem_4_1", seeds=2, rounds=T, trace_seed=1)
    assert result.covered is True and result.per_trace_tau[0][0] == 0


def test_momentum_4_6_needs_uniform_sampling(quad):
    """Server momentum footnote 4: m clients drawn uniformly without replacement."""
    with pytest.raises(ValueError, match="Uniform pattern"):
        check("fedgm", quad, Bernoulli(0.5, N), "momentum.theorem_4_6", seeds=2, rounds=T)


@pytest.fixture(scope="module")
def network():
    return Classifier.digits(n_clients=4, model="mlp", hidden=4)


@pytest.mark.parametrize("which", ["theorem_1", "theorem_2", "theorem_3"])
def test_cafed_needs_markov_and_convexity(quad, network, which):
    """CA-Fed Assumption 1 (Markov availability) and Assumptions 3–4 (convex local objectives)."""
    with pytest.raises(ValueError, match="Markov") as err:
        check("cafed-unbiased", quad, Bernoulli(0.5, N), f"cafed.{which}", seeds=2, rounds=20)
    assert "\n" not in str(err.value) and "Bernoulli" in str(err.value)
    given = Constants(L=1.0, sigma2=1.0, delta_f=1.0, n_clients=4, rounds=20)   # no estimation: it is refused first
    with pytest.raises(ValueError, match="convex") as err:
        check("cafed-unbiased", network, Markov(0.5, 0.2, n_clients=4), f"cafed.{which}", seeds=2, rounds=20,
              constants=given)
    assert "Classifier" in str(err.value)
    with pytest.raises(ValueError, match="cafed-unbiased"):
        check("fedavg", quad, Markov(PI, LAM), f"cafed.{which}", seeds=2, rounds=20)


def test_logit_needs_bernoulli_and_constant_probabilities_for_theorem_2(quad):
    """LOGIT Sec. 3.3: independent availability p_n^t; Thm 2 needs p_n constant in time."""
    per_round = Bernoulli(np.full((20, N), 0.5))
    with pytest.raises(ValueError, match="constant in time") as err:
        check("logit", quad, per_round, "logit.theorem_2", seeds=2, rounds=20, hparams={"surrogate": "last"})
    assert "logit.theorem_1" in str(err.value)
    assert check("logit", quad, per_round, "logit.theorem_1", seeds=2, rounds=20,
                 hparams={"surrogate": "last"}).covered is True
    with pytest.raises(ValueError, match="Bernoulli pattern"):
        check("logit", quad, Uniform(N, 3), "logit.theorem_1", seeds=2, rounds=20)
    with pytest.raises(ValueError, match="checked on logit"):
        check("fedavg", quad, Bernoulli(0.5, N), "logit.theorem_1", seeds=2, rounds=20)


# ------------------------------------------------------------------ 4. the registry


def test_names_are_what_bound_list_prints(capsys):
    assert main(["bound", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert sorted(listed) == sorted(theorems.names()) and len(listed) == len(set(listed))
    for name in theorems.names():
        theorem = theorems.get(name)
        assert theorem.name == name and theorem.checkable
        theorem.require_checkable()
    assert theorems.get("theorem_4_1") is theorems.get("fedsum.theorem_4_1")      # a bare name is FedSUM's
    assert theorems.get(" Momentum.Theorem_4_6 ").name == "momentum.theorem_4_6"


@pytest.mark.parametrize("bad", ["nosuch", "momentum.nosuch", 3])
def test_unknown_theorem_is_a_one_line_error(bad):
    with pytest.raises(ValueError) as err:
        theorems.get(bad)
    assert "\n" not in str(err.value) and repr(bad) in str(err.value)


def test_a_theorem_without_a_plan_is_not_checkable(quad):
    statement = Theorem(name="mine.lemma", bound=lambda constants: 1.0, lhs="x", lhs_latex="x", expectation="noise",
                        covers=("fedavg",), steps="any", plan=None, reason="a proof step")
    assert not statement.checkable and "not checkable by running: a proof step" in statement.describe()
    with pytest.raises(NotCheckable, match="a proof step"):
        check("fedavg", quad, Uniform(N, 3), statement, seeds=2, rounds=10)
    with pytest.raises(ValueError, match="expectation"):
        dataclasses.replace(statement, expectation="sometimes")


# ------------------------------------------------------------------ 5. a user's theorem


def test_user_theorem_too_small_is_violated(quad):
    """A made-up delay bound through the same contract: violated, and covered as declared."""
    mine = theorems.user_theorem(lambda constants, tau_max: 1e-6, covers=("fedavg",), name="tiny")
    trace = Uniform(N, 3).sample(T, seed=0)
    result = check("fedavg", quad, trace, mine, seeds=2)
    assert result.verdict == "violated" and result.covered is True and result.label == "violated"
    assert result.bound_value == 1e-6 and result.bound_name == "tiny" and result.lower > 1e-6
    assert check("fedsum", quad, trace, mine, seeds=2).covered is False


def test_user_theorem_with_its_own_measure(quad, closed):
    """measure(history, problem): here ‖∇f(x_{T−1})‖², recomputed from the replayed states."""
    mine = theorems.user_theorem(lambda constants, tau_max: 1e6, covers=("fedavg",),
                                 measure=lambda h, p: float(h.grad_norm2[-1]), lhs="‖∇f(x_{T−1})‖²")
    trace = Uniform(N, 3).sample(T, seed=0)
    result = check("fedavg", quad, trace, mine, seeds=2, local_steps=2)
    assert result.verdict == "holds" and result.lhs == "‖∇f(x_{T−1})‖²"
    assert result.values[0] == result.first_run.grad_norm2[-1]
    alg = algorithms.get("fedavg", eta_l=result.step_sizes["eta_l"], eta_g=result.step_sizes["eta_g"], local_steps=2)
    want = [grad_norm2(closed, states_of(alg, quad, trace, seed))[-1] for seed in (0, 1)]
    assert result.values == pytest.approx(want, rel=1e-10)
    assert result.measured == pytest.approx(np.mean(want), rel=1e-10)


@pytest.mark.parametrize("kwargs, match", [
    (dict(covers="fedavg"), "covers"), (dict(covers=("fedavg", 3)), "covers"), (dict(measure=3), "measure")])
def test_user_theorem_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        theorems.user_theorem(lambda constants, tau_max: 1.0, **kwargs)
    with pytest.raises(ValueError, match="needs zeta"):
        theorems.user_theorem(lambda constants, zeta: 1.0)


# ------------------------------------------------------------------ 6. Jupyter


def test_bound_shows_itself_in_jupyter(closed):
    consts = dataclasses.replace(exact(closed, 2), zeta2=0.5)
    bound = bm.theorem_4_6(consts, bm.single_stage(T, 1.0, 1e-3, 0.9, 0.7), 3)
    shown = bound._repr_markdown_()
    assert isinstance(bound, Bound) and "$$" in shown and bound.latex() in shown
    assert bound.terms and all(f"| {name} |" in shown for name in bound.terms)
    assert bound.conditions and all(c.name in shown for c in bound.conditions)
    assert str(bound.source) in shown


def test_check_result_and_theorem_show_themselves(quad):
    result = check("logit", quad, Bernoulli(0.5, N), "logit.theorem_2", seeds=2, rounds=20,
                   hparams={"surrogate": "last"})
    assert isinstance(result, CheckResult)
    shown = result._repr_markdown_()
    assert f"**{result.label}**" in shown and "left side" in shown and result.lhs in shown and "$$" in shown
    assert all(name in shown for name in result.extras)
    text = theorems.get("momentum.theorem_4_6").describe()
    assert "covers: fedgm, fedavgm, fednag, qhm" in text and "fedavg: FedAvg is FedGM" in text
    assert f"step sizes: {theorems.get('momentum.theorem_4_6').steps}" in text and "sigma_g2" in text
    logit_text = theorems.get("logit.theorem_1").describe()
    assert "covers: logit" in logit_text and "step sizes: η = min" in logit_text
    assert "$$" in theorems.get("cafed.theorem_2")._repr_markdown_()


# ------------------------------------------------------------------ 7. the command


SMALL = ["-N", "6", "-T", "30", "-K", "1", "--seeds", "2", "--no-progress"]


@pytest.mark.slow
def test_cli_check_theorem(tmp_path, capsys):
    """fedverify check --theorem momentum.theorem_4_6: every covered algorithm on P1."""
    assert main(["check", "--theorem", "momentum.theorem_4_6", *SMALL, "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["theorem"] == "momentum.theorem_4_6"
    assert summary["rows"] and all(r["theorem"] == "momentum.theorem_4_6" for r in summary["rows"])
    assert {r["algorithm"] for r in summary["rows"]} == set(theorems.get("momentum.theorem_4_6").covers)
    assert all(r["pattern"] == "P1" and r["verdict"] == "holds" for r in summary["rows"])
    assert "momentum.theorem_4_6: measured Ḡ" in out


@pytest.mark.slow
def test_cli_check_paper(tmp_path, capsys):
    """--paper logit: one table per theorem of the paper."""
    assert main(["check", "--paper", "logit", "--set", "surrogate=last", *SMALL, "-T", "20",
                 "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("logit.theorem_1: measured") == 1 and out.count("logit.theorem_2: measured") == 1
    assert out.count("logit.inequality_23: measured") == 1
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["theorem"] == ["logit.inequality_23", "logit.theorem_1", "logit.theorem_2"]
    assert {r["theorem"] for r in summary["rows"]} == {"logit.inequality_23", "logit.theorem_1", "logit.theorem_2"}


@pytest.mark.slow
def test_cli_stages_reach_the_momentum_schedule(tmp_path, capsys):
    """--set stages=2,1,0.5: the constant-and-drop schedule of Server momentum Sec. 4.1."""
    assert main(["check", "--theorem", "momentum.theorem_4_6", "--algorithms", "fedgm", "--set", "stages=2,1,0.5",
                 *SMALL, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["hparams"] == {"stages": [2, 1, 0.5]}
    (row,) = summary["rows"]
    assert row["result"]["extras"]["stages"] == 3 and row["eta_g"] == 2.0
    assert any("3 stage(s)" in n for n in row["result"]["notes"])


@pytest.mark.parametrize("args, fragment", [
    (["--theorem", "cafed.theorem_2", "--patterns", "P1"], "Markov"),
    (["--theorem", "momentum.theorem_4_6", "--set", "badtoken"], "NAME=VALUE"),
    (["--theorem", "nosuch.theorem"], "unknown theorem"),
    (["--paper", "logit", "--theorem", "logit.theorem_1"], "not both")])
def test_cli_check_errors_are_one_line(tmp_path, capsys, args, fragment):
    assert main(["check", *args, *SMALL, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_corollary_g1_needs_m_arrivals_every_round(quad):
    """Server momentum Cor G.1 (Algorithm 4): every server step takes m arrivals, so a participation
    that varies the count per round (a Bernoulli pattern) is refused, naming the reason; the search
    once 'found' a counterexample on a trace with no arrivals at all, which is no run of Algorithm 4."""
    with pytest.raises(ValueError, match="m arrivals"):
        check("fedgm-autonomous", quad, Bernoulli(0.5, N), "momentum.corollary_g1", seeds=2, rounds=20)


@pytest.mark.slow
def test_a_registered_theorem_is_found_by_name_on_the_command_line(tmp_path, capsys):
    """verify.theorems.register: a plugin file registers a user's theorem; `check --theorem NAME
    --plugin FILE` then checks it like the papers' (here a made-up bound FedAvg breaks)."""
    plugin = tmp_path / "mine.py"
    plugin.write_text("from verify.theorems import register, user_theorem\n"
                      "register(user_theorem(lambda constants, tau_max: 1e-3 * (1 + tau_max), covers=('fedavg',), "
                      "name='test.made_up'))\n")
    try:
        code = main(["check", "--theorem", "test.made_up", "--plugin", str(plugin), "--algorithms", "fedavg",
                     "--patterns", "P1", "-N", "4", "-T", "20", "-K", "1", "--seeds", "2", "--no-progress",
                     "-o", str(tmp_path / "out")])
        out = capsys.readouterr().out
        assert code == 0 and "test.made_up" in out and "violated" in out
        with pytest.raises(ValueError, match="already registered"):
            theorems.register(theorems.get("test.made_up"))
    finally:
        theorems.THEOREMS.pop("test.made_up", None)
