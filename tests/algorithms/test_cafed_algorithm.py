"""CA-Fed and Unbiased on the engine: reductions to the Unbiased weighting, the online
availability estimates, oracle exclusions, a per-client-loop reference, a batch equal to its
runs alone and convergence."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import algorithms
from algorithms import NoiseStream
from algorithms.cafed import ALGORITHMS, CAFed, CAFedUnbiased
from algorithms.problems import Logistic, Quadratic
from bounds.cafed import greedy_weights
from participation import markov, preset


NEVER = 1e300   # τ above any decrease of the proxy (20): nothing is ever excluded


def states(algorithm, problem, mask, seed=0):
    return list(algorithms.iterate(algorithm, problem, mask, seed=seed))


@st.composite
def setups(draw, max_rounds=6):
    n = draw(st.integers(2, 5))
    T = draw(st.integers(1, max_rounds))
    mask = draw(arrays(bool, (T, n)))
    problem = Quadratic.random(n, draw(st.integers(1, 3)), heterogeneity=1.0, noise_std=0.5,
                               seed=draw(st.integers(0, 2**16)))
    return problem, mask


@st.composite
def chains(draw, n):
    pi = np.array(draw(st.lists(st.floats(0.05, 0.95), min_size=n, max_size=n)))
    u = np.array(draw(st.lists(st.floats(0.01, 0.99), min_size=n, max_size=n)))   # λ > −1 (eq. (236))
    lower = markov.lambda_lower_bound(pi)
    return pi, lower + u * (1 - lower) * 0.99


# ------------------------------------------------------------------ reductions


@pytest.mark.slow
@given(setups(), st.data(), st.integers(1, 3), st.booleans(), st.booleans())
def test_never_excluding_with_known_pi_is_unbiased(setup, data, K, oracle, normalise):
    problem, mask = setup
    n = problem.n_clients
    raw = np.array(data.draw(st.lists(st.floats(0.1, 1.0), min_size=n, max_size=n)))
    alpha = raw / raw.sum()
    hp = dict(eta_l=0.1, eta_g=0.7, local_steps=K, normalise=normalise, alpha=alpha,
              oracle=data.draw(chains(n)) if oracle else None)
    ca = states(CAFed(tau=NEVER, kappa2_bar=1.0, **hp), problem, mask)
    ub = states(CAFedUnbiased(**hp), problem, mask)
    for a, b in zip(ca, ub):
        assert torch.equal(a.x, b.x)
        assert torch.equal(a.weights, b.weights) and torch.equal(a.kept, b.kept)
    pi = np.array(hp["oracle"][0]) if oracle else None
    for t, s in enumerate(ub[1:]):
        if mask[t].any():
            want = alpha / (pi if oracle else CAFedUnbiased(**hp).estimates(s)[0])
            assert np.array_equal(s.weights.numpy(), want)
            assert np.array_equal(s.kept.numpy(), mask[t])


@given(setups(max_rounds=10), st.sampled_from([0.5, 1.0, 3.0]))
def test_online_estimates_match_markov_estimate(setup, prior):
    problem, mask = setup
    alg = CAFed(eta_l=0.1, prior=prior)
    for T, s in enumerate(states(alg, problem, mask)[1:], start=1):
        est = markov.estimate(mask[:T].astype(np.int8), prior=prior)
        assert np.array_equal(s.transitions.numpy(), est.transitions)
        count = mask[:T].sum(axis=0)
        assert np.array_equal(s.available.numpy(), count) and s.rounds == T
        pi, lam = alg.estimates(s)
        assert np.array_equal(lam, est.lam)
        assert np.array_equal(pi, (count + prior) / (T + 2 * prior))   # Beta(a, a) prior, §IV-B
        np.testing.assert_allclose((pi * (T + 2 * prior) - prior) / T, est.pi, rtol=1e-13, atol=1e-15)


def test_oracle_excludes_the_client_greedy_weights_excludes():
    # four clients, noise-free 1-d quadratics; reports ½‖∇f_k(0)‖² = ½b_k² give gaps (4.5, 4.5, 0.5, 0.5).
    # With π = ½ and κ̄² = ½ only one of clients 0, 1 can go: the one tried first, of larger |λ|.
    problem = Quadratic(np.ones((4, 1)), np.array([[3.0], [3.0], [1.0], [1.0]]))
    mask = np.ones((1, 4), dtype=bool)
    pi = np.full(4, 0.5)
    for extreme in (0, 1):
        lam = np.zeros(4)
        lam[extreme] = 0.95
        alg = CAFed(eta_l=0.1, kappa2_bar=0.5, oracle=(pi, lam))
        s = states(alg, problem, mask)[1]
        gap = 0.5 * problem.b[:, 0].numpy() ** 2
        assert np.array_equal(s.report.numpy(), gap)
        want = greedy_weights(np.full(4, 0.25), pi, lam, gap, kappa2_bar=0.5)
        assert np.array_equal(s.weights.numpy(), want)
        assert want[extreme] == 0 and np.count_nonzero(want) == 3
        assert np.flatnonzero(s.kept.numpy()).tolist() == [k for k in range(4) if k != extreme]


# ------------------------------------------------------------------ per-client reference


def reference(problem, mask, eta_l, eta_g, K, seed, kappa2_bar, beta, prior, normalise, oracle):
    """Algorithm 1 client by client: counts, reports, greedy_weights, E local steps, server step."""
    T, N = mask.shape
    noise = NoiseStream(seed)
    x = torch.zeros(problem.dim, dtype=torch.float64)
    count, trans = np.zeros(N), np.zeros((N, 2, 2))
    report = [None] * N
    xs, weights = [x], []
    for t in range(T):
        S = np.flatnonzero(mask[t]).tolist()
        for k in range(N):
            count[k] += mask[t, k]
            if t:
                trans[k, int(mask[t - 1, k]), int(mask[t, k])] += 1
        if not S:
            xs.append(x)
            continue
        g0 = {i: problem.stochastic_grads(x[None], torch.tensor([i]), noise.draws(t, 0, torch.tensor([i])))[0]
              for i in S}
        # ½‖g‖² summed as the engine sums it: with κ̄² = 0 and equal gaps the greedy choice is a
        # tie of the proxy (20), decided by the last bit
        s = {i: 0.5 * float(g0[i].square().sum()) for i in S}
        if all(r is None for r in report):
            first = sum(s.values()) / len(S)
            report = [first] * N
        for i in S:
            report[i] = (1 - beta) * report[i] + beta * s[i]
        if oracle is None:
            pi = (count + prior) / (t + 1 + 2 * prior)
            lam = np.array([(trans[k, 0, 0] + prior) / (trans[k, 0].sum() + 2 * prior)
                            + (trans[k, 1, 1] + prior) / (trans[k, 1].sum() + 2 * prior) - 1 for k in range(N)])
            lam = np.maximum(lam, markov.lambda_lower_bound(pi))
        else:
            pi, lam = np.asarray(oracle[0]), np.asarray(oracle[1])
        q = greedy_weights(np.full(N, 1 / N), pi, lam, np.array(report), kappa2_bar=kappa2_bar)
        weights.append(q)
        step, total = torch.zeros(problem.dim, dtype=torch.float64), 0.0
        for i in S:
            if q[i] == 0:
                continue
            xi = x
            for k in range(K):
                g = problem.stochastic_grads(xi[None], torch.tensor([i]), noise.draws(t, k, torch.tensor([i])))[0]
                xi = xi - eta_l * g
            step, total = step + q[i] * (xi - x), total + q[i]
        if total and normalise:
            step = step / total
        x = x + eta_g * step
        xs.append(x)
    return xs, weights


@pytest.mark.slow
@given(setups(), st.data(), st.integers(1, 3), st.sampled_from([0.0, 0.3, 1.0]), st.sampled_from([1.0, 0.5]),
       st.booleans(), st.booleans())
def test_batched_equals_per_client_reference(setup, data, K, kappa2_bar, beta, normalise, oracle):
    problem, mask = setup
    orc = data.draw(chains(problem.n_clients)) if oracle else None
    alg = CAFed(eta_l=0.05, eta_g=0.8, local_steps=K, kappa2_bar=kappa2_bar, beta=beta, prior=1.5,
                normalise=normalise, oracle=orc)
    got = states(alg, problem, mask, seed=3)
    xs, weights = reference(problem, mask, 0.05, 0.8, K, 3, kappa2_bar, beta, 1.5, normalise, orc)
    for s, x in zip(got, xs):
        np.testing.assert_allclose(s.x.numpy(), x.numpy(), rtol=1e-12, atol=1e-12)
    kept_weights = [s.weights.numpy() for t, s in enumerate(got[1:]) if mask[t].any()]
    for a, b in zip(kept_weights, weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ a batch is its runs alone


@pytest.mark.parametrize("name, extra", [
    ("cafed", dict(kappa2_bar=0.05, beta=0.5)),                     # excludes clients, filters reports
    ("cafed", dict(normalise=True, oracle=((0.3, 0.5, 0.6, 0.8, 0.9, 0.4), (0.2, 0.0, 0.5, -0.1, 0.3, 0.1)))),
    ("cafed-unbiased", dict(prior=0.5)),
    ("cafed-unbiased", dict(normalise=True, alpha=(0.1, 0.1, 0.2, 0.2, 0.3, 0.1))),
])
def test_a_batch_equals_its_runs_alone(name, extra):
    """Different seeds, traces (one with empty rounds, one with no client in the first rounds)
    and step sizes (η, η̄): the batch gives each run's History and weights q^(t) bit for bit."""
    problem = Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.4, seed=3)
    masks = [preset("P2", n_clients=6, per_round=3).sample(20, seed=s).mask.copy() for s in range(4)]
    masks[1][[0, 1, 7, 8]] = False
    masks[3][[5, 11]] = False
    steps = [(0.05, 1.0), (0.1, 0.5), (0.02, 1.5), (0.07, 0.8)]
    algs = [algorithms.get(name, eta_l=e, eta_g=g, local_steps=2, **extra) for e, g in steps]
    seeds = [4, 9, 4, 123]
    alone = [algorithms.run(a, problem, m, seed=s, observe=True) for a, m, s in zip(algs, masks, seeds)]
    batch = algorithms.run_batch(algs, problem, masks, seeds, observe=True)
    for a, b in zip(alone, batch):
        assert a.same_as(b) and a.hparams == b.hparams
        assert np.array_equal(a.observed["weights"], b.observed["weights"], equal_nan=True)
    assert np.isnan(batch[1].observed["weights"][[0, 1, 7, 8]]).all()
    assert not np.isnan(batch[1].observed["weights"][2]).any()
    assert len({h.final_params.tobytes() for h in batch}) == 4
    if extra.get("kappa2_bar") == 0.05:                             # the greedy rule did exclude
        assert any((h.observed["weights"] == 0).any() for h in batch)


# ------------------------------------------------------------------ convergence

N_CLIENTS, ROUNDS = 20, 150


def _pattern(name):
    return preset(name, n_clients=N_CLIENTS, per_round=5) if name.startswith("P") else preset(name, n_clients=N_CLIENTS)


@pytest.fixture(scope="module")
def logistic():
    return Logistic.synthetic(n_clients=N_CLIENTS, n_samples=400, dim=5, seed=0)


def final(problem, algorithm, trace):
    """(‖∇f‖², f) at x_0 and at x_T of a run (only round 0 is recorded along the way)."""
    h = algorithms.run(algorithm, problem, trace, seed=0, record_every=trace.n_rounds)
    assert h.stopped is None
    x = torch.as_tensor(h.final_params)
    return h.grad_norm2[0], h.loss[0], float(problem.full_grad(x).square().sum()), float(problem.loss(x))


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["P1", "P2", "P3", "cafed-temporal"])
@pytest.mark.parametrize("name", ["cafed", "cafed-unbiased"])
def test_converges_on_logistic(logistic, pattern, name):
    trace = _pattern(pattern).sample(ROUNDS, seed=1)
    g0, f0, g, f = final(logistic, algorithms.get(name, eta_l=0.1, local_steps=5), trace)
    print(f"{name} {pattern}: grad_norm2 {g:.3e} loss {f:.5f}")
    assert g < 1e-2 * g0 and f < f0


@pytest.mark.slow
def test_converges_with_the_true_chain(logistic):
    pattern = _pattern("cafed-temporal")
    trace = pattern.sample(ROUNDS, seed=1)
    alg = algorithms.get("cafed", eta_l=0.1, local_steps=5, oracle=(pattern.pi, pattern.lam))
    g0, f0, g, f = final(logistic, alg, trace)
    print(f"cafed oracle cafed-temporal: grad_norm2 {g:.3e} loss {f:.5f}")
    assert g < 1e-2 * g0 and f < f0


# ------------------------------------------------------------------ interface


def test_registry_and_communication():
    alg = algorithms.get("cafed", eta_l=0.1, kappa2_bar=2.0, tau=0.1, beta=0.5, prior=2.0, alpha=[0.5, 0.5])
    assert isinstance(alg, CAFed) and alg.alpha == (0.5, 0.5)
    assert alg.communication(7, 3) == (21, 24)
    assert algorithms.get("cafed-unbiased").communication(7, 3) == (21, 21)


def test_empty_rounds_only_count():
    problem = Quadratic.random(3, 2, noise_std=0.1, seed=0)
    s = states(CAFed(eta_l=0.1), problem, np.zeros((2, 3), dtype=bool))
    assert torch.equal(s[-1].x, s[0].x) and s[-1].rounds == 2
    assert s[-1].transitions[:, 0, 0].tolist() == [1, 1, 1] and torch.isnan(s[-1].report).all()


@pytest.mark.parametrize("hp, word", [
    (dict(kappa2_bar=-1.0), "kappa2_bar"), (dict(tau=math.inf), "tau"), (dict(beta=0.0), "beta"),
    (dict(beta=1.5), "beta"), (dict(prior=0.0), "prior"), (dict(alpha=[0.5, 0.6]), "alpha"),
    (dict(alpha=[-0.5, 1.5]), "alpha"), (dict(oracle=([0.5, 1.2], [0.0, 0.0])), "oracle"),
    (dict(oracle=([0.5, 0.5], [0.0, 1.0])), "oracle"), (dict(oracle=([0.9], [-0.5])), "oracle"),
    (dict(oracle=([0.5], [0.0, 0.1])), "oracle"), (dict(normalise=1), "normalise"), (dict(eta_l=0.0), "eta_l"),
])
def test_bad_hyperparameters(hp, word):
    with pytest.raises(ValueError, match=word):
        CAFed(**hp)


def test_size_mismatch_is_an_error():
    problem = Quadratic.random(3, 2, seed=0)
    with pytest.raises(ValueError, match="alpha"):
        CAFed(alpha=[0.5, 0.5]).init(problem, problem.x0[None])
    with pytest.raises(ValueError, match="oracle"):
        CAFedUnbiased(oracle=([0.5, 0.5], [0.0, 0.0])).init(problem, problem.x0[None])
