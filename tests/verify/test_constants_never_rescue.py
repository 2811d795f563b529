"""Constants estimated on the judged runs never rescue them: a momentum run that diverges at
η_l = 3 inflates its own σ_g² (measured along its iterates) and with it the bound; against the
bound at σ_g² measured at the runs' start it is violated, so its verdict is "inconclusive", never
"holds". Runs that converge keep their verdict, and a given σ_g² is used as given."""
import algorithms
from algorithms.problems import Quadratic
from participation import patterns
from verify.checking import check


def _check(eta_l, **constants):
    problem = Quadratic.random(6, 3, noise_std=0.1, seed=0)
    trace = patterns.Uniform(6, 6).sample(30, seed=0)
    algorithm = algorithms.get("fedgm", eta_l=eta_l, eta_g=1.0, beta=0.5, nu=0.9, local_steps=2)
    return check(algorithm, problem, trace, "momentum.theorem_4_1", seeds=[0, 1, 2], step_sizes="given", **constants)


def test_a_diverging_run_is_not_rescued_by_the_constants_it_inflates():
    result = _check(3.0)
    assert result.verdict == "inconclusive"
    note = next(n for n in result.notes if "rescue" in n)
    assert "the runs are 'violated'" in note and "never 'holds'" in note


def test_a_converging_run_keeps_its_verdict():
    result = _check(0.5)
    assert result.verdict == "holds" and not any("rescue" in n for n in result.notes)
