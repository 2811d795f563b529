"""verify.strategies: every strategy draws valid objects (property tests)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds import Constants, fedsum
from participation import Trace, markov
from participation.delays import delay_metrics
from participation.patterns import Pattern
from verify import strategies as vst


@given(vst.traces())
def test_traces_are_valid(trace):
    assert isinstance(trace, Trace) and 1 <= trace.n_clients <= 8 and 1 <= trace.n_rounds <= 40
    assert trace.mask.dtype == bool


@given(vst.traces(n_clients=3, rounds=10, density=st.sampled_from([0.0, 1.0])))
def test_trace_density_extremes(trace):
    assert trace.mask.shape == (10, 3)
    assert trace.mask.all() or not trace.mask.any()


@given(vst.traces(n_clients=4, rounds=12, period=st.integers(1, 3)))
def test_periodic_traces_repeat(trace):
    m = trace.mask
    assert any((m[p:] == m[:-p]).all() for p in (1, 2, 3))


@given(vst.traces(n_clients=5, rounds=20, fill=True))
def test_near_full_traces(trace):
    assert trace.mask.shape == (20, 5)


@given(vst.patterns())
def test_patterns_sample_valid_traces(pattern):
    assert isinstance(pattern, Pattern)
    trace = pattern.sample(12, seed=0)
    assert trace.mask.shape == (12, pattern.n_clients)
    assert (pattern.sample(12, seed=0).mask == trace.mask).all()


@settings(max_examples=20)
@given(vst.quadratic_problems())
def test_quadratic_problems_are_valid(problem):
    c = problem.constants()
    assert c.L > 0 and c.sigma2 >= 0 and c.delta_f >= 0 and c.F0 >= 0
    assert np.isfinite(float(problem.loss(problem.x0)))


@settings(max_examples=20)
@given(vst.quadratic_problems(offset=0.0))
def test_zero_offset_starts_at_the_optimum(problem):
    assert problem.constants().delta_f <= 1e-12 * max(1.0, problem.constants().F0)
    assert float(problem.full_grad(problem.x0).norm()) <= 1e-12


@settings(max_examples=4)
@given(vst.logistic_problems())
def test_logistic_problems_are_valid(problem):
    x = problem.x0
    assert problem.client_grads(x).shape == (problem.n_clients, problem.dim)
    assert np.isfinite(float(problem.loss(x)))


@given(vst.transition_matrices())
def test_transition_matrices_are_row_stochastic(P):
    assert (P >= 0).all() and np.allclose(P.sum(axis=1), 1)


@given(vst.transition_matrices(irreducible=True, aperiodic=True))
def test_ergodic_transition_matrices(P):
    rho = markov.stationary(P)
    assert np.allclose(rho @ P, rho) and markov.slem(P) < 1 - 1e-9


constants = st.builds(Constants, L=st.floats(0.1, 10), sigma2=st.floats(0, 2), delta_f=st.floats(0, 5),
                      F0=st.floats(0, 5), n_clients=st.integers(1, 8), local_steps=st.integers(1, 4),
                      rounds=st.integers(1, 50))
ALGORITHM = {"fedsum.lemma_c6": "fedsum-b", "fedsum.lemma_d6": "fedsum", "fedsum.lemma_e6": "fedsum-cr"}


@given(st.data(), st.sampled_from(sorted(ALGORITHM)), constants, vst.traces())
def test_step_sizes_meet_the_lemma_conditions(data, theorem, c, trace):
    m = delay_metrics(trace)
    eta_g, eta_l = data.draw(vst.step_sizes(theorem, c, m.tau_max, m.tau_avg))
    assert eta_g > 0 and eta_l > 0
    assert fedsum.check_step_sizes(c, eta_g, eta_l, m.tau_max, m.tau_avg, algorithm=ALGORITHM[theorem]) == ()
    # the largest pair meets the conditions too, and a 1% larger one breaks a limit
    g, l = vst.largest_step_sizes(theorem, c, m.tau_max, m.tau_avg)
    assert fedsum.check_step_sizes(c, g, l, m.tau_max, m.tau_avg, algorithm=ALGORITHM[theorem]) == ()
    assert eta_g * eta_l <= g * l * (1 + 1e-12)
    assert fedsum.check_step_sizes(c, 1.01 * g, l, m.tau_max, m.tau_avg, algorithm=ALGORITHM[theorem]) != ()


@given(st.data(), constants)
def test_theorem_step_sizes_are_prescribed(data, c):
    eta_g, eta_l = data.draw(vst.step_sizes("fedsum.theorem_4_1", c, 3, 1.5))
    s = fedsum.step_sizes_4_1(c, 3, 1.5)
    assert (eta_g, eta_l) == (s["eta_g"], s["eta_l"])


def test_bad_strategy_arguments():
    c = Constants(L=1, sigma2=0, delta_f=1)
    with pytest.raises(ValueError, match="lemma_x"):
        vst.step_sizes("fedsum.lemma_x", c)
    with pytest.raises(ValueError, match="constants"):
        vst.step_sizes("fedsum.lemma_d6", None)
    with pytest.raises(ValueError, match="martian"):
        vst.patterns(kinds=("martian",))
    with pytest.raises(ValueError, match="1.5"):
        vst.traces(density=1.5)
