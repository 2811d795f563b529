"""Every theorem judged on run records: the engine's runs written as records and a plain numpy loop
written from the papers' algorithms give, through ``check_run``, the left side, bound and verdict
that ``check`` gives on the same runs; a record without a field a theorem reads is refused naming
the field; a false bound is violated on records where the true one holds."""
import dataclasses
import json

import numpy as np
import pytest

import algorithms
from algorithms.problems import Quadratic
from bounds.core import Constants
from participation import Trace
from participation.patterns import Bernoulli, Cyclic, Markov, Uniform
from verify.checking import check
from verify.check_tables import averaged_losses
from verify.records.checks import check_run
from verify.records import RunRecorder, algorithm_fields, availability_of, load_record, record_from_history

N, K, T = 8, 2, 40
FIXED = Trace(Uniform(N, 3).sample(T, seed=1).mask)       # one trace for the bounds conditional on it


@pytest.fixture(scope="module")
def problem():
    return Quadratic.random(N, 4, seed=3, noise_std=0.1)


@pytest.fixture(scope="module")
def exact_problem():
    return Quadratic.random(N, 4, seed=5, noise_std=0.0)


def _constants(problem, rounds=T) -> Constants:
    c = problem.constants()
    return Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=N, local_steps=K, rounds=rounds)


def _header_constants(problem) -> dict:
    c = problem.constants()
    return {"L": c.L, "sigma2": c.sigma2, "delta_f": c.delta_f, "F0": c.F0}


def _checked_and_recorded(problem, tmp_path, theorem, algorithm, source, seeds=3, hparams=None):
    """``check`` with every run written as a record (what ``check --record`` writes)."""
    paths = []

    def write(history, trace, alg, seed):
        path = tmp_path / f"run_{len(paths)}.jsonl"
        steps = {k: v for k, v in alg.hparams.items() if k.startswith("eta") and isinstance(v, (int, float))}
        record_from_history(path, history, trace, algorithm=alg.name, local_steps=alg.local_steps, step_sizes=steps,
                            seed=int(seed), constants=_header_constants(problem), availability=availability_of(source),
                            averaged_losses=averaged_losses(problem, history), **algorithm_fields(alg))
        paths.append(path)

    result = check(algorithm, problem, source, theorem, seeds=seeds, rounds=T, local_steps=K,
                   constants=_constants(problem), hparams=hparams, on_run=write)
    return result, paths


ENGINE_CASES = [
    ("momentum.theorem_4_1", "fedgm", Uniform(N, N)),
    ("momentum.theorem_4_6", "fedavgm", Uniform(N, 3)),
    ("momentum.theorem_4_6", "fednag", Uniform(N, 3)),
    ("momentum.theorem_5_1", "fedgm-autonomous", Uniform(N, 3)),
    ("momentum.corollary_g1", "fedgm-autonomous", Cyclic(N, 2)),
    ("logit.inequality_23", "logit", Bernoulli(np.linspace(0.3, 0.9, N))),
    ("logit.theorem_1", "logit", Bernoulli(np.linspace(0.3, 0.9, N))),
    ("logit.theorem_2", "logit", Bernoulli(np.full(N, 0.6))),
    ("fedsum.corollary_g1", "fedsum", Uniform(N, 3)),
    ("fedsum.corollary_g1", "fedsum-cr", Bernoulli(np.full(N, 0.5))),
    ("fedsum.corollary_4_1", "fedsum", Uniform(N, 3)),
    ("fedsum.theorem_4_1", "fedsum-cr", FIXED),
    ("fedsum.theorem_c1", "fedsum-b", FIXED),
    ("fedsum.theorem_d1", "fedsum", FIXED),
    ("fedsum.theorem_e1", "fedsum-cr", FIXED),
    ("fedsum.lemma_c6", "fedsum-b", FIXED),
    ("fedsum.lemma_d6", "fedsum", FIXED),
    ("fedsum.lemma_e6", "fedsum-cr", FIXED),
]


@pytest.mark.parametrize("theorem, algorithm, source", ENGINE_CASES, ids=[f"{c[0]}-{c[1]}" for c in ENGINE_CASES])
def test_engine_runs_judged_from_their_records_as_by_check(problem, tmp_path, theorem, algorithm, source):
    direct, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, source)
    judged = check_run(paths, theorem)
    assert judged.values == pytest.approx(direct.values, rel=1e-12, abs=0)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-12)
    assert judged.verdict == direct.verdict and judged.steps_outside is None
    assert all(c.holds for c in judged.conditions) == all(c.holds for c in direct.conditions)


def test_check_record_files_are_judged_alone_by_check_run(tmp_path, capsys):
    """``fedverify check --record`` then ``fedverify check-run`` on the files: the same verdict line."""
    from verify.cli import main

    out, rec = tmp_path / "out", tmp_path / "rec"
    args = ["check", "--theorem", "momentum.theorem_4_6", "--algorithms", "fedavgm", "--patterns", "P1",
            "--seeds", "2", "--rounds", "30", "--clients", "6", "--record", str(rec), "--output", str(out)]
    assert main(args) == 0
    files = sorted(str(p) for p in rec.glob("*.jsonl"))
    assert len(files) == 2
    header = load_record(files[0]).header
    assert header["hparams"]["beta"] == pytest.approx(0.9) and header["availability"]["model"] == "uniform"
    capsys.readouterr()
    assert main(["check-run", *files, "--theorem", "momentum.theorem_4_6", "--json", str(tmp_path / "r.json")]) == 0
    judged = json.loads((tmp_path / "r.json").read_text())
    table = json.loads((out / "check.json").read_text())
    row = next(r for r in table["rows"] if r["algorithm"] == "fedavgm")
    assert judged["values"] == pytest.approx(row["result"]["values"], rel=1e-12)
    assert judged["verdict"] == row["verdict"]


# ------------------------------------------------------------------ plain numpy loops from the papers


def _grads(problem, x):
    import torch

    return problem.client_grads(torch.as_tensor(x)).numpy()


def _measure(problem, x):
    g = _grads(problem, x)
    mean = g.mean(axis=0)
    spread = ((g - mean) ** 2).sum(axis=1)
    return {"grad_norm2": float(mean @ mean), "heterogeneity": float(spread.mean()),
            "heterogeneity_max": float(spread.max())}


def _local_gd(problem, x, clients, eta, steps):
    X = np.repeat(x[None], len(clients), axis=0)
    paths = [X.copy()]
    for _ in range(steps):
        X = X - eta * np.stack([_grads(problem, X[j])[i] for j, i in enumerate(clients)])
        paths.append(X.copy())
    return X, paths


def _fedavgm_loop(problem, mask, eta_l, eta_g, beta, path, availability):
    """FedAvgM (Hsu et al. 2019; Server momentum Sec. 3): Δ_t = mean_{i∈S_t}(x_t − x^i_{t,K}),
    v ← βv + Δ_t, x ← x − η'v; K local gradient steps on the exact gradients."""
    x = np.zeros(problem.dim)
    v = np.zeros(problem.dim)
    with RunRecorder(path, N, algorithm="fedavgm", local_steps=K, step_sizes={"eta_l": eta_l, "eta_g": eta_g},
                     hparams={"beta": beta}, availability=availability, constants=_header_constants(problem)) as rec:
        for t in range(mask.shape[0]):
            clients = np.flatnonzero(mask[t])
            rec.record_round(t, clients, clients, **_measure(problem, x))
            if clients.size:
                X, _ = _local_gd(problem, x, clients, eta_l, K)
                v = beta * v + (x - X).mean(axis=0)
                x = x - eta_g * v
    return path


def test_a_plain_fedavgm_loop_is_judged_as_check_judges_the_engine(exact_problem, tmp_path):
    trace = Uniform(N, 3).sample(T, seed=4)
    alg = algorithms.get("fedavgm", eta_l=0.02, eta_g=0.1, beta=0.8, local_steps=K)
    direct = check(alg, exact_problem, trace, "momentum.theorem_4_6", seeds=[0], constants=_constants(exact_problem),
                   step_sizes="given")
    path = _fedavgm_loop(exact_problem, trace.mask, 0.02, 0.1, 0.8, tmp_path / "loop.jsonl", {"model": "uniform", "m": 3})
    judged = check_run(path, "momentum.theorem_4_6")
    assert judged.values == pytest.approx(direct.values, rel=1e-12)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-12)
    assert judged.verdict == direct.verdict


def _logit_last_loop(problem, mask, eta, path, p):
    """LOGIT eq. (8) with the "last" surrogate (MIFA's): x ← x − (1/N)(Σ_{n∈A_t} Δ_n + Σ_{n∉A_t} Δ̃_n),
    Δ_n = x_t − x^n_{t,K}, Δ̃_n the last update received from n (0 before any); the generation error
    of an unavailable n, e_{n,t} = (1/K) Σ_{i<K} ‖Δ̃_n/(ηK) − ∇F_n(x^n_{t,i})‖² along its exact path (eq. (23))."""
    x = np.zeros(problem.dim)
    cache = np.zeros((N, problem.dim))
    with RunRecorder(path, N, algorithm="logit", local_steps=K, step_sizes={"eta_l": eta, "eta_g": 1.0},
                     hparams={"surrogate": "last"}, availability={"model": "bernoulli", "p": list(p)},
                     constants=_header_constants(problem)) as rec:
        for t in range(mask.shape[0]):
            on, off = np.flatnonzero(mask[t]), np.flatnonzero(~mask[t])
            errors = np.full(N, np.nan)
            _, paths = _local_gd(problem, x, off, eta, K)
            for j, n in enumerate(off):
                g = cache[n] / (eta * K)
                errors[n] = np.mean([np.sum((g - _grads(problem, paths[i][j])[n]) ** 2) for i in range(K)])
            rec.record_round(t, on, on, generator_error=errors, **_measure(problem, x))
            X, _ = _local_gd(problem, x, on, eta, K)
            delta = x - X
            total = delta.sum(axis=0) + cache[off].sum(axis=0)
            cache[on] = delta
            x = x - total / N
    return path


def test_a_plain_logit_loop_is_judged_as_check_judges_the_engine(exact_problem, tmp_path):
    p = np.linspace(0.4, 0.9, N)
    pattern = Bernoulli(p)
    trace = Trace(pattern.sample_batch(T, 1, seed=0)[0])        # the trace check draws for seed 0
    eta = 0.05
    alg = algorithms.get("logit", eta_l=eta, eta_g=1.0, local_steps=K, surrogate="last")
    for theorem in ("logit.inequality_23", "logit.theorem_1"):
        direct = check(alg, exact_problem, pattern, theorem, seeds=[0], rounds=T, constants=_constants(exact_problem),
                       step_sizes="given")
        judged = check_run(_logit_last_loop(exact_problem, trace.mask, eta, tmp_path / f"{theorem}.jsonl", p), theorem)
        assert judged.values == pytest.approx(direct.values, rel=1e-12)
        assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-10)
        assert judged.verdict == direct.verdict
        assert judged.steps_outside and "prescribes η" in judged.steps_outside     # η = 0.05 is not Thm 1's


# ------------------------------------------------------------------ refusals, one per theorem


def _without(path, tmp_path, *, header=(), rounds=(), constants=()):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for key in header:
        lines[0].pop(key, None)
    for key in constants:
        lines[0].get("constants", {}).pop(key, None)
    for line in lines[1:]:
        for key in rounds:
            line.pop(key, None)
    out = tmp_path / f"without_{'_'.join(header + rounds + constants)}.jsonl"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


REFUSALS = [
    ("momentum.theorem_4_1", "fedgm", Uniform(N, N), dict(rounds=("heterogeneity",)), "heterogeneity"),
    ("momentum.theorem_4_6", "fedavgm", Uniform(N, 3), dict(header=("hparams",)), "hparams.beta"),
    ("momentum.theorem_5_1", "fedgm-autonomous", Uniform(N, 3), dict(rounds=("local_steps",)), "local_steps"),
    ("momentum.corollary_g1", "fedgm-autonomous", Cyclic(N, 2), dict(rounds=("delays",)), "delays"),
    ("logit.inequality_23", "logit", Bernoulli(np.full(N, 0.6)), dict(rounds=("generator_error",)), "generator_error"),
    ("logit.theorem_1", "logit", Bernoulli(np.full(N, 0.6)), dict(header=("availability",)), "availability"),
    ("logit.theorem_2", "logit", Bernoulli(np.full(N, 0.6)), dict(constants=("L",)), "gives no L"),
    ("fedsum.corollary_g1", "fedsum", Uniform(N, 3), dict(header=("availability",)), "availability"),
    ("fedsum.theorem_4_1", "fedsum", Uniform(N, 3), dict(rounds=("grad_norm2",)), "grad_norm2"),
    ("fedsum.corollary_4_1", "fedsum", Uniform(N, 3), dict(constants=("F0",)), "F0"),
    ("fedsum.theorem_c1", "fedsum-b", FIXED, dict(header=("local_steps",)), "local_steps"),
    ("fedsum.theorem_d1", "fedsum", FIXED, dict(constants=("delta_f",)), "delta_f"),
    ("fedsum.theorem_e1", "fedsum-cr", FIXED, dict(rounds=("grad_norm2",)), "grad_norm2"),
    ("fedsum.lemma_c6", "fedsum-b", FIXED, dict(header=("step_sizes",)), "step"),
    ("fedsum.lemma_d6", "fedsum", FIXED, dict(header=("step_sizes",)), "step"),
    ("fedsum.lemma_e6", "fedsum-cr", FIXED, dict(constants=("sigma2",)), "sigma2"),
]

def test_every_theorem_has_a_record_case_and_a_refusal():
    from verify.theorems import names

    cafed = ("cafed.theorem_1", "cafed.theorem_1_bias", "cafed.theorem_3", "cafed.theorem_2")   # below
    accepted = {c[0] for c in ENGINE_CASES} | set(cafed)
    refused = {c[0] for c in REFUSALS} | {c[0] for c in CAFED_REFUSALS}
    assert set(names()) <= accepted and set(names()) <= refused


@pytest.mark.parametrize("theorem, algorithm, source, drop, field", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_a_record_without_a_field_the_theorem_reads_is_refused_naming_it(problem, tmp_path, theorem, algorithm,
                                                                        source, drop, field):
    _, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, source, seeds=1)
    check_run(paths, theorem)                         # the full record is accepted
    with pytest.raises(ValueError, match=field) as err:
        check_run(_without(paths[0], tmp_path, **drop), theorem)
    assert "\n" not in str(err.value)


def test_a_momentum_record_outside_the_admissible_step_sizes_is_marked(exact_problem, tmp_path):
    trace = Uniform(N, 3).sample(T, seed=4)
    path = _fedavgm_loop(exact_problem, trace.mask, 0.5, 1.0, 0.8, tmp_path / "big.jsonl", {"model": "uniform", "m": 3})
    judged = check_run(path, "momentum.theorem_4_6")
    assert judged.steps_outside and "breaks" in judged.steps_outside
    assert "†" in str(judged)


def test_records_from_an_engine_run_with_the_wrong_participation_are_refused(problem, tmp_path):
    _, paths = _checked_and_recorded(problem, tmp_path, "momentum.theorem_4_6", "fedavgm", Uniform(N, 3), seeds=1)
    with pytest.raises(ValueError, match="full participation"):
        check_run(paths, "momentum.theorem_4_1")


# ------------------------------------------------------------------ a false bound is violated


def _scaled_plan(plan, factor):
    def scaled_plan(setup):
        p = plan(setup)
        inner = p.bound

        def bound(histories):
            b = inner(histories)
            return dataclasses.replace(b, value=b.value * factor)
        p.bound = bound
        return p
    return scaled_plan


def test_a_record_read_back_keeps_its_per_client_fields(tmp_path):
    path = tmp_path / "v.jsonl"
    with RunRecorder(path, 3, algorithm="fedgm-autonomous", local_steps=2) as rec:
        rec.record_round(0, [0, 2], [0, 2], local_steps=[2, None, 4], delays=np.array([0.0, np.nan, 1.0]))
    r = load_record(path)
    assert r.header["version"] == 2
    np.testing.assert_array_equal(r.vectors["local_steps"], [[2, np.nan, 4]])
    np.testing.assert_array_equal(r.vectors["delays"], [[0, np.nan, 1]])
    with pytest.raises(ValueError, match="one per client"):
        with RunRecorder(tmp_path / "w.jsonl", 3) as rec:
            rec.record_round(0, [0], [0], local_steps=[1, 2])


def test_a_version_1_record_still_loads_and_is_judged(problem, tmp_path):
    _, paths = _checked_and_recorded(problem, tmp_path, "fedsum.theorem_4_1", "fedsum", Trace(Uniform(N, 3).sample(T, 1).mask),
                                     seeds=1)
    lines = [json.loads(x) for x in paths[0].read_text().splitlines()]
    lines[0]["version"] = 1
    for key in ("hparams", "schedule", "availability"):
        lines[0].pop(key, None)
    old = tmp_path / "v1.jsonl"
    old.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert check_run(old, "fedsum.theorem_4_1").values == check_run(paths[0], "fedsum.theorem_4_1").values


def test_an_availability_model_estimated_from_the_recorded_participation_says_so(problem, tmp_path):
    p = np.full(N, 0.6)
    _, paths = _checked_and_recorded(problem, tmp_path, "logit.theorem_2", "logit", Bernoulli(p))
    estimated = []
    for path in paths:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines[0]["availability"] = {"model": "estimate"}
        out = path.with_name("estimated_" + path.name)
        out.write_text("".join(json.dumps(x) + "\n" for x in lines))
        estimated.append(out)
    given, fitted = check_run(paths, "logit.theorem_2"), check_run(estimated, "logit.theorem_2")
    assert fitted.values == given.values
    assert any("estimated from the recorded S_t" in n for n in fitted.notes)
    masks = np.concatenate([load_record(x).mask for x in paths])
    assert fitted.extras["p_bar"] == pytest.approx(masks.mean(), rel=1e-12)      # p̂_n = each client's rate
    assert given.extras["p_bar"] == pytest.approx(0.6)
    (tmp_path / "m").mkdir()
    _, momentum = _checked_and_recorded(problem, tmp_path / "m", "momentum.theorem_4_6", "fedavgm", Uniform(N, 3), seeds=1)
    lines = [json.loads(x) for x in momentum[0].read_text().splitlines()]
    lines[0]["availability"] = {"model": "estimate"}
    momentum[0].write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ValueError, match="availability 'estimate'.*footnote 4"):
        check_run(momentum[0], "momentum.theorem_4_6")


# ------------------------------------------------------------------ CA-Fed


def _cafed_recorded(problem, tmp_path, theorem, algorithm="cafed-unbiased", seeds=3, pattern=None):
    """``check`` on a Markov pattern with every run recorded, then the measured constants stated in
    the records' headers (what ``check --record`` does for a CA-Fed row)."""
    from verify.check_tables import state_measured_constants
    from verify.theorems import get

    pattern = pattern or Markov(np.linspace(0.4, 0.9, N), np.full(N, 0.3))
    result, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, pattern, seeds=seeds)
    state_measured_constants(paths, get(theorem), result, problem)
    return result, paths


@pytest.mark.parametrize("theorem, algorithm", [("cafed.theorem_2", "cafed-unbiased"), ("cafed.theorem_2", "cafed"),
                                                ("cafed.theorem_1", "cafed-unbiased")])
def test_cafed_engine_runs_judged_from_their_records_as_by_check(problem, tmp_path, theorem, algorithm):
    direct, paths = _cafed_recorded(problem, tmp_path, theorem, algorithm)
    judged = check_run(paths, theorem)
    assert judged.values == pytest.approx(direct.values, rel=1e-12, abs=1e-14)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-12)
    assert judged.verdict == direct.verdict and judged.covered == direct.covered and judged.steps_outside is None
    assert [c.holds for c in judged.conditions] == [c.holds for c in direct.conditions]


@pytest.mark.parametrize("theorem", ["cafed.theorem_1_bias", "cafed.theorem_3"])
def test_cafed_bias_bounds_judged_on_the_records_of_a_run(problem, tmp_path, theorem):
    """ε_bias of eqs. (11) and (15) depends on q alone: check computes it without a run; the
    records of a run with the same q give the same left side and bound."""
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_1")        # q = α, the bias theorems' default
    direct = check("cafed-unbiased", problem, Markov(np.linspace(0.4, 0.9, N), np.full(N, 0.3)), theorem, seeds=1,
                   rounds=T, local_steps=K, constants=_constants(problem))
    judged = check_run(paths, theorem)
    assert judged.values == pytest.approx(list(direct.values) * len(judged.values), rel=1e-12)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-12)
    assert judged.verdict == direct.verdict == "holds"


CAFED_REFUSALS = [
    ("cafed.theorem_2", dict(rounds=("avg_client_losses",)), "avg_client_losses"),
    ("cafed.theorem_2", dict(rounds=("weights",)), "weights"),
    ("cafed.theorem_2", dict(header=("availability",)), "Markov"),
    ("cafed.theorem_2", dict(constants=("F_B_star",)), "F_B_star"),
    ("cafed.theorem_2", dict(constants=("diam",)), "diam"),
    ("cafed.theorem_2", dict(constants=("Gamma_prime",)), "Gamma_prime"),
    ("cafed.theorem_1", dict(constants=("mu",)), "mu"),
    ("cafed.theorem_1", dict(constants=("eps_bias",)), "eps_bias"),
    ("cafed.theorem_1", dict(constants=("F_star",)), "F_star"),
    ("cafed.theorem_1_bias", dict(constants=("Gamma",)), "Gamma"),
    ("cafed.theorem_3", dict(constants=("Gamma_prime",)), "Gamma_prime"),
    ("cafed.theorem_3", dict(header=("hparams",)), "decay"),
]


@pytest.mark.parametrize("theorem, drop, field", CAFED_REFUSALS, ids=[f"{c[0]}-{c[2]}" for c in CAFED_REFUSALS])
def test_a_cafed_record_without_a_field_is_refused_naming_it(problem, tmp_path, theorem, drop, field):
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_1", seeds=1)
    check_run(paths, theorem)
    with pytest.raises(ValueError, match=field) as err:
        check_run(_without(paths[0], tmp_path, **drop), theorem)
    assert "\n" not in str(err.value)


def test_a_plain_cafed_loop_is_judged_as_check_judges_the_engine(tmp_path):
    """CA-Fed's FedAvg with fixed weights q = α/π (§V-A) and the steps (12), η_t = η_1 t^(−a) for
    t = 1, 2, ..., written as a numpy loop: x ← x + η̄ Σ_{k∈A_t} q_k (x^k_{t,E} − x_t); the averaged
    iterate w̄_T = Σ_t η_t x_t / Σ_t η_t (§III-B). On quadratics F_k* = 0 at b_k and F* solves
    (Σ α_k A_k) w = Σ α_k A_k b_k, so the constants are computed here in closed form."""
    import torch

    from bounds import cafed as bc

    problem = Quadratic.random(N, 3, seed=8, noise_std=0.0)
    pi, lam = np.linspace(0.4, 0.9, N), np.full(N, 0.3)
    pattern = Markov(pi, lam)
    trace = pattern.sample_batch(T, 1, seed=0)[0]                  # the trace check draws for seed 0
    alpha = np.full(N, 1 / N)
    q = alpha / pi
    eta_1, decay = 0.05, 1.0
    alg = algorithms.get("cafed-unbiased", eta_l=eta_1, eta_g=1.0, local_steps=K, oracle=(tuple(pi), tuple(lam)))
    direct = check(alg, problem, pattern, "cafed.theorem_2", seeds=[0], rounds=T, constants=_constants(problem),
                   step_sizes="given", hparams={"decay": decay})
    A, b = problem.A.cpu().numpy(), problem.b.cpu().numpy()

    def losses(x):
        return np.array([0.5 * (x - b[k]) @ A[k] @ (x - b[k]) for k in range(N)])

    p = bc.biased_importance(pi, q)
    w_b = np.linalg.solve(np.einsum("k,kij->ij", p, A), np.einsum("k,kij,kj->i", p, A, b))
    F_B_star = float(p @ losses(w_b))
    assert F_B_star == pytest.approx(direct.extras["F_B*"], rel=1e-9)
    x, weighted, total = np.zeros(3), np.zeros(3), 0.0
    path = tmp_path / "cafed.jsonl"
    with RunRecorder(path, N, algorithm="cafed-unbiased", local_steps=K, step_sizes={"eta_l": eta_1, "eta_g": 1.0},
                     hparams={"decay": decay}, availability={"model": "markov", "pi": list(pi), "lam": list(lam)},
                     constants={**_header_constants(problem), "F_B_star": F_B_star, "Gamma": direct.extras["Gamma"],
                                "Gamma_prime": direct.extras["Gamma'"], "diam": direct.extras["diam(W)"]}) as rec:
        for t in range(T):
            eta = eta_1 * (t + 1.0) ** (-decay)
            weighted, total = weighted + eta * x, total + eta
            on = np.flatnonzero(trace[t])
            fields = {"weights": np.where(trace[t].any(), q, np.nan)} if on.size else {}
            if t == T - 1:
                fields["avg_client_losses"] = losses((weighted + 0.0) / total)
            rec.record_round(t, on, on, grad_norm2=float(np.sum(problem.full_grad(torch.as_tensor(x)).numpy() ** 2)),
                             **fields)
            if on.size:
                X, _ = _local_gd(problem, x, on, eta, K)
                x = x + (q[on, None] * (X - x)).sum(axis=0)
    judged = check_run(path, "cafed.theorem_2")
    # F_B* here is the closed form, check's is L-BFGS's (gradient tolerance 1e-12)
    assert judged.values == pytest.approx(direct.values, rel=1e-12, abs=1e-11)
    assert judged.verdict == direct.verdict


def test_a_cafed_record_at_other_step_sizes_is_marked(problem, tmp_path):
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_2", seeds=1)
    lines = [json.loads(x) for x in paths[0].read_text().splitlines()]
    lines[0]["step_sizes"]["eta_l"] *= 2
    paths[0].write_text("".join(json.dumps(x) + "\n" for x in lines))
    judged = check_run(paths[0], "cafed.theorem_2")
    assert judged.steps_outside and "(12)" in judged.steps_outside and "†" in str(judged)


@pytest.mark.parametrize("theorem, algorithm", [("momentum.theorem_4_6", "fedavgm"), ("logit.theorem_2", "logit"),
                                                ("cafed.theorem_2", "cafed-unbiased")])
def test_a_scaled_down_bound_is_violated_on_records_where_the_theorem_holds(problem, tmp_path, theorem, algorithm):
    """The theorem's plan with its bound scaled to half the measured lower limit: the same records
    that hold against the true bound are violated against the false one."""
    from verify.theorems import get

    true = get(theorem)
    if true.paper == "cafed":
        _, paths = _cafed_recorded(problem, tmp_path, theorem, algorithm)
    else:
        source = Uniform(N, 3) if true.paper == "momentum" else Bernoulli(np.full(N, 0.6))
        _, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, source)
    judged = check_run(paths, true)
    assert judged.verdict == "holds"
    false = dataclasses.replace(true, name=f"{true.paper}.scaled",
                                plan=_scaled_plan(true.plan, 0.5 * judged.lower / float(judged.bound.value)))
    assert check_run(paths, false).verdict == "violated"


def test_a_markov_chain_with_a_negative_eigenvalue_is_a_valid_availability_model(tmp_path):
    """λ = 1 − a − b of a two-state chain lies in (−1, 1): a chain that tends to alternate has λ < 0."""
    path = tmp_path / "neg.jsonl"
    model = availability_of(Markov(np.full(3, 0.5), np.array([-0.4, 0.0, 0.3])))
    with RunRecorder(path, 3, availability=model) as rec:
        rec.record_round(0, [0], [0])
    assert load_record(path).header["availability"]["lam"] == pytest.approx([-0.4, 0.0, 0.3])
    with pytest.raises(ValueError, match="lam must lie in"):
        RunRecorder(tmp_path / "bad.jsonl", 3, availability={"model": "markov", "pi": [0.5] * 3, "lam": [-1.0, 0, 0]})


@pytest.mark.parametrize("theorem, algorithm, source, model", [
    ("momentum.theorem_4_6", "fedavgm", Uniform(N, 3), {"model": "any", "m": 3}),
    ("momentum.theorem_5_1", "fedgm-autonomous", Uniform(N, 3), {"model": "cyclic", "m": 3}),
    ("logit.theorem_2", "logit", Bernoulli(np.full(N, 0.6)), {"model": "uniform", "m": 3}),
])
def test_a_record_under_another_participation_model_is_refused(problem, tmp_path, theorem, algorithm, source, model):
    _, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, source, seeds=1)
    lines = [json.loads(x) for x in paths[0].read_text().splitlines()]
    lines[0]["availability"] = model
    paths[0].write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ValueError, match=f"availability '{model['model']}'.*proved under") as err:
        check_run(paths[0], theorem)
    assert "\n" not in str(err.value)


def test_any_arrival_rule_is_judged_against_the_corollary_for_it(problem, tmp_path):
    """Server momentum Cor G.1 (Cor 5.4) holds for any arrival rule with m arrivals a round: a
    record that says so is judged, with m read from its rounds."""
    direct, paths = _checked_and_recorded(problem, tmp_path, "momentum.corollary_g1", "fedgm-autonomous", Cyclic(N, 2))
    for path in paths:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines[0]["availability"] = {"model": "any", "m": 2}
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    judged = check_run(paths, "momentum.corollary_g1")
    assert judged.values == pytest.approx(direct.values, rel=1e-12)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-12)


@pytest.mark.parametrize("theorem, algorithm, source, constants, words", [
    ("momentum.theorem_4_6", "fedavgm", Uniform(N, 3), {"sigma_g2": 1e-3}, "constants.sigma_g2 = 0.001 is below the "
                                                                          "heterogeneity"),
    ("logit.theorem_2", "logit", Bernoulli(np.full(N, 0.6)), {"zeta2": 1e-3}, "constants.zeta2 = 0.001 is below the "
                                                                              "heterogeneity"),
    ("logit.theorem_2", "logit", Bernoulli(np.full(N, 0.6)), {"eps_star": 0.0, "C1": 0.0},
     "exceeds ε\\* \\+ C₁√\\(τ/t\\) = 0 at the given ε\\*, C₁ = 0: they do not satisfy LOGIT Assumption 5"),
    ("momentum.theorem_4_6", "fedavgm", Uniform(N, 3), {"delta_f": 0.0}, "exceeds 2·L·Δ_f = 0.0"),
])
def test_constants_the_records_contradict_are_refused_not_judged(problem, tmp_path, theorem, algorithm, source,
                                                                 constants, words):
    """Constants below what the records show (σ_g² under a recorded heterogeneity, LOGIT's ε*, C₁
    under a recorded generator error, Δ_f = 0 with ‖∇f(x_0)‖² > 0) made a smaller bound than the
    runs' own: verdicts on them tested nothing, silently."""
    _, paths = _checked_and_recorded(problem, tmp_path, theorem, algorithm, source, seeds=2)
    check_run(paths, theorem)
    with pytest.raises(ValueError, match=words) as err:
        check_run(paths, theorem, constants=constants)
    assert "\n" not in str(err.value)
