"""One home per theorem: a theorem is its formula (in ``bounds``) and one declaration
(``verify.theorems``); every command and registry reads the declaration. A new theorem added
here in two places is listed, evaluated by ``fedverify bound``, run by ``fedverify check`` with
its own default patterns and algorithms, judged by the one judge, and can be violated."""
import dataclasses

import numpy as np
import pytest
import sympy as sp

from bounds.core import Formula, Source, at_most, make_bound
from verify import check, theorems
from verify.choices import CHECK_ALGORITHMS
from verify.theorems.index import build_index, load_index
from verify.cli import main
from verify.theorems import Theorem
from verify.theorems.measures import average_grad_norm2

# ---- place 1: the formula (as it would sit in a bounds module)
L, DF, S2, F0, K, T, TAU, ETA = sp.symbols(r"L \Delta_f \sigma^2 F_0 K T \tau_{\max} \eta_l", positive=True)
FORMULA = Formula({"optimisation": 4 * DF / (ETA * K * T), "noise": 2 * L * ETA * S2,
                   "drift": 8 * L**2 * ETA**2 * K**2 * (TAU + 1) * F0}, (L, DF, S2, F0, K, T, TAU, ETA))


def demo_theorem(constants, tau_max):
    """Demo Thm 1: FedAvg at η_g = 1, η_l = 1/(8KL(τ_max + 1)), if 8(τ_max + 1) ≤ T."""
    c = constants
    eta_l = 1 / (8 * c.local_steps * c.L * (tau_max + 1))
    values = {L: c.L, DF: c.delta_f, S2: c.sigma2, F0: c.F0, K: c.local_steps, T: c.rounds, TAU: tau_max, ETA: eta_l}
    return make_bound(FORMULA, values, Source("Demo", "Thm 1"),
                      conditions=(at_most("8(τ_max + 1) ≤ T", 8 * (tau_max + 1), c.rounds),),
                      step_sizes={"eta_g": 1.0, "eta_l": eta_l})


# ---- place 2: the declaration
DEMO = Theorem(name="demo.theorem_1", bound=demo_theorem, lhs="(1/T) Σ_{t<T} ‖∇f(x_t)‖²",
               lhs_latex=r"\frac{1}{T}\sum_t\|\nabla f(x_t)\|^2", expectation="noise", covers=("fedavg",),
               steps="η_g = 1, η_l = 1/(8KL(τ_max + 1))", plan=None, delay_bound=True, measure=average_grad_norm2,
               example="--L 1 --sigma2 1 --delta-f 20 --F0 13 --N 20 --K 5 --T 400 --tau-max 30",
               patterns=("P1", "P2"), algorithms=("fedavg",))


@pytest.fixture
def registered():
    theorems.register(DEMO)
    yield DEMO
    theorems.THEOREMS.pop(DEMO.name)


def test_the_papers_theorems_are_declared_once_with_everything_the_commands_read():
    for name, t in theorems.THEOREMS.items():
        assert load_index()[name] == t.summary
        assert t.example and t.patterns and t.algorithms, name
        assert t.checkable
        if not t.delay_bound:
            assert t.space is not None and t.seed_cases is not None, f"{name} has no conformance search space"
    assert theorems.get("fedsum.theorem_4_1").algorithms == CHECK_ALGORITHMS


@pytest.mark.slow
def test_a_new_theorem_touches_its_formula_and_its_declaration(registered, tmp_path, capsys):
    assert registered.summary == "Demo Thm 1: FedAvg at η_g = 1, η_l = 1/(8KL(τ_max + 1)), if 8(τ_max + 1) ≤ T."
    # fedverify bound evaluates it from the declared example; --inputs prints the example
    assert main(["bound", "demo.theorem_1", *DEMO.example.split()]) == 0
    out = capsys.readouterr().out
    assert "value: " in out
    assert main(["bound", "demo.theorem_1", "--inputs"]) == 0
    assert DEMO.example in capsys.readouterr().out
    # fedverify check runs its declared algorithms under its declared patterns, with its prescribed step sizes
    assert main(["check", "--theorem", "demo.theorem_1", "-N", "6", "-T", "600", "-K", "2", "--seeds", "2",
                 "--no-progress", "-o", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    rows = [line.split() for line in table.splitlines() if line.startswith("fedavg ")]
    assert [r[1] for r in rows] == ["P1", "P2"] and all(r[-1] == "holds" for r in rows)


def test_the_new_theorem_goes_through_the_delay_plan_and_can_fail(registered):
    from algorithms.problems import Quadratic
    from participation import preset

    problem = Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.3, seed=0)
    trace = preset("P1", n_clients=6, per_round=2).sample(40, seed=0)
    true = check("fedavg", problem, trace, "demo.theorem_1", seeds=3, local_steps=2)
    assert true.verdict == "holds" and true.step_sizes["eta_l"] == pytest.approx(
        1 / (8 * 2 * problem.constants().L * (true.tau_max + 1)), rel=1e-12)

    def false_bound(constants, tau_max):     # the optimisation term dropped and the rest scaled down
        b = demo_theorem(constants, tau_max)
        return dataclasses.replace(b, value=1e-3 * (b.value - b.terms["optimisation"]))

    false = dataclasses.replace(DEMO, name="demo.false", bound=false_bound)
    lie = check("fedavg", problem, trace, false, seeds=3, local_steps=2)
    assert lie.verdict == "violated" and lie.measured == pytest.approx(true.measured, rel=1e-12)
    assert np.isfinite(lie.lower) and lie.lower > lie.bound_value


# ---- a theorem with a plan of its own: a Server momentum statement is its formula and its declaration
def loose_4_6(constants, schedule, m):
    """Demo: twice Server momentum Thm 4.6's bound, in the same setting."""
    from bounds import momentum as bm

    b = bm.theorem_4_6(constants, schedule, m)
    return dataclasses.replace(b, value=2 * b.value)


def tight_4_6(constants, schedule, m):
    """Demo: a thousandth of Server momentum Thm 4.6's bound (false)."""
    b = loose_4_6(constants, schedule, m)
    return dataclasses.replace(b, value=5e-4 * b.value)


def _momentum_demo(name, formula):
    from verify.theorems import momentum

    return momentum.declare(name, momentum.Statement("uniform", False, formula), momentum.FAMILY,
                            "m clients uniformly without replacement each round", example="--L 1", patterns=("P1",))


@pytest.fixture
def momentum_demos():
    demos = [theorems.register(_momentum_demo("demo.loose_4_6", loose_4_6)),
             theorems.register(_momentum_demo("demo.tight_4_6", tight_4_6))]
    yield demos
    for t in demos:
        theorems.THEOREMS.pop(t.name)


@pytest.mark.slow
def test_a_new_plan_theorem_reaches_check_records_search_and_the_list(momentum_demos, tmp_path, capsys):
    from algorithms.problems import Quadratic
    from participation.patterns import Uniform
    from verify import check_run
    from verify.check_tables import averaged_losses
    from verify.records import algorithm_fields, availability_of, record_from_history
    from verify.search_spaces import seed_cases

    problem = Quadratic.random(6, 3, seed=3, noise_std=0.1)
    pattern, paths = Uniform(6, 2), []

    def write(history, trace, alg, seed):
        c = problem.constants()
        path = tmp_path / f"run_{len(paths)}.jsonl"
        steps = {k: v for k, v in alg.hparams.items() if k.startswith("eta") and isinstance(v, (int, float))}
        record_from_history(path, history, trace, algorithm=alg.name, local_steps=alg.local_steps, step_sizes=steps,
                            seed=int(seed), constants={"L": c.L, "sigma2": c.sigma2, "delta_f": c.delta_f, "F0": c.F0},
                            availability=availability_of(pattern), averaged_losses=averaged_losses(problem, history),
                            **algorithm_fields(alg))
        paths.append(path)

    loose, tight = momentum_demos
    ran = check("fedavgm", problem, pattern, loose.name, seeds=3, rounds=30, local_steps=2, on_run=write)
    assert ran.verdict == "holds"
    # the records go through the declaration's plan: the same left side and bound as the runs
    judged = check_run(paths, loose.name)
    assert judged.verdict == "holds"
    assert judged.measured == pytest.approx(ran.measured, rel=1e-9)
    assert judged.bound_value == pytest.approx(ran.bound_value, rel=1e-9)
    # and the false statement, declared the same way, is violated on the same records
    lie = check_run(paths, tight.name)
    assert lie.verdict == "violated" and lie.lower > lie.bound_value
    # a record field the statement reads (σ_g²'s heterogeneity, from its declaration) is required by name
    stripped = tmp_path / "stripped.jsonl"
    lines = paths[0].read_text(encoding="utf-8").splitlines()
    import json

    rows = [json.loads(line) for line in lines]
    for row in rows[1:]:
        row.pop("heterogeneity", None)
    stripped.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has no heterogeneity"):
        check_run(stripped, loose.name)
    # the conformance search starts from the seed cases the statement's participation gives
    seeds = seed_cases(loose, 20)
    assert seeds and all(isinstance(source, Uniform) for _, source, _, _ in seeds)
    # fedverify bound --list names it in the process that registered it
    assert main(["bound", "--list"]) == 0
    assert "demo.loose_4_6" in capsys.readouterr().out


def test_a_statement_without_a_search_space_is_refused_at_its_declaration():
    """FedGM with m arrivals under any rule has no conformance search space (Cor G.1 is stated for
    autonomous clients): declaring it is a one-line ValueError, not a KeyError at search time."""
    from verify.theorems import momentum

    with pytest.raises(ValueError, match="no conformance search space for 'm-per-round' participation with "
                                         "server-driven clients"):
        momentum.declare(
            "demo.any_rule", momentum.Statement("m-per-round", False, loose_4_6), momentum.FAMILY, "any rule",
            example="--L 1", patterns=("P1",))
