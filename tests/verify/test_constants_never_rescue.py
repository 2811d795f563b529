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


def _check_logit(scale, theorem="logit.theorem_2", **hparams):
    """LOGIT on independent availability p = 0.5, at ``scale`` times a step that converges."""
    problem = Quadratic.random(6, 3, noise_std=0.1, seed=0)
    algorithm = algorithms.get("logit", eta_l=0.02 * scale, eta_g=1.0, local_steps=2, surrogate="generator")
    return check(algorithm, problem, patterns.Bernoulli(0.5, n_clients=6), theorem, seeds=[0, 1, 2], rounds=30,
                 step_sizes="given", **hparams)


def test_logit_generator_constants_estimated_on_a_diverging_run_do_not_rescue_it():
    """ε* and C₁ (LOGIT Assumption 5) and ε (inequality (23)) exist only along a run: estimated on
    each run's rounds before its ‖∇f‖² first exceeds the start's, the diverging runs are violated,
    so the verdict is "inconclusive" although the bound read along the whole runs is far above them."""
    from verify.verdicts import judge

    for theorem in ("logit.theorem_1", "logit.theorem_2", "logit.inequality_23"):
        result = _check_logit(150.0, theorem)
        assert max(result.values) > 1e6 * min(_check_logit(1.0, theorem).values), theorem    # it diverged
        assert judge(list(result.values), float(result.bound.value)).verdict == "holds", theorem  # rescued before
        assert result.verdict == "inconclusive", theorem
        assert any("rescue" in n and "never 'holds'" in n for n in result.notes), theorem


def test_logit_runs_that_converge_keep_their_verdict():
    for theorem in ("logit.theorem_1", "logit.theorem_2", "logit.inequality_23"):
        result = _check_logit(1.0, theorem)
        assert result.verdict == "holds" and not any("rescue" in n for n in result.notes), theorem
