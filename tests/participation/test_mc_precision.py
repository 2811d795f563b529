"""monte_carlo(..., target_stderr=): a target precision instead of a replicate count, with the same
answer whatever the chunking or the number of workers."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from participation.expected import monte_carlo
from participation.expected.montecarlo import FIRST_CHECK
from participation.patterns import Bernoulli, Markov, Uniform, preset
from verify.cli import main


@pytest.mark.parametrize("pattern", [Uniform(12, 3), Bernoulli(0.25, 12), Markov(0.4, 0.5, n_clients=6)],
                         ids=["uniform", "bernoulli-gaps", "markov"])
def test_target_precision_is_met_and_independent_of_chunking(pattern):
    target = 0.3
    plain = monte_carlo(pattern, 120, target_stderr=target, seed=5, keep_samples=True)
    assert plain.tau_max.stderr <= target and plain.tau_avg.stderr <= target
    # the stopping point is a checkpoint 64·2^k, and the run is the first `reps` replicates of the seed
    assert plain.reps >= FIRST_CHECK and (plain.reps // FIRST_CHECK) & (plain.reps // FIRST_CHECK - 1) == 0
    same = monte_carlo(pattern, 120, plain.reps, seed=5, keep_samples=True)
    assert np.array_equal(plain.samples["tau_max"], same.samples["tau_max"])
    assert np.array_equal(plain.samples["tau_avg"], same.samples["tau_avg"])
    for chunk in (1, 7, 100):
        other = monte_carlo(pattern, 120, target_stderr=target, seed=5, chunk_size=chunk)
        assert other.reps == plain.reps and other.tau_max == plain.tau_max and other.tau_avg == plain.tau_avg
    with ThreadPoolExecutor(2) as pool:
        pooled = monte_carlo(pattern, 120, target_stderr=target, seed=5, executor=pool, chunk_size=9)
    assert pooled.tau_max == plain.tau_max and pooled.tau_avg == plain.tau_avg
    # the previous checkpoint had not met the target (else the run would have stopped there)
    if plain.reps > FIRST_CHECK:
        half = plain.samples["tau_max"][: plain.reps // 2], plain.samples["tau_avg"][: plain.reps // 2]
        assert max(x.std(ddof=1) / np.sqrt(x.size) for x in half) > target


@pytest.mark.parametrize("kwargs, match", [
    (dict(reps=10, target_stderr=0.1), "not both"),
    (dict(target_stderr=0.0), "positive"),
    (dict(target_stderr=-1.0), "positive"),
    (dict(), "give reps"),
    (dict(target_stderr=1e-6, max_reps=128), "not reached in max_reps = 128"),
])
def test_bad_precision_requests_are_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        monte_carlo(Uniform(8, 2), 50, seed=0, **kwargs)
    assert "\n" not in str(err.value)


def test_mc_command_takes_a_target_precision(capsys):
    assert main(["mc", "P1", "-T", "100", "--stderr", "0.5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "(to stderr ≤ 0.5)" in out and "replicates" in out
    assert main(["mc", "P1", "-T", "100", "--stderr", "0.5", "--reps", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not both" in err


def test_mc_command_reports_its_throughput(capsys):
    """fedverify mc says how fast it went, in trace cells (rounds × clients × replicates) per second."""
    import re

    assert main(["mc", "P2", "-T", "50", "--reps", "40", "--no-progress"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    found = re.search(r"; ([0-9.]+) s, ([0-9.e+]+) trace cells/s$", line)
    assert found and float(found.group(2)) > 0


def test_the_deprecated_stderr_name_still_works_and_says_so():
    pattern = preset("P2", n_clients=10, per_round=2)
    with pytest.warns(DeprecationWarning, match="target_stderr"):
        old = monte_carlo(pattern, 60, stderr=0.3, seed=1)
    new = monte_carlo(pattern, 60, target_stderr=0.3, seed=1)
    assert (old.reps, old.tau_max.mean, old.tau_avg.mean) == (new.reps, new.tau_max.mean, new.tau_avg.mean)
    with pytest.raises(ValueError, match="target_stderr only"), pytest.warns(DeprecationWarning):
        monte_carlo(pattern, 60, stderr=0.3, target_stderr=0.3)
