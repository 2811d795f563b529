"""Library calls with arguments of the wrong kind fail at once with one ValueError or TypeError
that names the argument, not deep inside (an AttributeError, torch's RuntimeError or AssertionError)."""
import pytest

import algorithms
from algorithms.devices import resolve_device
from algorithms.problems import Quadratic
from participation import expected, preset
from verify import check


@pytest.fixture(scope="module")
def small():
    return Quadratic.random(4, 2, seed=0), preset("P1", n_clients=4, per_round=2)


@pytest.mark.parametrize("call, kind, fragment", [
    (lambda p: expected.monte_carlo("P1", 10, 4), TypeError, "preset('P1')"),
    (lambda p: expected.exact_tau_max("P2", 10), TypeError, "preset('P2')"),
    (lambda p: expected.exact_tau_avg(3, 10), TypeError, "got int"),
    (lambda p: expected.monte_carlo(p, 10, 4, executor="x"), TypeError, "executor must be"),
])
def test_participation_calls_name_the_argument(small, call, kind, fragment):
    with pytest.raises(kind, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        call(small[1])


@pytest.mark.parametrize("device, fragment", [("bogus", "not a torch device"), ("meta", "meta tensors"),
                                              ("cuda:99", "not available here")])
def test_devices_are_checked_once_for_the_library_and_the_cli(small, device, fragment):
    problem, pattern = small
    trace = pattern.sample(5, seed=0)
    with pytest.raises(ValueError, match=fragment):
        resolve_device(device)
    with pytest.raises(ValueError, match=fragment):
        algorithms.run(algorithms.get("fedavg"), problem, trace, device=device)
    with pytest.raises(ValueError, match=fragment):
        check("fedavg", problem, trace, device=device, seeds=2)
    assert resolve_device("cpu").type == "cpu" and resolve_device(None) is None


@pytest.mark.parametrize("problem", [None, "quadratic", 3])
def test_check_names_a_problem_that_is_not_one(small, problem):
    with pytest.raises(ValueError, match="problem must be an algorithms problem"):
        check("fedavg", problem, small[1].sample(5, seed=0))
    with pytest.raises(ValueError, match="problem must be an algorithms problem"):
        algorithms.run(algorithms.get("fedavg"), problem, small[1].sample(5, seed=0))


def test_monte_carlo_refuses_the_rounds_sample_refuses():
    import numpy as np

    from participation.patterns import Bernoulli

    short = Bernoulli(np.full((5, 3), 0.5))
    for call in (lambda: short.sample(10, seed=0), lambda: expected.monte_carlo(short, 10, 4)):
        with pytest.raises(ValueError, match="defines probabilities for 5 rounds, 10 requested"):
            call()
    assert expected.monte_carlo(short, 5, 4, seed=0).tau_max.mean >= 0


@pytest.mark.parametrize("rounds, reps", [(10 ** 12, 1), (10 ** 6, 10 ** 4)])
def test_sampling_more_than_memory_holds_is_one_line(rounds, reps, monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "1")
    with pytest.raises(ValueError, match="memory limit"):
        preset("P1").sample_batch(rounds, reps, seed=0)


@pytest.mark.parametrize("shape_of", [lambda reps, rounds, n: (reps, rounds, n - 1), lambda reps, rounds, n: (reps, rounds)])
def test_a_user_pattern_of_the_wrong_shape_is_named_not_read_as_zero_delay(shape_of):
    import dataclasses

    import numpy as np

    from participation.patterns.base import Pattern

    @dataclasses.dataclass(frozen=True)
    class Mine(Pattern):
        n_clients: int = 4

        def _generate(self, root, replicates, start, stop):
            return np.ones(shape_of(len(replicates), stop - start, self.n_clients), dtype=bool)

    with pytest.raises(ValueError, match="Mine.sample_batch returned shape"):
        expected.monte_carlo(Mine(), 10, 4, seed=0, method="trace")
