"""SCAFFOLD, MIFA, FedVARP, FedAU and FedAWE: a batch of runs equals the runs alone, reductions
to FedAvg, FedAU's interval estimator, a per-client-loop reference on hypothesis traces, and
convergence on logistic regression."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import algorithms
from algorithms import NoiseStream
from algorithms.fedau import FedAU
from algorithms.fedawe import FedAWE
from algorithms.fedvarp import FedVARP
from algorithms.mifa import MIFA
from algorithms.problems import Logistic, Quadratic
from participation import preset

NAMES = ("mifa", "fedvarp", "fedau", "fedawe")


def close(a, b, rel=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.abs(b).max(initial=0.0))))


def xs(name, problem, mask, seed=0, **hp):
    return torch.stack([s.x for s in algorithms.iterate(algorithms.get(name, **hp), problem, mask, seed=seed)])


# ------------------------------------------------------------------ per-client reference


def reference(name, problem, mask, eta_l, eta_g, K, seed, **hp):
    """The methods written client by client, one local step at a time; returns x_0..x_T."""
    mask = np.asarray(mask, dtype=bool)
    T, N = mask.shape
    noise = NoiseStream(seed)

    def g(i, xi, t, k):
        """Client i's stochastic gradient at xi in round t, step k: the draws of client i alone."""
        return problem.stochastic_grads(xi[None], torch.tensor([i]), noise.draws(t, k, torch.tensor([i])))[0]

    def train(i, start, t, rate, correction=0.0):
        xi = start
        for k in range(K):
            xi = xi - rate * (g(i, xi, t, k) + correction)
        return xi

    x = torch.zeros(problem.dim, dtype=torch.float64)
    table = [torch.zeros_like(x) for _ in range(N)]            # MIFA's G_i, FedVARP's y_i, SCAFFOLD's c_i
    c_server = torch.zeros_like(x)                             # SCAFFOLD's c
    seen = [False] * N
    counts, intervals = [0] * N, [[] for _ in range(N)]        # FedAU
    stale, echo, server = [x.clone() for _ in range(N)], [1] * N, x   # FedAWE
    out = [x]
    for t in range(T):
        S = np.flatnonzero(mask[t]).tolist()
        if name == "scaffold":                                 # option II, with the model difference
            dys, dcs = [], []
            for i in S:
                yi = train(i, x, t, eta_l, correction=c_server - table[i])
                c_plus = table[i] - c_server + (x - yi) / (K * eta_l)
                dcs.append(c_plus - table[i])
                table[i] = c_plus
                dys.append(yi - x)
            if S:
                x = x + eta_g * sum(dys) / len(S)
                c_server = c_server + sum(dcs) / N
        elif name == "mifa":
            for i in S:
                table[i] = x - train(i, x, t, eta_l)
                seen[i] = True
            if hp.get("start", "wait") == "zeros" or all(seen):
                x = x - eta_g * sum(table) / N
        elif name == "fedvarp":
            if S:
                ybar = sum(table) / N
                v = ybar
                for i in S:
                    delta = x - train(i, x, t, eta_l)
                    v = v + (delta - table[i]) / len(S)
                    table[i] = delta
                x = x - eta_g * v
        elif name == "fedau":
            p = hp.get("known_probabilities")
            step = torch.zeros_like(x)
            for i in range(N):
                if i in S:
                    w = 1 / p[i] if p is not None else (np.mean(intervals[i]) if intervals[i] else 1.0)
                    step = step + w * (x - train(i, x, t, eta_l))
                    intervals[i].append(counts[i] + 1)
                    counts[i] = 0
                else:
                    counts[i] += 1
                    if counts[i] >= hp.get("cutoff", 50):
                        intervals[i].append(counts[i])
                        counts[i] = 0
            x = x - eta_g * step / N
        elif name == "fedawe":
            rate = eta_l / math.sqrt(t / 10 + 1) if hp.get("local_decay", True) else eta_l
            if S:
                base = sum(stale[i] for i in S) / len(S)
                u = sum(echo[i] * (train(i, stale[i], t, rate) - stale[i]) for i in S) / len(S)
                c = hp.get("clip_norm", 0.5)
                if c is not None and u.norm() > c:
                    u = u / u.norm() * c
                server = base + eta_g * u
                for i in S:
                    stale[i] = server
            for i in range(N):
                echo[i] = 1 if i in S else echo[i] + 1
            x = sum(stale) / N if hp.get("output", "average") == "average" else server
        out.append(x)
    return torch.stack(out)


@st.composite
def cases(draw, name):
    n, d, T = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 8))
    hp = {}
    if name == "mifa":
        hp["start"] = draw(st.sampled_from(["wait", "zeros"]))
    elif name == "fedau":
        hp["cutoff"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            hp["known_probabilities"] = draw(st.lists(st.floats(0.1, 1.0), min_size=n, max_size=n))
    elif name == "fedawe":
        hp["clip_norm"] = draw(st.sampled_from([None, 0.05, 0.5, 100.0]))
        hp["local_decay"] = draw(st.booleans())
        hp["output"] = draw(st.sampled_from(["average", "server"]))
    return dict(name=name, hp=hp, mask=draw(arrays(bool, (T, n))),
                problem=Quadratic.random(n, d, heterogeneity=1.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                                         seed=draw(st.integers(0, 2**16))),
                eta_l=draw(st.floats(0.05, 0.5)), eta_g=draw(st.floats(0.5, 2.0)), K=draw(st.integers(1, 3)),
                seed=draw(st.integers(0, 2**16)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ("scaffold",) + NAMES)
@given(data=st.data())
def test_batched_equals_per_client_loop(name, data):
    case = data.draw(cases(name))
    want = reference(case["name"], case["problem"], case["mask"], case["eta_l"], case["eta_g"], case["K"],
                     case["seed"], **case["hp"])
    got = xs(case["name"], case["problem"], case["mask"], seed=case["seed"], eta_l=case["eta_l"],
             eta_g=case["eta_g"], local_steps=case["K"], **case["hp"])
    close(got, want, rel=1e-9)


# ------------------------------------------------------------------ a batch of runs is the runs alone


BATCH_VARIANTS = [("scaffold", {}), ("mifa", {"start": "wait"}), ("mifa", {"start": "zeros"}), ("fedvarp", {}),
                  ("fedau", {"cutoff": 3}), ("fedau", {"known_probabilities": [0.5, 0.25, 1.0, 0.8, 0.4]}),
                  ("fedawe", {}), ("fedawe", {"clip_norm": 0.05, "output": "server"}),
                  ("fedawe", {"clip_norm": None, "local_decay": False})]
STEPS = [(0.1, 1.0), (0.2, 0.5), (0.05, 1.5), (0.1, 1.2)]


@pytest.fixture(scope="module")
def batch_setting():
    """Four traces on 5 clients: run 1 has empty rounds of its own, run 3 every client; round 4
    is empty in every run (the round's early return)."""
    problem = Quadratic.random(5, 3, heterogeneity=1.0, noise_std=0.4, seed=7)
    masks = [preset("P1", n_clients=5, per_round=2).sample(14, seed=s).mask.copy() for s in range(4)]
    masks[1][[0, 6, 7]] = False
    masks[3][:] = True
    for mask in masks:
        mask[4] = False
    return problem, masks, [3, 11, 3, 42]


@pytest.mark.parametrize("name, hp", BATCH_VARIANTS, ids=lambda v: str(v))
def test_a_batch_equals_its_runs_alone(name, hp, batch_setting):
    """Different seeds, traces and (η_l, η_g) per run: bit-identical Histories in a batch of four,
    in a batch of two and alone."""
    problem, masks, seeds = batch_setting
    algs = [algorithms.get(name, eta_l=e, eta_g=g, local_steps=2, **hp) for e, g in STEPS]
    batch = algorithms.run_batch(algs, problem, masks, seeds)
    pair = algorithms.run_batch(algs[1:3], problem, masks[1:3], seeds[1:3])
    alone = [algorithms.run(a, problem, m, seed=s) for a, m, s in zip(algs, masks, seeds)]
    for a, b in zip(alone, batch):
        assert a.stopped is None and a.same_as(b)
        assert np.array_equal(a.averaged_params, b.averaged_params)
    assert pair[0].same_as(alone[1]) and pair[1].same_as(alone[2])
    assert not alone[0].same_as(alone[2])            # same seed, other trace and step sizes


@pytest.mark.parametrize("name, hp", BATCH_VARIANTS, ids=lambda v: str(v))
def test_each_run_of_a_batch_is_the_per_client_loop(name, hp, batch_setting):
    """Each run of a batch, with its own η_l and η_g (FedAWE's decay applied to each run's η_l),
    follows the per-client loop written from the papers' definitions with the same draws."""
    problem, masks, seeds = batch_setting
    algs = [algorithms.get(name, eta_l=e, eta_g=g, local_steps=2, **hp) for e, g in STEPS]
    for (eta_l, eta_g), mask, seed, h in zip(STEPS, masks, seeds, algorithms.run_batch(algs, problem, masks, seeds)):
        want = reference(name, problem, mask, eta_l, eta_g, 2, seed, **hp)
        close(h.final_params, want[-1], rel=1e-10)
        close(h.loss, [float(problem.loss(x)) for x in want[:-1]], rel=1e-10)


def test_scaffold_server_control_is_the_mean_client_control():
    """c = (1/N) Σ_i c_i (SCAFFOLD's invariant) in every round of a partial-participation run with
    empty rounds, and c_i⁺ = (1/K) Σ_k g_i(y_k) equals option II's (c_i − c) + (x − y_i)/(K η_l)."""
    problem = Quadratic.random(5, 3, heterogeneity=2.0, noise_std=0.5, seed=5)
    mask = preset("P1", n_clients=5, per_round=2).sample(10, seed=3).mask.copy()
    mask[[2, 5]] = False
    run = list(algorithms.iterate(algorithms.get("scaffold", eta_l=0.1, eta_g=1.2, local_steps=3), problem, mask,
                                  seed=9))
    for s in run:
        close(s.c, s.c_clients.mean(0), rel=1e-13)
    want = reference("scaffold", problem, mask, 0.1, 1.2, 3, seed=9)
    close(torch.stack([s.x for s in run]), want, rel=1e-11)


# ------------------------------------------------------------------ reductions to FedAvg


@st.composite
def full_cases(draw):
    n, d, T = draw(st.integers(1, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    return dict(problem=Quadratic.random(n, d, heterogeneity=2.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                                         seed=draw(st.integers(0, 2**16))),
                mask=np.ones((T, n), dtype=bool), seed=draw(st.integers(0, 2**16)),
                hp=dict(eta_l=draw(st.floats(0.05, 0.4)), eta_g=draw(st.floats(0.5, 2.0)),
                        local_steps=draw(st.integers(1, 3))))


@pytest.mark.slow
@given(full_cases())
def test_full_participation_is_fedavg(case):
    """Every client in every round: MIFA (both starts), FedVARP, FedAU (ω_i = 1, 1/N) and FedAWE
    (no decay, no clipping: all w_i = z, e_i = 1) are FedAvg with the same η_l, η_g, K."""
    problem, mask, seed, hp = case["problem"], case["mask"], case["seed"], case["hp"]
    fedavg = xs("fedavg", problem, mask, seed, **hp)
    assert torch.equal(xs("fedavg", problem, mask, seed, aggregate="all", **hp), fedavg)
    for start in ("wait", "zeros"):
        assert torch.equal(xs("mifa", problem, mask, seed, start=start, **hp), fedavg)
    assert torch.equal(xs("fedau", problem, mask, seed, cutoff=2, **hp), fedavg)
    close(xs("fedvarp", problem, mask, seed, **hp), fedavg)          # ȳ − mean y_i cancels to rounding
    for output in ("average", "server"):
        close(xs("fedawe", problem, mask, seed, clip_norm=None, local_decay=False, output=output, **hp), fedavg)
        close(xs("fedawe", problem, mask, seed, clip_norm=1e6, local_decay=False, output=output, **hp), fedavg)


def test_fedawe_full_participation_with_decay_is_fedavg_with_decayed_local_rate():
    problem = Quadratic.random(4, 3, heterogeneity=2.0, noise_std=0.5, seed=3)
    x, want, seed = torch.zeros(3, dtype=torch.float64), [], 2
    noise = NoiseStream(seed)
    for t in range(10):
        want.append(x)
        X = x.expand(4, -1)
        for k in range(2):
            draws = noise.draws(t, k, torch.arange(4))
            X = X - 0.2 / math.sqrt(t / 10 + 1) * problem.stochastic_grads(X, torch.arange(4), draws)
        x = x - 1.5 * (x - X).mean(0)
    want.append(x)
    close(xs("fedawe", problem, np.ones((10, 4), dtype=bool), seed, clip_norm=None, eta_l=0.2, eta_g=1.5,
             local_steps=2), torch.stack(want))


def test_fedawe_clips_the_server_innovation():
    """One client, one round, no noise: z = x0 − η_g·clip(η_l ∇f(x0), c)."""
    problem = Quadratic.random(1, 3, heterogeneity=1.0, seed=4)
    g = problem.full_grad(torch.zeros(3, dtype=torch.float64))
    c = 0.25 * float(0.1 * g.norm())
    got = xs("fedawe", problem, np.ones((1, 1), dtype=bool), clip_norm=c, eta_l=0.1, eta_g=2.0)[1]
    close(got, -2.0 * c * g / g.norm())
    assert float((got / 2.0).norm()) == pytest.approx(c, rel=1e-12)


@pytest.mark.slow
@given(st.integers(0, 2**16), st.integers(1, 4))
def test_mifa_wait_is_fedavg_once_everyone_has_appeared(seed, n):
    """Exact gradients; the clients appear one per round, then all are present: nothing moves before
    round n − 1, and from the round in which the last client appears MIFA("wait") is FedAvg from x^(0)."""
    problem = Quadratic.random(n, 3, heterogeneity=2.0, seed=seed)
    mask = np.vstack([np.eye(n, dtype=bool), np.ones((5, n), dtype=bool)])
    hp = dict(eta_l=0.2, eta_g=1.3, local_steps=2)
    mifa = xs("mifa", problem, mask, start="wait", **hp)
    assert all(torch.equal(mifa[t], mifa[0]) for t in range(n))
    # In round n − 1 the table holds updates at x^(0) for every client: a FedAvg round.
    fedavg = xs("fedavg", problem, np.ones((6, n), dtype=bool), **hp)
    assert torch.equal(mifa[n - 1:], fedavg)
    zeros = xs("mifa", problem, mask, start="zeros", **hp)
    if n > 1:
        assert not torch.equal(zeros[n], mifa[n])


def test_empty_rounds():
    problem = Quadratic.random(3, 2, heterogeneity=1.0, seed=0)
    mask = np.array([[1, 1, 0], [0, 0, 0]], dtype=bool)
    zeros = list(algorithms.iterate(algorithms.get("mifa", start="zeros", eta_l=0.1), problem, mask))
    close(zeros[2].x, zeros[1].x - zeros[1].table.sum(0) / 3, rel=1e-14)     # the stale table still moves x
    wait = xs("mifa", problem, mask, start="wait", eta_l=0.1)
    assert torch.equal(wait[2], wait[0])
    for name in ("fedvarp", "fedau", "fedawe"):
        run = xs(name, problem, mask, eta_l=0.1)
        assert torch.equal(run[2], run[1])


# ------------------------------------------------------------------ FedAU's weights


def brute_force_weights(mask, cutoff):
    """ω_i before round t from the trace alone: participations p_0 < p_1 < … (virtual p_{−1} = −1);
    a closed gap b − a of g − 1 = q·K_c + r absent rounds gives q intervals K_c and one r + 1;
    the open gap since the last participation a gives ⌊(t − 1 − a)/K_c⌋ intervals K_c."""
    T, N = mask.shape
    out = np.ones((T + 1, N))
    for t in range(T + 1):
        for i in range(N):
            parts = [-1] + [s for s in range(t) if mask[s, i]]
            intervals = []
            for a, b in zip(parts, parts[1:]):
                q, r = divmod(b - a - 1, cutoff)
                intervals += [cutoff] * q + [r + 1]
            intervals += [cutoff] * ((t - 1 - parts[-1]) // cutoff)
            if intervals:
                out[t, i] = np.mean(intervals)
    return out


@pytest.mark.slow
@given(arrays(bool, st.tuples(st.integers(1, 25), st.integers(1, 4))), st.integers(1, 6))
def test_fedau_weights_match_brute_force(mask, cutoff):
    problem = Quadratic.random(mask.shape[1], 2, heterogeneity=1.0, seed=0)
    fedau = algorithms.get("fedau", cutoff=cutoff, eta_l=0.1)
    got = np.stack([fedau.weights(s).numpy() for s in algorithms.iterate(fedau, problem, mask)])
    np.testing.assert_allclose(got, brute_force_weights(mask, cutoff), rtol=1e-14)


@pytest.mark.slow
def test_fedau_weights_estimate_inverse_probability():
    mask = preset("P2", n_clients=5, per_round=1).sample(3000, seed=0).mask      # p = 0.2
    fedau = algorithms.get("fedau", cutoff=1000)
    states = list(algorithms.iterate(fedau, Quadratic.random(5, 1, seed=0), mask))
    np.testing.assert_allclose(fedau.weights(states[-1]).numpy(), 5.0, rtol=0.15)


@given(st.integers(0, 2**16), st.lists(st.floats(0.05, 1.0), min_size=4, max_size=4))
def test_fedau_known_probabilities(seed, p):
    """x ← x − η_g (1/N) Σ_{i∈S_t} Δ_i / p_i, written out round by round."""
    problem = Quadratic.random(4, 3, heterogeneity=1.0, noise_std=0.5, seed=seed)
    mask = preset("P2", n_clients=4, per_round=2).sample(6, seed=seed).mask
    eta_l, eta_g, K = 0.1, 0.7, 2
    noise, x, want = NoiseStream(seed), torch.zeros(3, dtype=torch.float64), []
    for t in range(6):
        want.append(x)
        S = torch.as_tensor(np.flatnonzero(mask[t]))
        X = x.expand(len(S), -1)
        for k in range(K):
            X = X - eta_l * problem.stochastic_grads(X, S, noise.draws(t, k, S))
        w = 1 / torch.tensor(p, dtype=torch.float64)[S]
        x = x - eta_g * ((x - X) * w[:, None]).sum(0) / 4
    want.append(x)
    close(xs("fedau", problem, mask, seed, known_probabilities=p, eta_l=eta_l, eta_g=eta_g, local_steps=K),
          torch.stack(want))


# ------------------------------------------------------------------ hyper-parameters, communication


@pytest.mark.parametrize("name, hp, match", [
    ("mifa", {"start": "later"}, "start"),
    ("fedau", {"cutoff": 0}, "cutoff"),
    ("fedau", {"cutoff": 2.5}, "cutoff"),
    ("fedau", {"known_probabilities": [0.5, 0.0]}, "known_probabilities"),
    ("fedau", {"known_probabilities": [1.5]}, "known_probabilities"),
    ("fedau", {"known_probabilities": "p"}, "known_probabilities"),
    ("fedawe", {"clip_norm": -1.0}, "clip_norm"),
    ("fedawe", {"local_decay": "yes"}, "local_decay"),
    ("fedawe", {"output": "mean"}, "output"),
    ("fedvarp", {"eta_l": 0.0}, "eta_l"),
    ("fedvarp", {"cutoff": 3}, "cutoff"),
])
def test_bad_hyperparameters(name, hp, match):
    with pytest.raises(ValueError, match=match):
        algorithms.get(name, **hp)


def test_known_probabilities_must_match_the_clients():
    with pytest.raises(ValueError, match="3 clients"):
        algorithms.run(algorithms.get("fedau", known_probabilities=[0.5, 0.5]), Quadratic.random(3, 2, seed=0),
                       np.ones((2, 3), dtype=bool))


def test_communication():
    problem = Quadratic.random(4, 3, seed=0)
    trace = preset("P1", n_clients=4, per_round=2).sample(5, seed=0)
    for name in NAMES:
        h = algorithms.run(algorithms.get(name, eta_l=0.1), problem, trace)
        np.testing.assert_array_equal(h.uplink, 3 * trace.mask.sum(1))
        np.testing.assert_array_equal(h.downlink, 3 * trace.mask.sum(1))


# ------------------------------------------------------------------ convergence on logistic regression


@pytest.fixture(scope="module")
def logistic():
    return Logistic.synthetic(n_clients=10, n_samples=600, dim=8, n_classes=3, reg=1e-2, batch_size=16, seed=0)


VARIANTS = {"mifa-wait": ("mifa", {"start": "wait"}), "mifa-zeros": ("mifa", {"start": "zeros"}),
            "fedvarp": ("fedvarp", {}), "fedau": ("fedau", {}), "fedawe": ("fedawe", {})}


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["P1", "P2", "P3"])
def test_converges_on_logistic(pattern, logistic):
    trace = preset(pattern, n_clients=10, per_round=3).sample(200, seed=1)
    g0 = float(logistic.full_grad(logistic.x0).square().sum())
    for label, (name, hp) in VARIANTS.items():
        h = algorithms.run(algorithms.get(name, eta_l=0.1, eta_g=1.0, local_steps=5, **hp), logistic, trace,
                           seed=0, record_every=10)
        assert h.stopped is None, (label, h.stopped)
        final = h.grad_norm2[-3:].mean()
        print(f"\n{pattern} {label:10s} final ‖∇f‖² = {h.grad_norm2[-1]:.3e}  loss = {h.loss[-1]:.4f}  "
              f"(start ‖∇f‖² = {g0:.3e}, loss = {h.loss[0]:.4f})")
        assert final < 0.02 * g0, (label, final, g0)
        assert h.loss[-1] < h.loss[0]
