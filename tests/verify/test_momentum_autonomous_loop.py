"""Server momentum (Sun, Wu, Huang, Zhang, AAAI 2024) Thm 5.1 and Cor G.1: the engine's
``fedgm-autonomous`` and the quantities ``verify.check`` takes from it, against a plain numpy
loop written from Algorithm 4.

The loop is written from the paper, not from the engine: on a noise-free quadratic
(f_i(x) = ½(x − b_i)ᵀA_i(x − b_i), f = (1/N) Σ_i f_i, every local gradient exact), at round t
each client i ∈ S_t starts from the stale global model x_{t−τ_{t,i}} (Algorithm 4, lines 3–4),
runs K_{t,i} local GD steps (LocalOPT, Algorithm 2), normalises its update by K_{t,i}
(Algorithm 4, line 7; App. B.2), the server averages the m updates (line 10) and takes the
FedGM step of round t's stage (lines 11–13: d ← (1 − β_s)Δ + β_s d, h = (1 − ν_s)Δ + ν_s d,
x ← x − η_s h), never resetting d.

Only the draws of τ_{t,i} and K_{t,i} come from fedverify's noise (the paper leaves them to
the system; its experiments, App. H.1, pick one of the last D models and 1..E local epochs):
re-derived here from the documented rule — for every round t and client i the two uniforms
(u_1, u_2) of the run's noise at step key ARRIVAL_KEY, τ_{t,i} = ⌊u_1·min(D, t + 1)⌋ ~
U{0..min(D−1, t)}, E_{t,i} = 1 + ⌊u_2·E⌋ ~ U{1..E}, K_{t,i} = E_{t,i}·K — and compared with what
the engine logged.
"""
import dataclasses

import numpy as np
import pytest
import torch

import algorithms
from algorithms import NoiseStream
from algorithms.autonomous import ARRIVAL_KEY
from algorithms.problems import Quadratic
from bounds import Constants
from bounds import momentum as bm
from participation import Trace
from verify.checking import check
from verify.theorems.measures import stage_average

N, DIM, M, T = 5, 3, 2, 28          # 5 clients, m = 2 arrivals every round, 28 rounds
K, D, E = 2, 4, 3                   # K steps per epoch, max_delay D (τ = D − 1 = 3), max_epochs E
ETA_L = 0.05
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def problem():
    return Quadratic.random(N, DIM, heterogeneity=1.5, noise_std=0.0, seed=7, curvature=(0.2, 1.0))


@pytest.fixture(scope="module")
def trace():
    """A fixed trace: m = 2 clients arrive every round, drawn once without replacement."""
    rng = np.random.default_rng(11)
    mask = np.zeros((T, N), dtype=bool)
    for t in range(T):
        mask[t, rng.choice(N, M, replace=False)] = True
    return Trace(mask)


@pytest.fixture(scope="module")
def schedule():
    """Three stages, η = (2, 1, 0.5), T_s = 4, 8, 16 (W_2 = 8), ν = 0.7, β_s keeping W_1 fixed."""
    s = bm.constant_and_drop((2.0, 1.0, 0.5), T, ETA_L, nu=0.7, beta1=0.5)
    assert s.lengths == (4, 8, 16) and s.n_stages == 3
    return s


def closed_form(problem):
    A = problem.A.double().numpy()
    A = np.stack([np.diag(a) for a in A]) if A.ndim == 2 else A
    return A, problem.b.double().numpy()


def grad_f(A, b, x):
    """∇f(x) = (1/N) Σ_i A_i(x − b_i): the unweighted mean over clients (Sec. 3, the objective)."""
    return np.einsum("nij,nj->ni", A, x[None, :] - b).mean(axis=0)


def arrival_draws(seed, t, n_clients):
    """τ_i = ⌊u_1·min(D, t + 1)⌋ and K_{t,i} = K(1 + ⌊u_2·E⌋) for all N clients, from each
    client's uniforms (u_1, u_2) of (seed, t, ARRIVAL_KEY), drawn client by client."""
    noise = NoiseStream(seed)
    u = np.stack([noise.draws(t, ARRIVAL_KEY, torch.tensor([i])).uniform(2)[0].numpy() for i in range(n_clients)])
    tau = np.floor(u[:, 0] * min(D, t + 1)).astype(np.int64)
    epochs = 1 + np.floor(u[:, 1] * E).astype(np.int64)
    return tau, epochs * K


def algorithm_4(A, b, mask, seed, schedule):
    """Algorithm 4 by hand. Returns x_0..x_T (T+1, d) and, per round, S_t, K_{t,i}, τ_{t,i}
    (aligned with S_t) and K_{t,i} of all N clients (the proof of Thm 5.1 averages over all n)."""
    rounds, n = mask.shape
    stage_of = np.repeat(np.arange(schedule.n_stages), schedule.lengths)
    x, d = np.zeros(b.shape[1]), np.zeros(b.shape[1])
    xs, log = [x], []
    for t in range(rounds):
        S = np.flatnonzero(mask[t])
        tau_all, K_all = arrival_draws(seed, t, n)
        updates = []
        for i in S:
            start = xs[t - tau_all[i]]                     # x_μ, μ = t − τ_{t,i}
            y = start.copy()
            for _ in range(K_all[i]):                      # LocalOPT: K_{t,i} exact gradient steps
                y = y - schedule.eta_l * (A[i] @ (y - b[i]))
            updates.append((start - y) / K_all[i])         # normalised Δ^i_μ
        delta = sum(updates) / len(S)
        s = stage_of[t]
        eta, beta, nu = schedule.eta_g[s], schedule.beta[s], schedule.nu[s]
        d = (1 - beta) * delta + beta * d
        h = (1 - nu) * delta + nu * d
        x = x - eta * h
        xs.append(x)
        log.append({"S": S, "K": K_all[S], "tau": tau_all[S], "K_all": K_all})
    return np.stack(xs), log


def g_bar(g, lengths):
    """Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s} ‖∇f(x_t)‖² (Sec. 4.2), by a loop over the stages."""
    out, start = [], 0
    for length in lengths:
        out.append(sum(g[start:start + length]) / length)
        start += length
    return sum(out) / len(out)


def footnote_5(logs):
    """Per run, footnote 5 literally: K̄_t = (1/m) Σ_{i∈S_t} K_{t,i}, K̂_t² = (1/m) Σ_{i∈S_t} K_{t,i}²,
    1/K_t = (1/m) Σ_{i∈S_t} 1/K_{t,i}, φ_j = (1/T) Σ_t of them; K_{t,max} = max_{i∈S_t} K_{t,i}.
    Returns the per-run (φ_1, φ_2, φ_3) and max_t K_{t,max} of each run."""
    phis, kmax = [], []
    for log in logs:
        rounds = len(log)
        phi1 = sum(sum(r["K"]) / len(r["S"]) for r in log) / rounds
        phi2 = sum(sum(float(k) ** 2 for k in r["K"]) / len(r["S"]) for r in log) / rounds
        phi3 = sum(sum(1.0 / k for k in r["K"]) / len(r["S"]) for r in log) / rounds
        phis.append((phi1, phi2, phi3))
        kmax.append(max(max(r["K"]) for r in log))
    return np.array(phis), kmax


def heterogeneity(A, b, x):
    """(1/N) Σ_i ‖∇f_i(x) − ∇f(x)‖² (Assumption A3's left side)."""
    G = np.einsum("nij,nj->ni", A, x[None, :] - b)
    return float(((G - G.mean(axis=0)) ** 2).sum(axis=1).mean())


def constants_of(A, b):
    """L = max_i λ_max(A_i), σ² = 0 (noise-free), Δ_f = f(0) − f* in closed form."""
    x_star = np.linalg.solve(A.mean(0), np.einsum("nij,nj->i", A, b) / len(b))

    def f(x):
        D_ = x[None, :] - b
        return 0.5 * np.einsum("ni,nij,nj->n", D_, A, D_).mean()

    return Constants(L=float(np.linalg.eigvalsh(A)[:, -1].max()), sigma2=0.0,
                     delta_f=float(f(np.zeros(b.shape[1])) - f(x_star)), n_clients=N, local_steps=K, rounds=T)


def test_engine_is_algorithm_4(problem, trace, schedule):
    """The engine's iterates, ‖∇f(x_t)‖², logged K_{t,i}/τ_{t,i} and Ḡ (``stage_average``) equal
    Algorithm 4 run by hand (Thm 5.1's left side, Sec. 4.2's stage weighting); τ_{t,i} ≤ D − 1 = τ."""
    A, b = closed_form(problem)
    alg = algorithms.get("fedgm-autonomous", schedule=schedule, local_steps=K, max_delay=D, max_epochs=E)
    for seed in SEEDS[:2]:
        want, log = algorithm_4(A, b, trace.mask, seed, schedule)
        got = np.stack([s.x.double().numpy() for s in algorithms.iterate(alg, problem, trace, seed=seed)])
        scale = np.abs(want).max()
        assert scale > 0.1 and np.abs(got - want).max() <= 1e-12 * scale
        history = algorithms.run(alg, problem, trace, seed=seed, observe=True)
        g = np.array([grad_f(A, b, x) @ grad_f(A, b, x) for x in want[:-1]])
        assert history.stopped is None and np.array_equal(history.rounds, np.arange(T))
        np.testing.assert_allclose(history.grad_norm2, g, rtol=1e-12, atol=1e-14 * g.max())
        np.testing.assert_allclose(history.final_params, want[-1], rtol=0, atol=1e-12 * scale)
        steps, delays = history.observed["local_steps"], history.observed["delays"]
        for t, r in enumerate(log):
            assert np.array_equal(np.asarray(steps[t]), r["K"]) and np.array_equal(np.asarray(delays[t]), r["tau"])
            assert r["tau"].max() <= min(D - 1, t)
        assert max(r["tau"].max() for r in log) == D - 1           # the largest delay is reached
        assert len({int(k) for r in log for k in r["K"]}) == E     # every epoch count occurs
        assert stage_average(history, schedule.lengths) == pytest.approx(g_bar(g, schedule.lengths), rel=1e-12)
        # the stage weighting matters here: Ḡ differs from the plain (1/T) Σ_t
        assert abs(g_bar(g, schedule.lengths) - g.mean()) > 1e-3 * g.mean()


@pytest.mark.parametrize("which", ["theorem_5_1", "corollary_g1"])
@pytest.mark.parametrize("step_sizes", ["given", "theorem"])
def test_check_reports_footnote_5_statistics(problem, trace, schedule, which, step_sizes):
    """``check`` on the fixed trace: per-seed Ḡ and φ_1, φ_2, φ_3, K_max, τ and the largest delay
    in ``result.extras`` equal the loop's. φ_j is footnote 5's (means over the m arrived clients
    S_t of K_{t,i}, K_{t,i}² and 1/K_{t,i}, then (1/T) Σ_t) per run, averaged over the seeds (the
    check pools all runs' rounds; every run has T rounds with m arrivals, so that is the same).
    K_max is the largest K_{t,max} = max_{i∈S_t} K_{t,i} over rounds and runs; the check floors it
    at K·E (the largest possible K_{t,i}); both are K·E here because E epochs are drawn.
    ``step_sizes="theorem"``: the check's own η_l and a three-stage schedule (``stages``)."""
    A, b = closed_form(problem)
    consts = constants_of(A, b)
    name = f"momentum.{which}"
    if step_sizes == "given":
        alg = algorithms.get("fedgm-autonomous", schedule=schedule, local_steps=K, max_delay=D, max_epochs=E)
        result = check(alg, problem, trace, name, seeds=SEEDS, constants=consts, step_sizes="given")
        used = schedule
    else:
        result = check("fedgm-autonomous", problem, trace, name, seeds=SEEDS, local_steps=K, constants=consts,
                       hparams={"max_delay": D, "max_epochs": E, "stages": (2.0, 1.0, 0.5)})
        used = result.hparams["schedule"]
        assert used.lengths == (4, 8, 16) and used.eta_l == result.step_sizes["eta_l"] != ETA_L
    runs = [algorithm_4(A, b, trace.mask, seed, used) for seed in SEEDS]
    gbars = [g_bar([grad_f(A, b, x) @ grad_f(A, b, x) for x in xs[:-1]], used.lengths) for xs, _ in runs]
    # one fixed trace for a bound over the participation: one sample, the seeds' mean (mark ‡)
    assert result.fixed_trace and result.values == pytest.approx([np.mean(gbars)], rel=1e-12)
    phis, kmax = footnote_5([log for _, log in runs])
    phi1, phi2, phi3 = phis.mean(axis=0)
    ex = result.extras
    assert (ex["phi1"], ex["phi2"], ex["phi3"]) == pytest.approx((phi1, phi2, phi3), rel=1e-13)
    assert ex["K_max"] == max(kmax) == K * E
    assert ex["m"] == M and ex["tau"] == D - 1 == result.hparams["max_delay"] - 1
    largest = max(int(r["tau"].max()) for _, log in runs for r in log)
    assert ex["largest observed delay"] == largest <= ex["tau"]
    # σ_g² (A3) measured at the iterates, and the bound evaluated at the loop's statistics
    sigma_g2 = max(heterogeneity(A, b, x) for xs, _ in runs for x in xs[:-1])
    assert ex["sigma_g2"] == pytest.approx(sigma_g2, rel=1e-12)
    fn = bm.theorem_5_1 if which == "theorem_5_1" else bm.corollary_g1
    want = fn(dataclasses.replace(consts, zeta2=sigma_g2), used, M, D - 1,
              bm.LocalStepStats(phi1, phi2, phi3, float(max(kmax))))
    assert result.bound_value == pytest.approx(want.value, rel=1e-12)
