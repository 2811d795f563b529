"""The batched engine and the algorithms: paper identities, reductions, a per-client-loop
reference, Theorem 4.1 on quadratics, reproducibility and error handling."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import algorithms
from algorithms import NoiseStream
from algorithms.problems import Quadratic
from bounds import Constants
from bounds.fedsum import step_sizes_4_1, theorem_4_1
from participation import Trace, last_selection, preset
from participation.delays import delay_metrics

NAMES = ("fedavg", "fedsum-b", "fedsum", "fedsum-cr", "scaffold")
FAMILY = ("fedsum-b", "fedsum", "fedsum-cr")


def close(a, b, rel=1e-9):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.abs(b).max(initial=0.0))))


def states(name, problem, mask, seed=0, **hp):
    return list(algorithms.iterate(algorithms.get(name, **hp), problem, mask, seed=seed))


# ------------------------------------------------------------------ per-client reference


def reference(name, problem, mask, eta_l, eta_g, K, seed, scaffold_sign=1.0, scaffold_stale_dc=False):
    """The algorithm boxes written client by client (one client, one step at a time), with the
    boxes' model-difference formulas. Returns x_0..x_T and the final extra variables."""
    mask = np.asarray(mask, dtype=bool)
    T, N = mask.shape
    d = problem.dim
    noise = NoiseStream(seed)

    def g(i, x, t, k):
        return problem.stochastic_grads(x[None], torch.tensor([i]), noise.draws(t, k, torch.tensor([i])))[0]

    zero = torch.zeros(d, dtype=torch.float64)
    x, y, c = zero.clone(), zero.clone(), zero.clone()
    h, z, ci = [zero.clone() for _ in range(N)], [zero.clone() for _ in range(N)], [zero.clone() for _ in range(N)]
    a = [-1] * N
    xs = [x]
    for t in range(T):
        S = np.flatnonzero(mask[t]).tolist()
        if name == "fedavg":
            deltas = []
            for i in S:
                xi = x
                for k in range(K):
                    xi = xi - eta_l * g(i, xi, t, k)
                deltas.append(x - xi)
            if S:
                x = x - eta_g * sum(deltas) / len(S)
        elif name == "scaffold":
            dys, dcs = [], []
            for i in S:
                yi = x
                for k in range(K):
                    yi = yi - eta_l * (g(i, yi, t, k) + scaffold_sign * (c - ci[i]))
                c_plus = ci[i] - c + (x - yi) / (K * eta_l)
                if scaffold_stale_dc:              # bug: c_i overwritten before Δc is taken
                    ci[i] = c_plus
                    dcs.append(c_plus - ci[i])
                else:
                    dcs.append(c_plus - ci[i])
                    ci[i] = c_plus
                dys.append(yi - x)
            if S:
                x = x + eta_g * sum(dys) / len(S)
                c = c + sum(dcs) / N
        else:
            deltas = []
            for i in S:
                if name == "fedsum-b":
                    x1 = x - eta_l * sum(g(i, x, t, k) for k in range(K))
                    new_h = (x - x1) / (eta_l * K)
                else:
                    if name == "fedsum":
                        yi = -h[i] + y
                    else:
                        yi = N / (eta_g * eta_l * K) * (z[i] - x) / (t - a[i]) - h[i]
                        a[i], z[i] = t, x
                    xi = x
                    for k in range(K):
                        xi = xi - eta_l / N * (g(i, xi, t, k) + yi)
                    new_h = N * (x - xi) / (eta_l * K) - yi
                deltas.append(new_h - h[i])
                h[i] = new_h
            y = y + sum(deltas, zero)
            x = x - eta_g * eta_l * K / N * y
        xs.append(x)
    return torch.stack(xs), {"c": c, "c_clients": torch.stack(ci), "y": y, "h": torch.stack(h)}


@st.composite
def cases(draw):
    n, d, T = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    return dict(name=draw(st.sampled_from(NAMES)), mask=draw(arrays(bool, (T, n))),
                problem=Quadratic.random(n, d, heterogeneity=1.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                                         seed=draw(st.integers(0, 2**16)), diagonal=draw(st.booleans())),
                eta_l=draw(st.floats(0.05, 0.5)), eta_g=draw(st.floats(0.5, 2.0)), K=draw(st.integers(1, 3)),
                seed=draw(st.integers(0, 2**16)))


@given(cases())
def test_batched_engine_equals_per_client_loop(case):
    xs, _ = reference(case["name"], case["problem"], case["mask"], case["eta_l"], case["eta_g"], case["K"], case["seed"])
    run = states(case["name"], case["problem"], case["mask"], seed=case["seed"], eta_l=case["eta_l"],
                 eta_g=case["eta_g"], local_steps=case["K"])
    close(torch.stack([s.x for s in run]), xs, rel=1e-8)


# ------------------------------------------------------------------ the papers' identities


@pytest.fixture(scope="module")
def hetero():
    return Quadratic.random(8, 3, heterogeneity=2.0, noise_std=0.5, seed=11)


@pytest.fixture(scope="module")
def sparse_mask():
    mask = preset("P2", n_clients=8, per_round=2).sample(30, seed=4).mask.copy()
    mask[[3, 4]] = False   # empty rounds: the server still steps with the stale y
    return mask


@pytest.mark.parametrize("name", FAMILY)
def test_y_is_the_sum_of_latest_client_directions(name, hetero, sparse_mask):
    """y^(t) = Σ_i h_i^(t+1) (FedSUM eq. (7) / eq. (14)) after every round."""
    run = states(name, hetero, sparse_mask, eta_l=0.3, eta_g=0.8, local_steps=3)
    for s in run:
        close(s.y, s.h.sum(0), rel=1e-12)
    # never-seen clients contribute 0 (h_i = 0 until a_{i,t} ≥ 0)
    seen = last_selection(sparse_mask) >= 0
    for t, s in enumerate(run[1:]):
        assert torch.all(s.h[torch.as_tensor(~seen[t])] == 0)


def test_fedsum_correction_is_the_other_clients_sum(hetero, sparse_mask):
    """y_i^(t) = y^(t-1) − h_i^(t) (Alg. 2 line 6, eq. 9/41)."""
    run = states("fedsum", hetero, sparse_mask, eta_l=0.3, eta_g=0.8, local_steps=3)
    for before, after in zip(run, run[1:]):
        active = after.last_active
        close(after.last_correction[active], before.y - before.h[active], rel=1e-12)
        assert torch.all(after.last_correction[~active] == 0)


def test_fedsum_cr_correction_is_the_average_of_server_directions(hetero, sparse_mask):
    """y_i^(t) = (1/(t − a_{i,t-1})) Σ_{p=a_{i,t-1}}^{t-1} y^(p) − h_i^(t), y^(-1) = 0 (eq. 11, eq. 79)."""
    run = states("fedsum-cr", hetero, sparse_mask, eta_l=0.3, eta_g=0.8, local_steps=3)
    ys = [torch.zeros(hetero.dim, dtype=torch.float64)] + [s.y for s in run[1:]]   # ys[p + 1] = y^(p)
    a = last_selection(sparse_mask)
    checked = 0
    for t, (before, after) in enumerate(zip(run, run[1:])):
        assert torch.equal(after.a, torch.as_tensor(a[t]))                          # a_i^(t+1) = a_{i,t}
        for i in torch.nonzero(after.last_active).flatten().tolist():
            last = int(before.a[i])                                                  # a_{i,t-1}
            want = torch.stack(ys[last + 1:t + 1]).mean(0) - before.h[i]
            close(after.last_correction[i], want, rel=1e-9)
            close(after.z[i], before.x, rel=0)                                       # z_i^(t+1) = x^(t)
            checked += 1
    assert checked > 20


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize("noise_std", [0.0, 0.5])
def test_full_participation_one_step_is_gradient_descent(noise_std):
    """With K = 1 and every client in every round all five are SGD with step η_g η_l on the
    mean of the clients' stochastic gradients (for FedSUM: h_i^(t+1) = g_i, y^(t) = Σ g_i)."""
    problem = Quadratic.random(5, 3, heterogeneity=2.0, noise_std=noise_std, seed=7)
    mask = np.ones((12, 5), dtype=bool)
    eta_l, eta_g, seed = 0.3, 0.7, 5
    noise = NoiseStream(seed)
    x, want = torch.zeros(3, dtype=torch.float64), []
    for t in range(12):
        want.append(x)
        G = problem.stochastic_grads(x.expand(5, -1), torch.arange(5), noise.draws(t, 0, torch.arange(5)))
        x = x - eta_g * eta_l * G.mean(0)
    want.append(x)
    for name in NAMES:
        got = torch.stack([s.x for s in states(name, problem, mask, seed=seed, eta_l=eta_l, eta_g=eta_g)])
        close(got, torch.stack(want), rel=1e-12)


def test_fedsum_b_is_gradient_descent_with_step_eta_g_eta_l_K():
    problem = Quadratic.random(4, 3, heterogeneity=1.0, seed=1)
    x = torch.zeros(3, dtype=torch.float64)
    run = states("fedsum-b", problem, np.ones((6, 4), dtype=bool), eta_l=0.05, eta_g=1.5, local_steps=4)
    for s in run:
        close(s.x, x, rel=1e-12)
        x = x - 1.5 * 0.05 * 4 * problem.full_grad(x)


def test_empty_round():
    problem = Quadratic.random(3, 2, seed=0)
    mask = np.array([[1, 1, 0], [0, 0, 0]], dtype=bool)
    fedsum = states("fedsum", problem, mask, eta_l=0.1, local_steps=2)
    close(fedsum[2].x, fedsum[1].x - 0.1 * 2 / 3 * fedsum[1].y, rel=1e-13)   # steps with the stale y^(0)
    fedavg = states("fedavg", problem, mask, eta_l=0.1, local_steps=2)
    assert torch.equal(fedavg[2].x, fedavg[1].x)                              # no step without clients


# ------------------------------------------------------------------ SCAFFOLD and its classic bugs


def engine_scaffold(problem, mask, eta_l, eta_g, K, seed):
    run = states("scaffold", problem, mask, seed=seed, eta_l=eta_l, eta_g=eta_g, local_steps=K)
    return torch.stack([s.x for s in run]), {"c": run[-1].c, "c_clients": run[-1].c_clients}


def scaffold_is_correct(implementation) -> bool:
    """(1) c = (1/N) Σ_i c_i along a partial-participation run; (2) without noise and with every
    client, the control variates remove client drift: x → x* on heterogeneous clients."""
    problem = Quadratic.random(6, 3, heterogeneity=3.0, noise_std=0.3, seed=2)
    mask = preset("P1", n_clients=6, per_round=2).sample(15, seed=1).mask
    _, final = implementation(problem, mask, 0.2, 1.0, 5, 0)
    invariant = torch.allclose(final["c"], final["c_clients"].mean(0), atol=1e-12)
    exact = Quadratic(problem._A64, problem._b64)
    xs, _ = implementation(exact, np.ones((150, 6), dtype=bool), 0.2, 1.0, 5, 0)
    converged = bool(np.linalg.norm(xs[-1].numpy() - exact.minimizer()) < 1e-8)
    return invariant and converged


@pytest.mark.slow
def test_scaffold_checks_pass_for_the_engine_and_catch_the_classic_bugs():
    assert scaffold_is_correct(engine_scaffold)
    assert scaffold_is_correct(lambda *a: reference("scaffold", *a))
    assert not scaffold_is_correct(lambda *a: reference("scaffold", *a, scaffold_sign=-1.0))
    assert not scaffold_is_correct(lambda *a: reference("scaffold", *a, scaffold_stale_dc=True))


def test_scaffold_with_zero_control_variates_is_fedavg():
    problem = Quadratic.random(6, 3, heterogeneity=2.0, noise_std=0.5, seed=3)
    mask = preset("P1", n_clients=6, per_round=3).sample(1, seed=0).mask   # one round: controls still 0
    scaffold = states("scaffold", problem, mask, eta_l=0.2, eta_g=1.3, local_steps=4)
    fedavg = states("fedavg", problem, mask, eta_l=0.2, eta_g=1.3, local_steps=4)
    close(scaffold[1].x, fedavg[1].x, rel=1e-14)
    # and the state the control variates reach is c_i⁺ = mean local gradient, c = (1/N) Σ c_i
    close(scaffold[1].c, scaffold[1].c_clients.mean(0), rel=1e-14)


# ------------------------------------------------------------------ Theorem 4.1 on quadratics


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["P1", "P2", "P3"])
def test_theorem_4_1_bound_holds_on_quadratics(pattern):
    N, d, K, T = 10, 4, 2, 100
    problem = Quadratic.random(N, d, heterogeneity=1.0, noise_std=0.5, seed=0)
    pc = problem.constants()
    trace = preset(pattern, n_clients=N, per_round=3).sample(T, seed=1)
    tau = delay_metrics(trace)
    constants = Constants(L=pc.L, sigma2=pc.sigma2, delta_f=pc.delta_f, F0=pc.F0, n_clients=N, local_steps=K, rounds=T)
    for name in FAMILY:
        bound = theorem_4_1(constants, tau.tau_max, tau.tau_avg, algorithm=name)
        steps = bound.step_sizes
        assert steps["eta_l"] == step_sizes_4_1(constants, tau.tau_max, tau.tau_avg)["eta_l"]
        algorithm = algorithms.get(name, eta_l=steps["eta_l"], eta_g=steps["eta_g"], local_steps=K)
        measured = np.mean([algorithms.run(algorithm, problem, trace, seed=s).mean_grad_norm2 for s in range(3)])
        assert 0 < measured < bound.value, (name, measured, bound.value)
        # progress was made: the last iterates are well below the start
        assert algorithms.run(algorithm, problem, trace, seed=0).grad_norm2[-10:].mean() < measured


# ------------------------------------------------------------------ run(): records, noise, errors


@pytest.fixture(scope="module")
def small():
    problem = Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=5)
    trace = preset("P1", n_clients=6, per_round=2).sample(20, seed=2)
    return problem, trace


def test_history_contents_and_communication(small):
    problem, trace = small
    counts = trace.mask.sum(1)
    for name, (down, up) in {"fedavg": (1, 1), "fedsum-b": (1, 1), "fedsum": (2, 1), "fedsum-cr": (1, 1),
                             "scaffold": (2, 2)}.items():
        h = algorithms.run(algorithms.get(name, eta_l=0.1, local_steps=2), problem, trace, seed=1)
        assert h.stopped is None and h.algorithm == name and h.accuracy is None
        np.testing.assert_array_equal(h.rounds, np.arange(20))
        np.testing.assert_array_equal(h.downlink, down * 3 * counts)
        np.testing.assert_array_equal(h.uplink, up * 3 * counts)
        x_last = list(algorithms.iterate(algorithms.get(name, eta_l=0.1, local_steps=2), problem, trace, seed=1))
        np.testing.assert_array_equal(h.final_params, x_last[-1].x.numpy())
        assert h.grad_norm2[0] == pytest.approx(float(problem.full_grad(torch.zeros(3, dtype=torch.float64)).square().sum()))
        assert h.loss[0] == pytest.approx(float(problem.loss(torch.zeros(3, dtype=torch.float64))))


def test_record_every(small):
    problem, trace = small
    algorithm = algorithms.get("fedsum", eta_l=0.1, local_steps=2)
    full, sparse = algorithms.run(algorithm, problem, trace), algorithms.run(algorithm, problem, trace, record_every=3)
    np.testing.assert_array_equal(sparse.rounds, np.arange(0, 20, 3))
    np.testing.assert_array_equal(sparse.grad_norm2, full.grad_norm2[::3])
    np.testing.assert_array_equal(sparse.final_params, full.final_params)
    assert full.mean_grad_norm2 == pytest.approx(full.grad_norm2.mean())
    with pytest.raises(ValueError, match="record_every=1"):
        sparse.mean_grad_norm2


def test_same_seed_same_history_other_seed_other_noise(small):
    problem, trace = small
    algorithm = algorithms.get("fedsum-cr", eta_l=0.1, local_steps=3)
    first, again = algorithms.run(algorithm, problem, trace, seed=4), algorithms.run(algorithm, problem, trace, seed=4)
    assert first.same_as(again)
    assert not first.same_as(algorithms.run(algorithm, problem, trace, seed=5))
    rng = algorithms.run(algorithm, problem, trace, seed=np.random.default_rng(0))
    assert rng.same_as(algorithms.run(algorithm, problem, trace, seed=rng.seed))


class Recording(Quadratic):
    """A quadratic that keeps every stochastic gradient it hands out."""

    def stochastic_grads(self, X, clients, draws):
        G = super().stochastic_grads(X, clients, draws)
        self.log.append((clients.tolist(), G))
        return G


def test_algorithms_see_identical_noise(small):
    problem, trace = small
    logs = {}
    for name in NAMES:
        recorder = Recording(problem._A64, problem._b64, problem.noise_std)
        recorder.log = []
        algorithms.run(algorithms.get(name, eta_l=0.1, local_steps=2), recorder, trace, seed=8)
        logs[name] = recorder.log
    # round 0, step 0: every algorithm evaluates the same clients at x_0 = 0
    for name in NAMES:
        assert logs[name][0][0] == logs["fedavg"][0][0]
        assert torch.equal(logs[name][0][1], logs["fedavg"][0][1])
    # FedSUM-B's second mini-batch is at x_0 too and is a fresh draw
    assert not torch.equal(logs["fedsum-b"][1][1], logs["fedsum-b"][0][1])


def test_divergence_stops_with_a_report():
    problem = Quadratic.random(4, 3, heterogeneity=1.0, noise_std=0.1, seed=0, curvature=(1.0, 2.0))
    mask = np.ones((400, 4), dtype=bool)
    for name in NAMES:
        h = algorithms.run(algorithms.get(name, eta_l=50.0, eta_g=2.0, local_steps=3), problem, mask)
        assert h.stopped is not None and " became " in h.stopped and "at round" in h.stopped, h.stopped
        stop = int(h.stopped.rsplit(" ", 1)[1])
        assert 0 < stop < 400 and len(h.rounds) == stop and len(h.uplink) == stop
        assert np.isfinite(h.final_params).all() and np.isfinite(h.grad_norm2).all()
        with pytest.raises(ValueError, match="stopped"):
            h.mean_grad_norm2


@pytest.mark.parametrize("name", NAMES)
def test_float32_runs_track_float64(name, small):
    problem, trace = small
    exact = Quadratic(problem._A64, problem._b64)
    algorithm = algorithms.get(name, eta_l=0.1, local_steps=2)
    h64 = algorithms.run(algorithm, exact, trace)
    h32 = algorithms.run(algorithm, exact, trace, dtype=torch.float32)
    assert h32.meta["dtype"] == "float32" and h32.stopped is None
    np.testing.assert_allclose(h32.final_params, h64.final_params, rtol=1e-3, atol=1e-4)
    noisy = algorithms.run(algorithm, problem, trace, dtype=torch.float32, seed=3)
    assert noisy.stopped is None and np.isfinite(noisy.grad_norm2).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(small):
    problem, trace = small
    exact = Quadratic(problem._A64, problem._b64)
    for name in NAMES:
        algorithm = algorithms.get(name, eta_l=0.1, local_steps=2)
        gpu = algorithms.run(algorithm, exact, trace, device="cuda")
        np.testing.assert_allclose(gpu.final_params, algorithms.run(algorithm, exact, trace).final_params, rtol=1e-10)
        assert algorithms.run(algorithm, problem, trace, device="cuda", seed=1).stopped is None


@pytest.mark.parametrize("name, hp, match", [
    ("fedprox", {}, "unknown algorithm 'fedprox'"),
    ("fedsum", {"eta_l": -0.1}, "eta_l"),
    ("fedsum", {"eta_g": float("inf")}, "eta_g"),
    ("fedsum-cr", {"local_steps": 0}, "local_steps"),
    ("scaffold", {"local_steps": 2.5}, "local_steps"),
    ("fedsum-b", {"momentum": 0.9}, "momentum"),
    ("fedavg", {"aggregate": "some"}, "aggregate"),
])
def test_get_rejects_bad_names_and_hyperparameters(name, hp, match):
    with pytest.raises(ValueError, match=match):
        algorithms.get(name, **hp)


def test_get_names_and_aliases():
    assert set(NAMES) <= set(algorithms.names())
    assert algorithms.get("FedSUM_CR", eta_l=0.2) == algorithms.FedSUMCR(eta_l=0.2)
    assert algorithms.get("fedavg", aggregate="all").aggregate == "all"


def test_fedavg_aggregate_all_divides_by_n():
    problem = Quadratic.random(4, 2, heterogeneity=1.0, seed=0)
    mask = np.array([[1, 1, 0, 0]], dtype=bool)
    active = states("fedavg", problem, mask, eta_l=0.1)[1].x
    everyone = states("fedavg", problem, mask, eta_l=0.1, aggregate="all")[1].x
    close(everyone, active * 2 / 4, rel=1e-14)    # x0 = 0: the step is halved


@pytest.mark.parametrize("kwargs, match", [
    ({"trace": np.ones((3, 5), dtype=bool)}, "5 clients but the problem has 6"),
    ({"trace": np.full((3, 6), 2)}, "trace"),
    ({"x0": np.zeros(4)}, "x0 must have shape"),
    ({"x0": np.full(3, np.nan)}, "x0 must be finite"),
    ({"record_every": 0}, "record_every"),
    ({"seed": -1}, "seed"),
    ({"algorithm": "fedsum"}, "algorithm must be"),
])
def test_run_rejects_bad_input(kwargs, match, small):
    problem, trace = small
    args = {"algorithm": algorithms.get("fedsum"), "problem": problem, "trace": trace, **kwargs}
    with pytest.raises(ValueError, match=match):
        algorithms.run(**args)


def test_x0_and_trace_as_mask(small):
    problem, trace = small
    algorithm = algorithms.get("fedsum", eta_l=0.1)
    x0 = np.array([1.0, -2.0, 0.5])
    h = algorithms.run(algorithm, problem, trace.mask, x0=x0)
    assert h.loss[0] == pytest.approx(float(problem.loss(torch.tensor(x0))))
    assert h.same_as(algorithms.run(algorithm, problem, Trace(trace.mask), x0=torch.tensor(x0)))
    assert math.isfinite(h.mean_grad_norm2)


class StartsAtOnes(Quadratic):
    @property
    def x0(self):
        return torch.ones(self.dim, dtype=self.dtype, device=self.device)


def test_default_start_is_the_problems_x0(small):
    problem, trace = small
    assert torch.equal(problem.x0, torch.zeros(3, dtype=torch.float64))
    shifted = StartsAtOnes(problem._A64, problem._b64, problem.noise_std)
    h = algorithms.run(algorithms.get("fedsum-cr", eta_l=0.1), shifted, trace)
    assert h.loss[0] == pytest.approx(float(problem.loss(torch.ones(3, dtype=torch.float64))))
