"""FedSUM Appendix F's bounds on E[τ_max] (participation.expected.paper_bounds,
``paper_tau_max_bound``): each bound and proof step above the exact value, Lemma F.3 and the
remainder rule of reshuffled cyclic (Lemma F.3 applies to remainder="short" and to S | N,
and is refused for remainder="drop" with S ∤ N, where clients can miss whole epochs), no
bound for Markov clients, and the capped geometric sums of the tail-sum steps."""
import math

import numpy as np
import pytest

from participation.delays import delay_metrics
from participation.expected import exact_tau_max, monte_carlo, paper_bounds, paper_tau_max_bound
from participation.patterns import ReshuffledCyclic, preset

# ---------------------------------------------------------------- bounds above the exact values


@pytest.mark.parametrize("name", ["P1", "P2", "P3", "H8", "case3", "logit"])
@pytest.mark.parametrize("rounds", [50, 400])
def test_paper_bounds_dominate_exact_values(name, rounds):
    pattern = preset(name)
    bound = paper_tau_max_bound(pattern, rounds)
    try:
        truth = exact_tau_max(pattern, rounds)
    except ValueError:  # Uniform: compare with a high-precision Monte-Carlo upper limit instead
        truth = monte_carlo(pattern, rounds, 400, seed=2, progress=False).tau_max.ci_high
    for label, value in bound.steps.items():
        assert value >= truth, label
    assert bound.value >= truth


def test_reshuffled_bound_dominates_its_almost_sure_maximum():
    pattern = ReshuffledCyclic(20, 4)
    mc = monte_carlo(pattern, 400, 100, seed=0, keep_samples=True, progress=False)
    assert mc.samples["tau_max"].max() <= paper_tau_max_bound(pattern, 400).steps["F.3 proof: 2⌊N/S⌋"]


def test_markov_gives_no_paper_bound():
    with pytest.raises(ValueError, match="no bound"):
        paper_tau_max_bound(preset("cafed-temporal"), 100)


# ---------------------------------------------------------------- Lemma F.3 and the remainder rule

UNEVEN = [(10, 4), (7, 2), (10, 3), (13, 5), (9, 4), (5, 3), (11, 2)]


@pytest.mark.parametrize("n, s", UNEVEN)
def test_short_epochs_keep_tau_max_within_the_reported_proof_step(n, s):
    """With S ∤ N and remainder="short" every client joins once per epoch of ⌈N/S⌉ rounds,
    so τ_max ≤ 2⌈N/S⌉ − 2 on every trace; the bound reports that step and keeps 4N/S."""
    pattern = ReshuffledCyclic(n, s, remainder="short")
    bound = paper_tau_max_bound(pattern, 300)
    step = 2 * -(-n // s) - 2
    label = [k for k in bound.steps if "2⌈N/S⌉ − 2" in k]
    assert len(label) == 1 and bound.steps[label[0]] == step
    assert "F.3 proof: 2⌊N/S⌋" not in bound.steps            # the S | N step does not describe this pattern
    assert bound.value == bound.steps["F.3 stated: 4N/S"] == 4 * n / s >= step
    sampled = delay_metrics(pattern.sample_batch(300, 200, 7)).tau_max
    assert sampled.max() <= step
    assert sampled.max() == step                               # reached: the bound is tight


@pytest.mark.parametrize("n, s", UNEVEN)
def test_drop_with_a_remainder_is_refused(n, s):
    pattern = ReshuffledCyclic(n, s, remainder="drop")
    with pytest.raises(ValueError) as err:
        paper_tau_max_bound(pattern, 100)
    message = str(err.value)
    assert "\n" not in message and "Lemma F.3" in message and "remainder='drop'" in message
    assert "remainder='short'" in message and "monte_carlo" in message and "reshuffled_tau_max_bound" in message


@pytest.mark.slow
def test_drop_exceeds_the_lemma_it_was_given():
    """N = 10, S = 4, "drop": 2 of 10 clients sit out each epoch of 2 rounds, so runs of
    missed epochs push τ_max past 4N/S = 10 on most traces of 1000 rounds (no a.s. bound)."""
    pattern = ReshuffledCyclic(10, 4, remainder="drop")
    sampled = delay_metrics(pattern.sample_batch(1000, 400, 3)).tau_max
    assert sampled.mean() > 10 and (sampled > 10).mean() > 0.5


@pytest.mark.parametrize("n, s", [(12, 4), (9, 3), (6, 6)])
def test_drop_without_a_remainder_is_lemma_f3(n, s):
    """S | N: "drop" and "short" are the same pattern, and the lemma's proof applies."""
    for remainder in ("drop", "short"):
        bound = paper_tau_max_bound(ReshuffledCyclic(n, s, remainder), 200)
        assert bound.lemma == "FedSUM Lemma F.3" and bound.steps["F.3 proof: 2⌊N/S⌋"] == 2 * (n // s)
    sampled = delay_metrics(ReshuffledCyclic(n, s, "drop").sample_batch(200, 100, 5)).tau_max
    assert sampled.max() <= 2 * (n // s)


# ---------------------------------------------------------------- the tail-sum step


def test_capped_geometric_sum_equals_the_array_sum():
    for n in (1, 100):
        for rounds in (1, 2, 50, 3000):
            for p in (1e-9, 0.2, 0.8, 0.999, 1 - 1e-9):
                l = np.arange(1, rounds + 1)
                direct = float(np.minimum(1.0, n * rounds * np.exp(l * math.log(p))).sum())
                assert paper_bounds._capped_geometric_sum(n * rounds, p, rounds) == pytest.approx(direct, rel=1e-13)
