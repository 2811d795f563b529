"""verify.conformance: the hypothesis search finds SCAFFOLD's correction-sign bug and nothing
for the correct FedSUM algorithms (or correct SCAFFOLD)."""
from dataclasses import dataclass

import pytest

from algorithms import Scaffold
from algorithms.base import local_sgd
from algorithms.scaffold import ScaffoldState
from verify.checking import check
from verify import conformance


@dataclass(frozen=True, repr=False)
class ScaffoldSignBug(Scaffold):
    """SCAFFOLD with the control-variate correction's sign flipped, y ← y − η_l (g_i(y) + c_i − c)
    (a classic implementation bug): local steps double the client drift instead of
    removing it."""

    def round(self, state, problem, r):
        if not r.m:
            return state
        start, c_old = r.rows(state.x), r.take(state.c_clients)
        Y, mean_grad = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps,
                                 correction=c_old - r.rows(state.c))
        x = state.x + r.eta_g * (r.sum(Y - start) / r.count[:, None])
        c = state.c + r.sum(mean_grad - c_old) / problem.n_clients
        return ScaffoldState(x=r.where_active(x, state.x), c=r.where_active(c, state.c),
                             c_clients=r.put(state.c_clients, mean_grad))


@pytest.fixture(scope="module")
def sign_bug():
    return conformance(ScaffoldSignBug, "fedsum.lemma_d6", max_examples=200)


def test_finds_the_scaffold_sign_bug(sign_bug):
    """Under a schedule where one client joins more often than the rest, the buggy direction
    mean_S(2∇f_i − c) drives x to that client's optimum: ‖∇f‖² stays O(F_0) while Lemma D.6
    (at Δ_f ≈ 0, low noise) decays like τ_max·F_0/T."""
    assert sign_bug.found, str(sign_bug)
    res = sign_bug.result
    assert res.verdict == "violated" and res.conditions_hold
    assert sign_bug.ratio > 1 and res.lower > res.bound_value
    # the returned minimal trace reproduces the violation on its own
    again = check(ScaffoldSignBug(eta_l=res.step_sizes["eta_l"], eta_g=res.step_sizes["eta_g"]), sign_bug.problem,
                  sign_bug.trace, "fedsum.lemma_d6", seeds=2)
    assert again.verdict == "violated" and again.measured == pytest.approx(res.measured)
    # shrinking kept it small
    assert sign_bug.trace.n_clients <= 6 and sign_bug.trace.n_rounds == 40


@pytest.mark.slow
@pytest.mark.parametrize("factory, bound", [("fedsum-b", "fedsum.lemma_c6"), ("fedsum", "fedsum.lemma_d6"),
                                            ("fedsum-cr", "fedsum.lemma_e6"), (Scaffold, "fedsum.lemma_d6")])
def test_correct_algorithms_have_no_counterexample(factory, bound):
    out = conformance(factory, bound, max_examples=200)
    assert not out.found, str(out)
    assert out.worst_ratio < 1 and out.examples >= 200


@pytest.mark.slow
def test_search_is_deterministic():
    a = conformance("fedsum", "fedsum.lemma_d6", max_examples=8, shrink=False)
    b = conformance("fedsum", "fedsum.lemma_d6", max_examples=8, shrink=False)
    assert a.worst_ratio == b.worst_ratio and a.examples == b.examples
    assert (a.trace.mask == b.trace.mask).all()


@pytest.mark.parametrize("kwargs, match", [(dict(bound="fedsum.corollary_4_1"), "corollary_4_1"),
                                           (dict(bound="nope"), "nope"), (dict(max_examples=0), "max_examples"),
                                           (dict(seeds=0), "seeds")])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        conformance("fedsum", **kwargs)


def test_the_name_conformance_is_always_the_function():
    """``verify.conformance`` is the function on first access and after its module is imported."""
    import verify

    first = verify.conformance
    import verify.counterexamples  # noqa: F401  (importing the module must not rebind the name)
    from verify import conformance as again

    assert callable(first) and first is verify.conformance is again
    assert verify.ConformanceResult is verify.counterexamples.ConformanceResult


@pytest.mark.slow
def test_theorem_4_1_skips_problems_it_prescribes_no_step_for():
    """Thm 4.1's η_l ∝ √Δ_f is 0 where x⁰ is optimal; such draws are skipped rather than run,
    which would raise 'eta_l must be a finite number > 0, got 0.0'."""
    out = conformance("fedsum", "fedsum.theorem_4_1", max_examples=5, shrink=False)
    assert not out.found and out.examples >= 1

    from hypothesis import strategies as st

    from algorithms.problems import Quadratic
    import numpy as np

    def optimal_at_zero(n):      # a user's own noisy problems: b_i sum to 0, so x⁰ = 0 is optimal, Δ_f = 0, σ² > 0
        return st.just(Quadratic(np.ones((n, 1)), np.concatenate([[1.0], np.full(n - 1, -1.0 / (n - 1))])[:, None],
                                 noise_std=0.1))

    out = conformance("fedsum", "fedsum.theorem_4_1", max_examples=3, problems=optimal_at_zero, shrink=False)
    assert out.examples == 0 and out.skipped >= 1 and not out.found
    assert "skipped" in str(out)


PLANNED = ("momentum.theorem_4_1", "momentum.theorem_4_6", "momentum.theorem_5_1", "momentum.corollary_g1",
           "cafed.theorem_1", "cafed.theorem_2", "cafed.theorem_3", "logit.theorem_1", "logit.theorem_2")


@pytest.mark.parametrize("name", PLANNED)
def test_every_theorem_is_searched_from_its_seed_corpus(name):
    """Every theorem with a step-size rule of its own is searched over its setting, starting from its
    seed cases (Server momentum Thms 4.1/4.6/5.1, Cor G.1; CA-Fed Thms 1–3; LOGIT Thms 1–2): the
    correct implementations break none of them."""
    from verify import search_spaces, theorems

    result = conformance(None, name, max_examples=1, rounds=16, n_clients=2, shrink=False)
    assert not result.found
    assert result.examples + result.skipped >= len(search_spaces.seed_cases(theorems.get(name), 16))
    assert result.result is not None and result.result.bound_name == name and result.result.conditions_hold


def test_a_users_made_up_theorem_is_searched_and_broken():
    """A user's delay bound (verify.theorems.user_theorem) goes through the same search: a bound too
    small for FedAvg is found violated on the first seed case."""
    from verify import theorems

    mine = theorems.user_theorem(lambda constants, tau_max: 0.01 * (1 + tau_max), covers=("fedavg",), name="too-small")
    result = conformance("fedavg", mine, max_examples=3, rounds=16, shrink=False)
    assert result.found and result.result.verdict == "violated" and result.result.bound_name == "too-small"


def test_a_planned_theorem_needs_an_algorithm_name():
    with pytest.raises(ValueError, match="give an algorithm name"):
        conformance(Scaffold, "logit.theorem_2", max_examples=1)
