"""The lower confidence limit of a nonnegative left side from several seeds: never below the
Markov limit of their mean, so that a diverged run judged "violated" alone stays "violated" with
more diverged seeds (a Student-t limit alone falls below zero there), with a coverage of at least
the stated confidence, checked by simulation on skewed and heavy-tailed laws."""
import numpy as np
import pytest

from verify.verdicts import judge, nonnegative_lower_limit

#: (draw n values, true mean): skewed, heavy-tailed and two-point laws of a nonnegative left side.
LAWS = {"exponential": (lambda rng, n: rng.exponential(1.0, n), 1.0),
        "lognormal": (lambda rng, n: rng.lognormal(0.0, 1.5, n), float(np.exp(1.5 ** 2 / 2))),
        "rare spikes": (lambda rng, n: np.where(rng.random(n) < 0.1, 100.0, 0.0), 10.0)}


@pytest.mark.parametrize("law", LAWS)
@pytest.mark.parametrize("n", [2, 3, 10])
def test_the_lower_limit_covers_the_mean_at_the_stated_confidence(law, n):
    draw, mean = LAWS[law]
    rng = np.random.default_rng(7)
    covered = np.mean([nonnegative_lower_limit(draw(rng, n), 0.95) <= mean for _ in range(1500)])
    assert covered >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / 1500)


def test_the_lower_limit_is_never_below_the_markov_limit_of_the_mean():
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = rng.lognormal(0, 3, rng.integers(2, 8))
        assert nonnegative_lower_limit(v, 0.95) >= 0.025 * v.mean() * (1 - 1e-12)


def test_a_diverged_run_is_violated_from_one_two_or_three_seeds():
    """The momentum run of the example: measured 3.8e24 and more against a bound of 6.1e4."""
    seeds = [3.8e24, 2.1e24, 5.0e24]
    assert [judge(seeds[:k], 6.1e4).verdict for k in (1, 2, 3)] == ["violated"] * 3


def test_a_seed_at_least_the_mean_of_the_others_never_turns_a_markov_violation_into_inconclusive():
    rng = np.random.default_rng(1)
    for _ in range(200):
        v = rng.lognormal(0, 3, rng.integers(2, 6))
        bound = 0.02 * v.mean()                       # violated through the Markov part: 0.025·mean > bound
        assert judge(v, bound).verdict == "violated"
        more = np.append(v, v.mean() * (1 + rng.random()))
        assert judge(more, bound).verdict == "violated"


def test_a_second_seed_at_least_as_large_as_the_first_never_lowers_the_lower_limit():
    """One value had Markov's limit at the full level, (1 − c)·x, and two values its half,
    (1 − c)/2 of their mean: a record at 1.0 was 'violated' against 0.04 and stopped being so
    when a second seed at 2.0 joined it."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        x = rng.lognormal(0, 2)
        y = x * (1 + 5 * rng.random())
        assert judge([x, y], 0.0).lower >= judge([x], 0.0).lower * (1 - 1e-12)
    one, two = judge([1.0], 0.02), judge([1.0, 2.0], 0.02)
    assert one.verdict == two.verdict == "violated" and one.lower == pytest.approx(0.025, rel=1e-12)
