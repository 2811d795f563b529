"""Every verdict can fail: for each theorem ``fedverify bound --list`` prints, on a run where the
true theorem holds,

* a deliberately false right-hand side (the theorem's own bound scaled below the measured value)
  is reported "violated";
* a measured side pushed above the true bound (the run's measure inflated) is reported "violated";
* the delay bounds are judged the same way from run records through ``check_run``.

The false versions are built by wrapping the theorem's plan, so they go through exactly the code
the true theorem does (its step sizes, runs, measured inputs and the one judge). The
term-dropped and wrong-constant mutations of each paper sit beside their checks
(test_cafed_checks.py, test_logit_checks.py)."""
import dataclasses
import inspect

import numpy as np
import pytest

from algorithms.problems import Quadratic
from participation import Trace
from participation.patterns import Bernoulli, Markov, Uniform
from verify import check, check_run, theorems
from verify.theorems.index import load_index
from verify.records import availability_of, record_from_history
from verify.theorems.runner import make_plan

N, DIM, T = 6, 3, 30
PI = np.array([0.5, 0.6, 0.7, 0.8, 0.5, 0.9])
LAM = np.array([0.3, 0.0, 0.5, -0.1, 0.2, 0.4])


@pytest.fixture(scope="module")
def quad():
    return Quadratic.random(N, DIM, noise_std=0.1, seed=0, diagonal=True, curvature=(0.2, 1.0))


def setting(name: str):
    """(algorithm, participation, keywords of check) for a run of ``name`` in its setting."""
    uniform = Uniform(N, 2)
    trace = Trace(uniform.sample(T, seed=3).mask)
    fedsum = {"lemma_c6": "fedsum-b", "theorem_c1": "fedsum-b", "lemma_d6": "fedsum", "theorem_d1": "fedsum",
              "lemma_e6": "fedsum-cr", "theorem_e1": "fedsum-cr", "theorem_4_1": "fedsum"}
    paper, which = name.split(".")
    if paper == "fedsum" and which in fedsum:
        steps = "admissible" if fedsum[which] == "fedsum-cr" else "theorem"
        return fedsum[which], trace, dict(local_steps=2, step_sizes=steps)
    if paper == "fedsum":                         # the corollaries: over the participation (Case 2, exact E[τ])
        return "fedsum", Bernoulli(0.5, N), dict(local_steps=2)
    if name == "momentum.theorem_4_1":
        return "fedgm", Trace(np.ones((T, N), dtype=bool)), dict(local_steps=2)
    if name == "momentum.theorem_4_6":
        return "fedgm", uniform, dict(local_steps=2)
    if paper == "momentum":
        return "fedgm-autonomous", uniform, dict(local_steps=1, hparams={"max_delay": 3, "max_epochs": 2})
    if paper == "cafed":
        return "cafed-unbiased", Markov(PI, LAM), dict(local_steps=1)
    if paper == "logit":
        return "logit", Bernoulli(0.5, N), dict(local_steps=2)
    raise AssertionError(f"no setting for {name}")


def mutated(theorem, *, bound_scale=None, bound_shift=None, measure_shift=None):
    """``theorem`` with its plan's bound multiplied by ``bound_scale`` or moved by ``bound_shift``,
    or its measured side (each run's value, or the values without runs) raised by ``measure_shift``."""
    def plan(setup):
        p = make_plan(theorem, setup)
        changes = {}
        if bound_scale is not None or bound_shift is not None:
            def moved(v):
                return v * bound_scale if bound_scale is not None else v + bound_shift

            def bound(histories, original=p.bound):
                b = original(histories)
                return dataclasses.replace(b, value=moved(b.value))
            changes["bound"] = bound
            changes["bound_range"] = None if p.bound_range is None else (
                lambda histories, original=p.bound_range: tuple(moved(v) for v in original(histories)))
        if measure_shift is not None:
            changes["measure"] = lambda h, problem, original=p.measure: original(h, problem) + measure_shift
            if p.values is not None:
                changes["values"] = lambda original=p.values: [v + measure_shift for v in original()]
        return dataclasses.replace(p, **changes)

    return dataclasses.replace(theorem, name=theorem.name + " (false)", plan=plan)


NAMES = sorted(load_index())


def test_every_theorem_is_here():
    assert set(NAMES) == set(theorems.THEOREMS)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("logit.") else n for n in NAMES])
def test_a_false_bound_is_violated_and_a_measured_side_above_the_bound_is_too(quad, name):
    theorem = theorems.get(name)
    algorithm, participation, kw = setting(name)
    true = check(algorithm, quad, participation, theorem, seeds=3, rounds=T, **kw)
    assert true.verdict == "holds" and true.covered is not False, (name, str(true))
    assert true.conditions_hold or name == "cafed.theorem_2", (name, true.violated_conditions)
    # a right-hand side below the measured value: scaled down to half its lower limit, or, for a
    # left side that can be negative (CA-Fed eq. (10) as a difference), moved below that limit
    if true.lower > 0 and true.bound_value > 0:
        lie = mutated(theorem, bound_scale=0.5 * true.lower / true.bound_value)
    else:
        lie = mutated(theorem, bound_shift=true.lower - abs(true.lower) - 1.0 - true.bound_value)
    false = check(algorithm, quad, participation, lie, seeds=3, rounds=T, **kw)
    assert false.verdict == "violated", (name, str(false))
    assert false.measured == pytest.approx(true.measured, rel=1e-12)
    # the same runs with the measured side above the true bound
    spread = true.upper - true.lower if np.isfinite(true.upper - true.lower) else 0.0
    shift = 2 * abs(true.bound_value) + abs(true.measured) + 2 * spread + 1.0
    above = check(algorithm, quad, participation, mutated(theorem, measure_shift=shift), seeds=3, rounds=T, **kw)
    assert above.verdict == "violated", (name, str(above))
    assert above.bound_value == pytest.approx(true.bound_value, rel=1e-12)


DELAY = [n for n in NAMES if theorems.get(n).delay_bound]


@pytest.mark.slow
@pytest.mark.parametrize("name", DELAY)
def test_records_above_a_delay_bound_are_violated(quad, name, tmp_path):
    """The same run written as records: under the bound "holds"; with ‖∇f(x_t)‖² raised above it, "violated"."""
    import algorithms

    theorem = theorems.get(name)
    algorithm, participation, kw = setting(name)
    true = check(algorithm, quad, participation, theorem, seeds=3, rounds=T, **kw)
    consts = quad.constants()
    header = {"L": consts.L, "sigma2": consts.sigma2, "delta_f": consts.delta_f, "F0": consts.F0}
    paths, raised = [], []
    traces = ([participation] * 3 if isinstance(participation, Trace)
              else [Trace(m) for m in participation.sample_batch(T, 3, seed=0)])
    for seed, trace in enumerate(traces):
        steps = {k: true.step_sizes[k] for k in ("eta_g", "eta_l")}
        alg = algorithms.get(algorithm, local_steps=kw["local_steps"], **steps)
        h = algorithms.run(alg, quad, trace, seed=seed)
        model = availability_of(participation)
        paths.append(record_from_history(tmp_path / f"s{seed}.jsonl", h, trace, algorithm=algorithm,
                                         local_steps=kw["local_steps"], step_sizes=steps, seed=seed, constants=header,
                                         availability=model))
        # raised from round 1 on: round 0 stays within what the header's F_0 and 2LΔ_f allow
        up = dataclasses.replace(h, grad_norm2=h.grad_norm2 + np.r_[0.0, np.full(h.grad_norm2.size - 1,
                                                                                   3 * true.bound_value + 1.0)])
        raised.append(record_from_history(tmp_path / f"up{seed}.jsonl", up, trace, algorithm=algorithm,
                                          local_steps=kw["local_steps"], step_sizes=steps, seed=seed, constants=header,
                                          availability=model))
    if "pattern" in inspect.signature(theorem.bound).parameters:      # the case is read from the header's model
        bare = record_from_history(tmp_path / "bare.jsonl", h, trace, algorithm=algorithm,
                                   local_steps=kw["local_steps"], step_sizes=steps, seed=0, constants=header)
        with pytest.raises(ValueError, match="availability"):
            check_run(bare, name)
    judged = check_run(paths, name)
    assert judged.verdict in ("holds", "inconclusive") and judged.measured < judged.bound_value, str(judged)
    assert check_run(raised, name).verdict == "violated"
