"""Server momentum (FedGM, its presets, Multistage and Autonomous FedGM): exact reductions,
the buffer convention, a per-client-loop reference, Theorems 4.1/4.6 on quadratics and
convergence on logistic regression."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import algorithms
from algorithms import NoiseStream
from algorithms.autonomous import ALGORITHMS as AUTONOMOUS
from algorithms.autonomous import ARRIVAL_KEY, draw_arrivals
from algorithms.fedgm import ALGORITHMS as MOMENTUM
from algorithms.problems import Logistic, Quadratic
from algorithms.registry import register
from bounds import Constants
from bounds.momentum import StageSchedule, constant_and_drop, single_stage, theorem_4_1, theorem_4_6, w1
from participation import preset

for _cls in MOMENTUM + AUTONOMOUS:
    register(_cls)

DAMPENED = ("fedgm", "qhm", "fedgm-autonomous")
NAMES = DAMPENED + ("fedavgm", "fednag")


def close(a, b, rel=1e-9):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.abs(b).max(initial=0.0))))


def xs(name, problem, mask, seed=0, **hp):
    return torch.stack([s.x for s in algorithms.iterate(algorithms.get(name, **hp), problem, mask, seed=seed)])


# ------------------------------------------------------------------ per-client reference


def reference(name, problem, mask, seed, eta_l, K, eta_g, beta, nu=None, schedule=None, max_delay=1, max_epochs=1):
    """The boxes client by client, one step at a time: LocalOPT (Algorithm 2), the mean
    Δ_t, the server step of ``name``; for the autonomous variant the stale start, K_{t,i}
    steps and the division by K_{t,i} (Algorithm 4; App. B.2), with client i's arrival drawn
    from its own uniforms (u_1, u_2) of step key ARRIVAL_KEY: τ = ⌊u_1·min(D, t+1)⌋,
    K_{t,i} = K·(1 + ⌊u_2·E⌋). Returns x_0..x_T."""
    mask = np.asarray(mask, dtype=bool)
    T = mask.shape[0]
    noise = NoiseStream(seed)
    x = torch.zeros(problem.dim, dtype=torch.float64)
    buf, models, out = torch.zeros_like(x), [x], [x]
    for t in range(T):
        S = np.flatnonzero(mask[t]).tolist()
        if not S:
            out.append(x)
            continue
        deltas = []
        for i in S:
            start, steps = x, K
            if name == "fedgm-autonomous":
                u1, u2 = noise.draws(t, ARRIVAL_KEY, torch.tensor([i])).uniform(2)[0].tolist()
                tau, epochs = int(np.floor(u1 * min(max_delay, t + 1))), 1 + int(np.floor(u2 * max_epochs))
                start, steps = models[max(len(models) - 1 - tau, 0)], epochs * K
            xi = start
            for k in range(steps):
                draws = noise.draws(t, k, torch.tensor([i]))
                xi = xi - eta_l * problem.stochastic_grads(xi[None], torch.tensor([i]), draws)[0]
            deltas.append((start - xi) / (steps if name == "fedgm-autonomous" else 1))
        delta = sum(deltas) / len(S)
        eta, b, v = eta_g, beta, nu
        if schedule is not None:
            s = int(np.searchsorted(np.cumsum(schedule.lengths), t, side="right"))
            eta, b, v = schedule.eta_g[s], schedule.beta[s], schedule.nu[s]
        if name in DAMPENED:
            buf = (1 - b) * delta + b * buf
            x = x - eta * ((1 - v) * delta + v * buf)
        else:
            buf = b * buf + delta
            x = x - eta * (delta + b * buf if name == "fednag" else buf)
        models.append(x)
        out.append(x)
    return torch.stack(out)


@st.composite
def schedules(draw, eta_l):
    """A valid StageSchedule: T_s non-decreasing, η_s = W_2/T_s, ν constant, β_s = W_1/(W_1 + η_s ν)."""
    lengths = sorted(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    eta1 = draw(st.floats(0.5, 2.0))
    eta = [eta1 * lengths[0] / t for t in lengths]
    nu, beta1 = draw(st.floats(0.0, 1.0)), draw(st.floats(0.0, 0.9))
    W1 = eta[0] * beta1 * nu / (1 - beta1)
    beta = [W1 / (W1 + e * nu) for e in eta] if W1 > 0 else [beta1] * len(eta)
    return StageSchedule(tuple(lengths), tuple(eta), eta_l, tuple(beta), nu)


@st.composite
def cases(draw):
    name = draw(st.sampled_from(NAMES))
    n, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    eta_l, K = draw(st.floats(0.05, 0.5)), draw(st.integers(1, 3))
    schedule = draw(schedules(eta_l)) if name in ("fedgm", "fedgm-autonomous") and draw(st.booleans()) else None
    T = schedule.total_rounds if schedule else draw(st.integers(1, 6))
    problem = Quadratic.random(n, d, heterogeneity=1.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                               seed=draw(st.integers(0, 2**16)), diagonal=draw(st.booleans()))
    hp = dict(eta_l=eta_l, local_steps=K)
    ref = dict(eta_l=eta_l, K=K, schedule=schedule)
    if schedule is not None:
        hp["schedule"] = schedule
        ref |= dict(eta_g=None, beta=None)
    else:
        hp |= dict(eta_g=draw(st.floats(0.2, 2.0)), beta=draw(st.floats(0.0, 0.95)))
        ref |= dict(eta_g=hp["eta_g"], beta=hp["beta"])
        if name in DAMPENED:
            hp["nu"] = ref["nu"] = draw(st.floats(0.0, 1.0))
    if name == "fedgm-autonomous":
        hp["max_delay"] = ref["max_delay"] = draw(st.integers(1, 4))
        hp["max_epochs"] = ref["max_epochs"] = draw(st.integers(1, 3))
    return dict(name=name, problem=problem, mask=draw(arrays(bool, (T, n))), seed=draw(st.integers(0, 2**16)),
                hp=hp, ref=ref)


@pytest.mark.slow
@given(cases())
def test_batched_equals_per_client_loop(case):
    """One batched stochastic_grads call per step (masked for unequal K_{t,i}) == the loop."""
    got = xs(case["name"], case["problem"], case["mask"], seed=case["seed"], **case["hp"])
    close(got, reference(case["name"], case["problem"], case["mask"], case["seed"], **case["ref"]), rel=1e-8)


# ------------------------------------------------------------------ exact reductions


@st.composite
def runs(draw):
    n, d, T = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    return dict(problem=Quadratic.random(n, d, heterogeneity=1.0, noise_std=draw(st.sampled_from([0.0, 0.5])),
                                         seed=draw(st.integers(0, 2**16))),
                mask=draw(arrays(bool, (T, n))), seed=draw(st.integers(0, 2**16)),
                eta_l=draw(st.floats(0.05, 0.5)), K=draw(st.integers(1, 3)), eta_g=draw(st.floats(0.2, 2.0)),
                beta=draw(st.floats(0.0, 0.95)), nu=draw(st.floats(0.0, 1.0)))


def _common(r):
    return dict(eta_l=r["eta_l"], local_steps=r["K"])


@given(runs())
def test_nu_zero_is_fedavg_with_a_server_step(r):
    """ν = 0: h = Δ_t whatever β, so x ← x − ηΔ_t: FedAvg with η_g = η ("FedSGD", Sec. 3)."""
    args = (r["problem"], r["mask"], r["seed"])
    close(xs("fedgm", *args, eta_g=r["eta_g"], beta=r["beta"], nu=0.0, **_common(r)),
          xs("fedavg", *args, eta_g=r["eta_g"], **_common(r)), rel=1e-12)


@pytest.mark.slow
@given(runs())
def test_nu_one_is_heavy_ball_fedavgm_and_nu_beta_is_nesterov_at_converted_rate(r):
    """d = (1−β)v: FedGM(η, β, ν=1) = FedAvgM(η' = η(1−β), β) and
    FedGM(η, β, ν=β) = FedNAG(η' = η(1−β), β) (both cases in Sec. 3, after eq. (2))."""
    args, converted = (r["problem"], r["mask"], r["seed"]), r["eta_g"] * (1 - r["beta"])
    close(xs("fedgm", *args, eta_g=r["eta_g"], beta=r["beta"], nu=1.0, **_common(r)),
          xs("fedavgm", *args, eta_g=converted, beta=r["beta"], **_common(r)), rel=1e-11)
    close(xs("fedgm", *args, eta_g=r["eta_g"], beta=r["beta"], nu=r["beta"], **_common(r)),
          xs("fednag", *args, eta_g=converted, beta=r["beta"], **_common(r)), rel=1e-11)


@pytest.mark.slow
@given(runs())
def test_beta_zero_removes_momentum(r):
    """β = 0: d_{t+1} = Δ_t, h = Δ_t for every ν; v_{t+1} = Δ_t for the undampened presets."""
    args = (r["problem"], r["mask"], r["seed"])
    plain = xs("fedavg", *args, eta_g=r["eta_g"], **_common(r))
    for name, extra in (("fedgm", {"nu": r["nu"]}), ("qhm", {"nu": r["nu"]}), ("fedavgm", {}), ("fednag", {})):
        close(xs(name, *args, eta_g=r["eta_g"], beta=0.0, **extra, **_common(r)), plain, rel=1e-12)


@given(runs(), st.sampled_from([None, "schedule"]))
def test_autonomous_without_delay_or_varying_steps_is_fedgm(r, kind):
    """τ = 0 and K_{t,i} = K (D = E = 1): Algorithm 4 = Algorithm 3 with η → η/K, the only
    difference being the normalisation by K_{t,i} (Sec. 5.1; App. B.2)."""
    args, K = (r["problem"], r["mask"], r["seed"]), r["K"]
    if kind is None:
        auto = dict(eta_g=r["eta_g"], beta=r["beta"], nu=r["nu"])
        sync = dict(eta_g=r["eta_g"] / K, beta=r["beta"], nu=r["nu"])
    else:
        T = len(r["mask"])
        auto = dict(schedule=single_stage(T, r["eta_g"], r["eta_l"], r["beta"], r["nu"]))
        sync = dict(schedule=single_stage(T, r["eta_g"] / K, r["eta_l"], r["beta"], r["nu"]))
    got = xs("fedgm-autonomous", *args, max_delay=1, max_epochs=1, local_steps=K,
             **({"eta_l": r["eta_l"]} if kind is None else {}), **auto)
    want = xs("fedgm", *args, local_steps=K, **({"eta_l": r["eta_l"]} if kind is None else {}), **sync)
    close(got, want, rel=1e-11)


# ------------------------------------------------------------------ momentum pitfalls


@pytest.fixture(scope="module")
def scalar():
    """f(x) = ½(x − 1)², one client, no noise: with K = 1, Δ_t = η_l (x_t − 1)."""
    return Quadratic(np.array([[1.0]]), np.array([[1.0]]))


def test_buffer_conventions_after_one_round(scalar):
    """FedGM's buffer is the EMA d_1 = (1−β)Δ_0 (eq. (2)), FedAvgM's is v_1 = Δ_0."""
    mask, beta = np.ones((1, 1), bool), 0.9
    delta0 = 0.1 * (0.0 - 1.0)
    gm = list(algorithms.iterate(algorithms.get("fedgm", eta_l=0.1, beta=beta, nu=1.0), scalar, mask))[-1]
    hb = list(algorithms.iterate(algorithms.get("fedavgm", eta_l=0.1, beta=beta), scalar, mask))[-1]
    assert gm.delta.item() == pytest.approx(delta0) and hb.delta.item() == pytest.approx(delta0)
    assert gm.d.item() == pytest.approx((1 - beta) * delta0, rel=1e-14)       # not β·0 + Δ_0
    assert hb.d.item() == pytest.approx(delta0, rel=1e-14)                     # not (1−β)Δ_0
    assert gm.x.item() == pytest.approx(-(1 - beta) * delta0, rel=1e-14)     # η = 1 on d_1


def test_heavy_ball_vs_nesterov_by_hand(scalar):
    """Two rounds written out: fedavgm is heavy ball (x ← x − η'v) and fednag Nesterov
    (x ← x − η'(Δ + βv)); FedGM at the unconverted η is neither."""
    eta_l, eta, beta, mask = 0.5, 0.8, 0.6, np.ones((2, 1), bool)

    def by_hand(nesterov):
        x, v = 0.0, 0.0
        for _ in range(2):
            delta = eta_l * (x - 1.0)
            v = beta * v + delta
            x = x - eta * (delta + beta * v if nesterov else v)
        return x

    heavy, nag = by_hand(False), by_hand(True)
    assert abs(heavy - nag) > 1e-3
    assert xs("fedavgm", scalar, mask, eta_l=eta_l, eta_g=eta, beta=beta)[-1].item() == pytest.approx(heavy, rel=1e-14)
    assert xs("fednag", scalar, mask, eta_l=eta_l, eta_g=eta, beta=beta)[-1].item() == pytest.approx(nag, rel=1e-14)
    unconverted = xs("fedgm", scalar, mask, eta_l=eta_l, eta_g=eta, beta=beta, nu=1.0)[-1].item()
    assert abs(unconverted - heavy) > 1e-3
    assert xs("fedgm", scalar, mask, eta_l=eta_l, eta_g=eta / (1 - beta), beta=beta,
              nu=1.0)[-1].item() == pytest.approx(heavy, rel=1e-13)


def test_preset_defaults():
    gm, qhm, hb, nag = (algorithms.get(n) for n in ("fedgm", "qhm", "fedavgm", "fednag"))
    assert (gm.beta, gm.nu, qhm.beta, qhm.nu) == (0.9, 0.7, 0.999, 0.7)
    assert hb.beta == nag.beta == 0.9 and not hb.nesterov and nag.nesterov
    assert all(a.communication(7, 3) == (21, 21) for a in (gm, qhm, hb, nag, algorithms.get("fedgm-autonomous")))


# ------------------------------------------------------------------ multistage


@pytest.fixture(scope="module")
def hetero():
    return Quadratic.random(6, 3, heterogeneity=2.0, noise_std=0.5, seed=3)


def test_schedule_drives_the_rounds_and_lyapunov_identity(hetero):
    """z_t = x_t − W_1 d_t obeys z_{t+1} − z_t = −η_t Δ_t across stage changes (eq. (4),
    App. D) — only if the stage triple of round t is used and d is never reset."""
    schedule = constant_and_drop((2.0, 1.0, 0.5), 28, 0.05, nu=0.9, beta1=0.5)
    alg = algorithms.get("fedgm", schedule=schedule, local_steps=2)
    assert (alg.eta_l, alg.eta_g, alg.beta, alg.nu) == (0.05, 2.0, 0.5, 0.9)
    ends = np.cumsum(schedule.lengths)
    for t in range(28):
        s = int(np.searchsorted(ends, t, side="right"))
        assert alg.hyper(t) == (schedule.eta_g[s], schedule.beta[s], schedule.nu[s])
    mask = preset("P1", n_clients=6, per_round=3).sample(28, seed=0).mask
    run = list(algorithms.iterate(alg, hetero, mask, seed=5))
    W1 = w1(schedule)
    z = [s.x - W1 * s.d for s in run]
    for t in range(28):
        close(z[t + 1] - z[t], -alg.hyper(t)[0] * run[t + 1].delta, rel=1e-12)
    with pytest.raises(ValueError, match="outside the schedule"):
        alg.hyper(28)


@pytest.mark.parametrize("hp, match", [
    (dict(beta=1.0), "beta"), (dict(beta=-0.1), "beta"), (dict(nu=1.5), "nu"), (dict(nu=float("nan")), "nu"),
    (dict(eta_g=0.0), "eta_g"), (dict(eta_l=-1.0), "eta_l"), (dict(local_steps=0), "local_steps"),
    (dict(schedule="paper"), "schedule"), (dict(max_delay=0), "max_delay"), (dict(max_epochs=1.5), "max_epochs"),
])
def test_bad_hyperparameters_raise(hp, match):
    name = "fedgm-autonomous" if "max_delay" in hp or "max_epochs" in hp else "fedgm"
    with pytest.raises(ValueError, match=match):
        algorithms.get(name, **hp)
    if set(hp) <= {"beta", "eta_g", "eta_l", "local_steps"}:
        with pytest.raises(ValueError, match=match):
            algorithms.get("fedavgm", **hp)


def test_schedule_conflicts_raise():
    schedule = constant_and_drop((2.0, 1.0), 9, 0.05)
    with pytest.raises(ValueError, match="eta_l"):
        algorithms.get("fedgm", schedule=schedule, eta_l=0.1)
    with pytest.raises(ValueError, match="beta"):
        algorithms.get("fedgm-autonomous", schedule=schedule, beta=0.99)
    assert algorithms.get("fedgm", schedule=schedule, eta_g=2.0).eta_g == 2.0


# ------------------------------------------------------------------ autonomous


def test_autonomous_draws_are_reproducible_bounded_and_per_client(hetero):
    hp = dict(eta_l=0.05, local_steps=2, max_delay=3, max_epochs=4)
    full = np.ones((12, 6), bool)
    half = full.copy()
    half[:, ::2] = False
    a = list(algorithms.iterate(algorithms.get("fedgm-autonomous", **hp), hetero, full, seed=1))
    b = list(algorithms.iterate(algorithms.get("fedgm-autonomous", **hp), hetero, full, seed=1))
    c = list(algorithms.iterate(algorithms.get("fedgm-autonomous", **hp), hetero, half, seed=1))
    d = list(algorithms.iterate(algorithms.get("fedgm-autonomous", **hp), hetero, full, seed=2))
    assert all(torch.equal(s.x, r.x) for s, r in zip(a, b))
    assert all(s.arrived.all() for s in a[1:])
    delays = torch.stack([s.delays for s in a[1:]])
    steps = torch.stack([s.steps for s in a[1:]])
    assert delays[0].eq(0).all() and delays.max() == 2 and all(delays[t].max() <= t for t in range(12))
    assert steps.min() >= 2 and steps.max() <= 8 and torch.all(steps % 2 == 0) and len(steps.unique()) > 1
    for t, (s, r) in enumerate(zip(a[1:], c[1:])):   # client i's draw does not depend on who else arrives
        assert np.array_equal(r.arrived.numpy(), half[t])
        assert torch.equal(s.delays[1::2], r.delays[1::2]) and torch.equal(s.steps[1::2], r.steps[1::2])
        assert r.delays[::2].eq(0).all() and r.steps[::2].eq(0).all()
    assert not torch.equal(delays, torch.stack([s.delays for s in d[1:]]))
    empty = list(algorithms.iterate(algorithms.get("fedgm-autonomous", **hp), hetero, np.zeros((2, 6), bool)))
    assert torch.equal(empty[-1].x, empty[0].x) and not empty[-1].arrived.any() and empty[-1].steps.eq(0).all()


def test_autonomous_arrivals_follow_the_documented_map(hetero):
    """τ_{t,i} = ⌊u_1·min(D, t+1)⌋ and K_{t,i} = K(1 + ⌊u_2·E⌋) from client i's uniforms of
    step key ARRIVAL_KEY; over many rows every value of U{0..n−1} comes out about 1/n of the time."""
    D, E, K, seed = 3, 4, 2, 6
    alg = algorithms.get("fedgm-autonomous", eta_l=0.05, local_steps=K, max_delay=D, max_epochs=E)
    mask = np.ones((5, 6), bool)
    states = list(algorithms.iterate(alg, hetero, mask, seed=seed))
    noise = NoiseStream(seed)
    for t, s in enumerate(states[1:]):
        u = noise.draws(t, ARRIVAL_KEY, torch.arange(6)).uniform(2).numpy()
        assert np.array_equal(s.delays.numpy(), np.floor(u[:, 0] * min(D, t + 1)).astype(np.int64))
        assert np.array_equal(s.steps.numpy(), K * (1 + np.floor(u[:, 1] * E).astype(np.int64)))
    tau, epochs = draw_arrivals(noise.draws(7, ARRIVAL_KEY, torch.arange(20000)), 7, D, E)
    assert np.allclose(np.bincount(tau.numpy(), minlength=D) / 20000, 1 / D, atol=0.02)
    assert np.allclose(np.bincount(epochs.numpy(), minlength=E + 1)[1:] / 20000, 1 / E, atol=0.02)


# ------------------------------------------------------------------ batches


@pytest.fixture(scope="module")
def batch_masks():
    out = [preset("P2", n_clients=6, per_round=2).sample(15, seed=s).mask.copy() for s in range(3)]
    out[1][[0, 4, 5]] = False                     # empty rounds in one run only
    return out


@pytest.mark.parametrize("name", NAMES)
def test_a_batch_equals_its_runs_alone(name, hetero, batch_masks):
    """Different seeds, traces (one with empty rounds) and (η_l, η_g): bit-identical Histories
    and observations, alone or batched."""
    extra = dict(max_delay=3, max_epochs=2) if name == "fedgm-autonomous" else {}
    algs = [algorithms.get(name, eta_l=e, eta_g=g, local_steps=2, **extra) for e, g in ((0.05, 1.0), (0.1, 0.5), (0.02, 1.5))]
    seeds = [4, 9, 4]
    alone = [algorithms.run(a, hetero, m, seed=s, observe=True) for a, m, s in zip(algs, batch_masks, seeds)]
    batch = algorithms.run_batch(algs, hetero, batch_masks, seeds, observe=True)
    for a, b in zip(alone, batch):
        assert a.same_as(b) and a.observed.keys() == b.observed.keys()
        for key in a.observed:
            assert all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(a.observed[key], b.observed[key]))
    assert not alone[0].same_as(alone[2])
    if name == "fedgm-autonomous":
        steps = batch[1].observed["local_steps"]
        assert all(len(steps[t]) == 0 for t in (0, 4, 5)) and len(steps[1]) == batch_masks[1][1].sum()


@pytest.mark.parametrize("name", ["fedgm", "fedgm-autonomous"])
def test_a_batch_with_a_schedule_equals_its_runs_alone(name, hetero, batch_masks):
    """A stage schedule is shared by the runs of a batch (it fixes η_l and η); seeds and traces differ."""
    schedule = constant_and_drop((2.0, 1.0), 15, 0.05, nu=0.9, beta1=0.5)
    extra = dict(max_delay=3, max_epochs=2) if name == "fedgm-autonomous" else {}
    alg = algorithms.get(name, schedule=schedule, local_steps=2, **extra)
    batch = algorithms.run_batch(alg, hetero, batch_masks, [1, 2, 3])
    assert all(algorithms.run(alg, hetero, m, seed=s).same_as(h) for m, s, h in zip(batch_masks, (1, 2, 3), batch))


# ------------------------------------------------------------------ theorems on quadratics


def shared_curvature(n, d, noise_std, seed):
    """A_i = A for all i, so ∇f_i − ∇f = −A(b_i − b̄) everywhere: σ_g² (A3) is exact."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.1, 1.0, d)
    b = rng.standard_normal(d) + 1.5 * rng.standard_normal((n, d))
    problem = Quadratic(np.tile(lam, (n, 1)), b, noise_std)
    sigma_g2 = float(((lam * (b - b.mean(0))) ** 2).sum(1).mean())
    return problem, sigma_g2


def stage_average(grad2, schedule):
    """Ḡ = (1/S) Σ_s (1/T_s) Σ_{t∈stage s} ‖∇f(x_t)‖² (Sec. 4.2)."""
    return float(np.mean([chunk.mean() for chunk in np.split(grad2, np.cumsum(schedule.lengths)[:-1])]))


@pytest.mark.parametrize("theorem, m", [("4.1", 8), ("4.6", 3)])
@pytest.mark.parametrize("stages", ["single", "multistage"])
def test_measured_gradient_below_theorem_bound(theorem, m, stages):
    n, K, T = 8, 2, 70
    problem, sigma_g2 = shared_curvature(n, 4, 0.5, seed=7)
    pc = problem.constants()
    constants = Constants(L=pc.L, sigma2=pc.sigma2, delta_f=pc.delta_f, n_clients=n, local_steps=K, rounds=T,
                          zeta2=sigma_g2)

    def schedule_at(eta_l):
        if stages == "single":
            return single_stage(T, 1.0, eta_l, beta=0.5, nu=0.9)
        return constant_and_drop((2.0, 1.0, 0.5), T, eta_l, nu=0.9, beta1=0.5)

    def bound_at(schedule):
        return theorem_4_1(constants, schedule) if theorem == "4.1" else theorem_4_6(constants, schedule, m)

    eta_l = 1 / (8 * K * pc.L)            # the largest the theorems allow; halve until every condition holds
    while not bound_at(schedule_at(eta_l)).valid:
        eta_l /= 2
    schedule = schedule_at(eta_l)
    bound = bound_at(schedule)
    trace = preset("P1", n_clients=n, per_round=m).sample(T, seed=3)
    alg = algorithms.get("fedgm", schedule=schedule, local_steps=K)
    measured = np.mean([stage_average(algorithms.run(alg, problem, trace, seed=s).grad_norm2, schedule)
                        for s in range(4)])
    assert bound.valid and 0 < measured <= bound.value, (measured, str(bound))


# ------------------------------------------------------------------ logistic convergence


@pytest.fixture(scope="module")
def logistic():
    return Logistic.synthetic(n_clients=10, alpha=0.5, n_samples=400, dim=5, n_classes=3, batch_size=16, seed=0)


LOGISTIC_RUNS = {
    "fedgm": dict(eta_g=1.0, beta=0.9, nu=0.7, local_steps=5),
    "fedgm-autonomous": dict(eta_g=3.0, beta=0.9, nu=0.7, local_steps=3, max_delay=5, max_epochs=6),
}


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["P1", "P2", "P3"])
@pytest.mark.parametrize("name", LOGISTIC_RUNS)
def test_converges_on_logistic(logistic, pattern, name, record_property):
    """120 rounds, 3 of 10 clients per round on average: the gradient falls 100-fold and the
    optimality gap 10-fold (η_l = 0.05; autonomous: stale start within 5 models, 1–6 epochs)."""
    trace = preset(pattern, n_clients=10, per_round=3).sample(120, seed=0)
    history = algorithms.run(algorithms.get(name, eta_l=0.05, **LOGISTIC_RUNS[name]), logistic, trace, seed=0)
    f_star = logistic.constants().f_star
    record_property("final_grad_norm2", float(history.grad_norm2[-1]))
    record_property("final_loss", float(history.loss[-1]))
    assert history.stopped is None
    assert history.grad_norm2[-10:].mean() < 0.01 * history.grad_norm2[0]
    assert history.loss[-1] - f_star < 0.1 * (history.loss[0] - f_star)
