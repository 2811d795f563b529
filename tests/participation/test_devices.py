"""A device named for Monte-Carlo delays is checked before any work: a name torch does not parse,
a meta device, or one this machine lacks is a one-line ValueError naming it, never torch's own
RuntimeError."""
import pytest

from participation import patterns
from participation.expected import monte_carlo


@pytest.mark.parametrize("device, words", [("bogus", "'bogus' is not a torch device"),
                                           ("meta", "meta tensors hold no data"),
                                           ("cuda:99", "'cuda:99' is not available here")])
def test_monte_carlo_refuses_a_device_it_cannot_use_with_a_value_error(device, words):
    with pytest.raises(ValueError, match=words):
        monte_carlo(patterns.Uniform(10, 2), 20, 16, seed=0, device=device)


def test_monte_carlo_on_the_cpu_device_agrees_with_the_exact_expectation():
    """The device path draws its own traces (torch), so it is held to the exact E[τ_avg]."""
    from participation.expected import exact_tau_avg

    pattern = patterns.Uniform(10, 2)
    estimate = monte_carlo(pattern, 30, 400, seed=3, device="cpu").tau_avg
    assert abs(estimate.mean - exact_tau_avg(pattern, 30)) <= 5 * estimate.stderr
