"""A recorded or given local step size that breaks a hypothesis of a server-momentum theorem is
answered with the step sizes the theorem admits at the same server schedule, and that step size
is admitted while twice it is not."""
import re

import algorithms
from algorithms.problems import Quadratic
from bounds import momentum as bm
from bounds.core import Constants
from participation import patterns
from verify.checking import check


def test_a_given_step_that_breaks_theorem_4_6_names_the_admitted_one():
    problem = Quadratic.random(6, 3, noise_std=0.0, seed=1)
    trace = patterns.Uniform(6, 2).sample(10, seed=3)
    c = problem.constants()
    constants = Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=6, local_steps=2, rounds=10,
                          extra={"sigma_g2": 1.0})
    fedavgm = algorithms.get("fedavgm", eta_l=0.2, eta_g=0.5, beta=0.8, local_steps=2)
    result = check(fedavgm, problem, trace, "momentum.theorem_4_6", seeds=[5], step_sizes="given", constants=constants)
    note = next(n for n in result.notes if "admits η_l ≤" in n)
    admitted = float(re.search(r"admits η_l ≤ ([0-9.e-]+)", note).group(1))
    schedule = lambda eta_l: bm.single_stage(10, 2.5, eta_l, beta=0.8, nu=1.0)
    assert bm.theorem_4_6(constants, schedule(admitted), 2).valid
    assert not bm.theorem_4_6(constants, schedule(2 * admitted), 2).valid
