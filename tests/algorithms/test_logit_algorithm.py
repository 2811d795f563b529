"""LOGIT on the engine: reductions to FedAvg and the cached-update rule, a per-client-loop
reference (baseline rules and generator), the generator's learning, its memory cap,
reproducibility, Theorem 2 on a quadratic with the measured generation error, and
convergence on a logistic problem under P1, P2, P3."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import algorithms
from algorithms import NoiseStream
from algorithms import logit_generator as ggn
from algorithms.logit import ALGORITHMS, GENERATOR_KEY, LOGIT
from algorithms.problems import Logistic, Quadratic
from bounds import Constants
from bounds.logit import SURROGATE_KEY, theorem_2
from participation import preset

def close(a, b, rel=1e-9):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.abs(b).max(initial=0.0))))


def states(name, problem, mask, seed=0, **hp):
    return list(algorithms.iterate(algorithms.get(name, **hp), problem, mask, seed=seed))


def xs(run):
    return torch.stack([s.x for s in run])


# ------------------------------------------------------------------ per-client reference


def local_delta(problem, noise, i, x, t, eta_l, K):
    xi = x
    for k in range(K):
        xi = xi - eta_l * problem.stochastic_grads(xi[None], torch.tensor([i]), noise.draws(t, k, torch.tensor([i])))[0]
    return x - xi


def initial_theta(noise, t, i, hidden, residual):
    """θ^0_i (1, P): client i's P uniforms at (t, GENERATOR_KEY), (2u − 1)/√h, head zero when residual."""
    u = noise.draws(t, GENERATOR_KEY, torch.tensor([i])).uniform(ggn.param_count(hidden))
    theta = (2 * u - 1) / math.sqrt(hidden)
    if residual:
        theta[:, -(hidden + 1):] = 0.0
    return theta


def reference(problem, mask, seed, eta_l=0.1, eta_g=1.0, local_steps=1, surrogate="generator", hidden=20,
              history=8, lr_generator=0.001, lam=0.5, clip=1.0, weight_decay=1e-4, warmup=0,
              train_input="cached", residual=True, cold_start="zero"):
    """LOGIT written client by client (module docstring of algorithms/logit.py); x_0..x_T."""
    T, N = mask.shape
    d, noise = problem.dim, NoiseStream(seed)
    x = torch.zeros(d, dtype=torch.float64)
    cache, hist, steps = [None] * N, [[] for _ in range(N)], [0] * N
    params, prev_mean, out = None, torch.zeros(d, dtype=torch.float64), [x]
    unit = lambda v: math.sqrt(d) * v / v.norm() if v.norm() > 0 else v
    for t in range(T):
        S = np.flatnonzero(mask[t]).tolist()
        deltas = {i: local_delta(problem, noise, i, x, t, eta_l, local_steps) for i in S}
        if surrogate == "generator":
            if params is None:
                params = [initial_theta(noise, t, i, hidden, residual) for i in range(N)]
            for i in S:
                u = unit(deltas[i])
                window = (hist[i] if train_input == "cached" else hist[i] + [u])[-history:]
                if not window:
                    continue
                others = sum((unit(deltas[k]) / math.sqrt(d) for k in S if k != i), torch.zeros(d, dtype=x.dtype))
                n_others = torch.tensor([len(S) - 1.0], dtype=torch.float64)
                params[i], _ = ggn.train_step(params[i], torch.stack(window)[None], torch.tensor([len(window)]),
                                              u[None], others[None], n_others, lam=lam, lr=lr_generator, clip=clip,
                                              weight_decay=weight_decay, residual=residual,
                                              trainable=torch.tensor([True]))
                steps[i] += 1
        contrib = [deltas[i] for i in S]
        for n in range(N):
            if n in S or surrogate == "none":
                continue
            if cache[n] is None:
                if cold_start == "zero":
                    contrib.append(torch.zeros(d, dtype=x.dtype))
                continue
            if surrogate == "last":
                contrib.append(cache[n])
            elif surrogate == "zero":
                contrib.append(torch.zeros(d, dtype=x.dtype))
            elif surrogate == "ws":
                contrib.append((1 - lam) * cache[n] + lam * prev_mean)
            elif steps[n] < warmup:
                contrib.append(cache[n])
            else:
                window = hist[n][-history:]
                o = ggn.forward(params[n], torch.stack(window)[None], torch.tensor([len(window)]), residual)[0]
                contrib.append(cache[n].norm() / math.sqrt(d) * o)
        prev_mean = sum(contrib) / len(contrib) if contrib else torch.zeros(d, dtype=x.dtype)
        x = x - eta_g * prev_mean
        for i in S:
            cache[i] = deltas[i]
            hist[i].append(unit(deltas[i]))
        out.append(x)
    return torch.stack(out)


def small_problem(draw):
    n, d = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return Quadratic.random(n, d, heterogeneity=1.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                            seed=draw(st.integers(0, 2**16)), diagonal=draw(st.booleans()))


@st.composite
def cases(draw, rules):
    problem = small_problem(draw)
    T = draw(st.integers(1, 7))
    hp = dict(eta_l=draw(st.floats(0.05, 0.5)), eta_g=draw(st.floats(0.5, 2.0)), local_steps=draw(st.integers(1, 3)),
              surrogate=draw(st.sampled_from(rules)), lam=draw(st.sampled_from([0.0, 0.3, 1.0])),
              cold_start=draw(st.sampled_from(["zero", "exclude"])))
    if hp["surrogate"] == "generator":
        hp.update(hidden=draw(st.integers(1, 4)), history=draw(st.integers(1, 4)),
                  lr_generator=draw(st.sampled_from([0.01, 0.5])), warmup=draw(st.integers(0, 2)),
                  train_input=draw(st.sampled_from(["cached", "current"])), residual=draw(st.booleans()),
                  clip=draw(st.sampled_from([None, 0.1])))
    return problem, draw(arrays(bool, (T, problem.n_clients))), draw(st.integers(0, 2**16)), hp


# ------------------------------------------------------------------ reductions


@pytest.mark.slow
@given(cases(("generator", "last", "ws", "zero", "none")))
def test_full_participation_is_fedavg_exactly(case):
    """Every upload arrives: (8) is model averaging, FedAvg (either normaliser), bit for bit."""
    problem, mask, seed, hp = case
    mask = np.ones_like(mask)
    got = xs(states("logit", problem, mask, seed=seed, **hp))
    fedavg = algorithms.FedAvg(eta_l=hp["eta_l"], eta_g=hp["eta_g"], local_steps=hp["local_steps"])
    assert torch.equal(got, xs(algorithms.iterate(fedavg, problem, mask, seed=seed)))


@given(cases(("zero", "none")))
def test_zero_and_drop_rules_are_fedavg_exactly(case):
    """surrogate="zero" (cold_start="zero") is FedAvg with 1/N, "none" FedAvg with 1/|S_t|."""
    problem, mask, seed, hp = case
    hp["cold_start"] = "zero"
    aggregate = "all" if hp["surrogate"] == "zero" else "active"
    fedavg = algorithms.FedAvg(eta_l=hp["eta_l"], eta_g=hp["eta_g"], local_steps=hp["local_steps"], aggregate=aggregate)
    assert torch.equal(xs(states("logit", problem, mask, seed=seed, **hp)),
                       xs(algorithms.iterate(fedavg, problem, mask, seed=seed)))


@given(cases(("last", "ws", "zero", "none")))
def test_baseline_rules_equal_per_client_loop(case):
    """"last" is the cached-update rule (MIFA); with "ws", "zero", "none", all against the loop."""
    problem, mask, seed, hp = case
    close(xs(states("logit", problem, mask, seed=seed, **hp)), reference(problem, mask, seed, **hp), rel=1e-10)


@pytest.mark.slow
@given(cases(("generator",)))
def test_batched_generator_equals_per_client_loop(case):
    """Training and generation batched over clients equal one client at a time."""
    problem, mask, seed, hp = case
    close(xs(states("logit", problem, mask, seed=seed, **hp)), reference(problem, mask, seed, **hp), rel=1e-9)


@pytest.mark.parametrize("train_input", ["cached", "current"])
@pytest.mark.parametrize("residual", [True, False])
def test_generator_equals_per_client_loop_on_a_long_trace(train_input, residual):
    """The same on a trace long enough that every client is trained, then generated for."""
    problem = Quadratic.random(4, 3, heterogeneity=1.0, noise_std=0.5, seed=1)
    mask = preset("P2", n_clients=4, per_round=2).sample(15, seed=0).mask
    hp = dict(eta_l=0.2, local_steps=2, lr_generator=0.5, lam=0.3, hidden=3, history=3, warmup=1,
              train_input=train_input, residual=residual)
    run = states("logit", problem, mask, seed=2, **hp)
    assert int(run[-1].steps.min()) >= 2
    close(xs(run), reference(problem, mask, 2, **hp), rel=1e-9)


def test_untrained_generator_is_the_cache_rule():
    """Residual head at zero and η_GGN → tiny: the generator returns the cache (MIFA) up to rounding;
    with ``warmup`` beyond the run it is the cache rule exactly."""
    problem = Quadratic.random(6, 4, heterogeneity=1.0, noise_std=0.3, seed=3)
    mask = preset("P2", n_clients=6, per_round=2).sample(25, seed=2).mask
    last = xs(states("logit", problem, mask, eta_l=0.2, local_steps=2, surrogate="last"))
    held = xs(states("logit", problem, mask, eta_l=0.2, local_steps=2, warmup=10**6))
    assert torch.equal(held, last)
    tiny = xs(states("logit", problem, mask, eta_l=0.2, local_steps=2, lr_generator=1e-300, weight_decay=0.0))
    close(tiny, last, rel=1e-12)


# ------------------------------------------------------------------ the generator


@pytest.mark.slow
def test_generator_learns_a_sinusoid_better_than_the_last_value():
    """Per-coordinate sinusoids (period 8, random phases), √d-normalised as LOGIT feeds them:
    one SGD step per round on eq. (3) (λ = 0); the loss falls and beats the last-value rule."""
    d, H, T = 32, 6, 300
    phase = torch.rand(d, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 * math.pi
    seq = [torch.sin(2 * math.pi * t / 8 + phase) for t in range(T + H)]
    seq = [math.sqrt(d) * v / v.norm() for v in seq]
    uniforms = torch.rand((1, ggn.param_count(20)), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params = ggn.init_params(uniforms, 20)
    zeros, no_others, losses = torch.zeros(1, d, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), []
    for t in range(H, T + H):
        params, loss = ggn.train_step(params, torch.stack(seq[t - H:t])[None], torch.tensor([H]), seq[t][None], zeros,
                                      no_others, lam=0.0, lr=0.1, clip=1.0, weight_decay=0.0, residual=True,
                                      trainable=torch.tensor([True]))
        losses.append(float(loss))
    last_value = np.mean([float((seq[t] - seq[t - 1]).square().mean()) for t in range(H, T + H)])
    early, late = np.mean(losses[:30]), np.mean(losses[-30:])
    assert late < 0.1 * early and late < 0.1 * last_value


@pytest.mark.slow
def test_generator_loss_falls_inside_logit():
    """Along a run, the generator loss of eq. (3) (λ = 0: the MSE) recorded per client decreases."""
    problem = Quadratic.random(4, 6, heterogeneity=2.0, noise_std=0.0, seed=5)
    mask = preset("logit", n_clients=4, p=0.5).sample(120, seed=0).mask
    run = states("logit", problem, mask, eta_l=0.05, local_steps=2, lr_generator=0.05, lam=0.0)
    losses = np.array([s.gen_loss.numpy() for s in run[1:]])
    first, final = np.nanmean(losses[5:20]), np.nanmean(losses[-15:])
    assert final < 0.5 * first
    assert all(s.steps.sum() > 0 for s in run[30:])


def test_history_cap_and_memory():
    """memory_bytes grows one window slot per round with uploads up to H, then stays at the formula."""
    problem = Quadratic.random(3, 5, seed=0)
    mask = np.ones((9, 3), dtype=bool)
    mask[2] = False                                          # no upload: no growth
    algo = LOGIT(history=4, hidden=3)
    run = list(algorithms.iterate(algo, problem, mask))
    sizes = [s.history.shape[1] for s in run]
    assert sizes == [0, 1, 2, 2, 3, 4, 4, 4, 4, 4]
    mem = [algo.memory_bytes(s) for s in run[1:]]
    assert mem[0] < mem[1] == mem[2] < mem[3] < mem[4] == mem[-1] == algo.max_memory_bytes(3, 5)
    assert LOGIT(surrogate="last").max_memory_bytes(3, 5) == 8 * (3 * 5 + 5) + 8 * 3 * 3


def test_reproducible_with_the_same_seed():
    problem = Quadratic.random(5, 3, heterogeneity=1.0, noise_std=0.5, seed=1)
    mask = preset("P2", n_clients=5, per_round=2).sample(15, seed=3).mask
    a, b, c = (states("logit", problem, mask, seed=s, lr_generator=0.1) for s in (7, 7, 8))
    assert torch.equal(xs(a), xs(b))
    assert torch.equal(a[-1].params, b[-1].params)
    assert not torch.equal(a[-1].params, c[-1].params)


@pytest.mark.parametrize("hp", [dict(), dict(surrogate="ws", cold_start="exclude"),
                                dict(train_input="current", residual=False, lam=0.0, warmup=1, clip=None)],
                         ids=["generator", "ws", "current"])
def test_a_batch_equals_its_runs_alone(hp):
    """Different seeds, traces (one with empty rounds, one with every client) and (η_l, η_g) per
    run: each run of the batch is the run alone, bit for bit, and so is its generation error."""
    problem = Quadratic.random(5, 3, heterogeneity=1.0, noise_std=0.5, seed=2)
    masks = [preset("P2", n_clients=5, per_round=2).sample(12, seed=s).mask.copy() for s in range(3)]
    masks[1][[0, 4, 5]] = False
    masks[2][6:] = True
    steps, seeds = [(0.1, 1.0), (0.2, 0.5), (0.05, 1.5)], [3, 0, 3]
    algs = [LOGIT(eta_l=e, eta_g=g, local_steps=2, hidden=3, history=3, lr_generator=0.1, **hp) for e, g in steps]
    alone = [algorithms.run(a, problem, m, seed=s, observe=True) for a, m, s in zip(algs, masks, seeds)]
    batch = algorithms.run_batch(algs, problem, masks, seeds, observe=True)
    for a, b in zip(alone, batch):
        assert a.same_as(b)
        assert np.array_equal(a.observed["generator_error"], b.observed["generator_error"])
    assert alone[1].observed["generator_error"].shape == (12,)
    assert not alone[0].same_as(alone[2])


def test_communication_and_validation():
    problem = Quadratic.random(4, 3, seed=0)
    mask = preset("P1", n_clients=4, per_round=2).sample(5, seed=0).mask
    history = algorithms.run(algorithms.get("logit"), problem, mask)
    assert np.all(history.uplink == 2 * 3) and np.all(history.downlink == 2 * 3)
    for bad in (dict(surrogate="mean"), dict(hidden=0), dict(history=1.5), dict(lr_generator=-1.0), dict(lam=1.5),
                dict(clip=0.0), dict(weight_decay=-1e-4), dict(warmup=-1), dict(train_input="next"),
                dict(residual=1), dict(cold_start="skip")):
        with pytest.raises(ValueError, match=repr(next(iter(bad.values())))):
            LOGIT(**bad)


# ------------------------------------------------------------------ Theorem 2 with the measured ε


def measured_epsilon(problem, mask, run, eta, I):
    """ε of (23) on the realised trace, noise-free gradients:
    (4/(TNI)) Σ_t Σ_{n∉A_t} Σ_i ‖∇F̃_n − ∇F_n(x^n_{t,i})‖², the surrogate's per-step gradient
    being ∇F̃_n = Δ̃_n/(ηI) along the unavailable client's own local path (as the proof of
    Thm 1, (15)–(23), and Assumption 3 treat it; ε is measured because Lemma 3 analyses ERM,
    not the generator's online training)."""
    T, N = mask.shape
    total = 0.0
    for t in range(T):
        off = torch.as_tensor(np.flatnonzero(~mask[t]))
        if not off.numel():
            continue
        X, surrogate = run[t].x.expand(off.numel(), -1), run[t + 1].updates[off] / (eta * I)
        for _ in range(I):
            G = problem.grads_at(X, off)
            total += float((surrogate - G).square().sum())
            X = X - eta * G
    return 4 * total / (T * N * I)


@pytest.mark.slow
def test_theorem_2_holds_with_the_measured_generation_error():
    """Identical curvature (so σ₃² = max_n ‖A(b_n − b̄)‖² holds for every x), exact gradients
    (σ₁² = σ₂² = 0), Bernoulli(p) uploads, η = Thm 2's step. ε is measured; passing
    ε*_{n,t} = ε/(4(1 − p)) and C₁ = 0 makes Theorem 2's last two terms equal to it
    (the C₁ rate of Assumption 5 is not measurable from a run)."""
    N, d, I, T, p = 4, 3, 2, 200, 0.5
    rng = np.random.default_rng(0)
    A = np.tile(rng.uniform(0.2, 1.0, d), (N, 1))
    b = rng.standard_normal(d) + rng.standard_normal((N, d))
    problem = Quadratic(A, b)
    pc = problem.constants()
    zeta2 = float(np.max(np.sum((A * (b - b.mean(0))) ** 2, axis=1)))
    c = Constants(L=pc.L, sigma2=0.0, delta_f=pc.delta_f, n_clients=N, local_steps=I, rounds=T, zeta2=zeta2,
                  extra={SURROGATE_KEY: 0.0})
    mask = preset("logit", n_clients=N, p=p).sample(T, seed=1).mask
    eta = theorem_2(c, p, 0.0, 0.0).step_sizes["eta"]
    run = states("logit", problem, mask, seed=0, eta_l=eta, local_steps=I, lr_generator=0.05)
    eps = measured_epsilon(problem, mask, run, eta, I)
    bound = theorem_2(c, p, eps / (4 * (1 - p)), 0.0, eta=eta)
    measured = np.mean([float(problem.full_grad(s.x).square().sum()) for s in run[:T]])
    assert bound.valid and eps > 0
    close(bound.terms["generator_floor"], eps, rel=1e-12)
    assert measured <= bound.value


# ------------------------------------------------------------------ convergence on Logistic


@pytest.fixture(scope="module")
def logistic():
    return Logistic.synthetic(n_clients=10, n_samples=300, dim=5, n_classes=3, seed=0, batch_size=16)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["P1", "P2", "P3"])
def test_converges_on_logistic(pattern, logistic):
    trace = preset(pattern, n_clients=10, per_round=3).sample(150, seed=0)
    history = algorithms.run(algorithms.get("logit", eta_l=0.2, local_steps=2, lr_generator=0.01), logistic, trace)
    start = float(logistic.full_grad(logistic.x0).square().sum())
    print(f"\nLOGIT {pattern}: final grad_norm2 {history.grad_norm2[-1]:.3e} loss {history.loss[-1]:.5f} "
          f"(start {start:.3e}, {float(logistic.loss(logistic.x0)):.5f})")
    assert history.stopped is None
    assert history.grad_norm2[-10:].mean() < 0.05 * start
    assert history.loss[-1] < float(logistic.loss(logistic.x0))
