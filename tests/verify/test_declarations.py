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
from verify.choices import CHECK_ALGORITHMS, THEOREM_LIST
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
        assert THEOREM_LIST[name] == t.summary
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
