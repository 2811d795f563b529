"""monte_carlo(..., method="epochs"): ReshuffledCyclic delays from the epochs' orders alone,
replicate for replicate the same as the whole traces of method "trace"."""
import numpy as np
import pytest

from participation.delays import per_round_delay
from participation.expected import monte_carlo
from participation.expected.samplers.epochs import epoch_chunk
from participation.patterns import Bernoulli, Cyclic, ReshuffledCyclic
from participation._random import seed_sequence


def samples(pattern, rounds, reps, method, **kwargs):
    result = monte_carlo(pattern, rounds, reps, seed=kwargs.pop("seed", 3), progress=False, keep_samples=True,
                         method=method, **kwargs)
    return result.samples["tau_max"], result.samples["tau_avg"]


def assert_same(a, b):
    assert a[0].dtype == b[0].dtype and np.array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=0, atol=1e-12)


CASES = [(10, 3, "short"), (10, 3, "drop"), (12, 3, "short"), (12, 3, "drop"), (7, 7, "short"), (7, 7, "drop"),
         (9, 1, "short"), (11, 4, "drop"), (13, 5, "drop"), (1, 1, "short")]


@pytest.mark.parametrize("n, s, remainder", CASES)
@pytest.mark.parametrize("rounds", [1, 2, 5, 40, 123])
def test_epochs_equal_trace(n, s, remainder, rounds):
    pattern = ReshuffledCyclic(n, s, remainder)
    assert_same(samples(pattern, rounds, 30, "trace"), samples(pattern, rounds, 30, "epochs"))


@pytest.mark.parametrize("remainder", ["short", "drop"])
def test_more_than_one_draw_unit_and_chunking(remainder):
    pattern = ReshuffledCyclic(11, 3, remainder)      # 16 epochs a unit: 300 rounds cross several units
    reference = samples(pattern, 300, 25, "trace", chunk_size=4)
    for chunk in (1, 7, 25, None):
        assert_same(reference, samples(pattern, 300, 25, "epochs", chunk_size=chunk))


@pytest.mark.parametrize("remainder", ["short", "drop"])
def test_large_replicate_offsets_match_the_traces(remainder):
    pattern = ReshuffledCyclic(10, 4, remainder)
    root = seed_sequence(8)
    for first in (0, 1, 10**6 + 3, 2**40):
        tau = per_round_delay(pattern.sample_batch(70, 5, root, first_replicate=first))
        tau_max, tau_avg = epoch_chunk(pattern, 70, root, first, 5)
        assert np.array_equal(tau_max, tau.max(axis=1))
        np.testing.assert_allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)
    assert_same(samples(pattern, 70, 6, "trace", _first=2**33), samples(pattern, 70, 6, "epochs", _first=2**33))


def test_first_epoch_and_drop_clients_keep_their_old_last_selection():
    # N = 5, S = 2, drop: an epoch is 2 rounds and one client sits out each epoch, so a
    # client may wait several epochs; τ_t = t + 1 in round 0 (clients never selected)
    pattern = ReshuffledCyclic(5, 2, "drop")
    root = seed_sequence(0)
    masks = pattern.sample_batch(60, 40, root)
    tau = per_round_delay(masks)
    assert tau[:, 0].min() == 1
    assert tau.max() > 2 * pattern.epoch_rounds     # some client sat out two epochs running
    tau_max, tau_avg = epoch_chunk(pattern, 60, root, 0, 40)
    assert np.array_equal(tau_max, tau.max(axis=1))
    np.testing.assert_allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("pattern", [ReshuffledCyclic(20, 6, "drop"), ReshuffledCyclic(200, 2)])
def test_auto_picks_epochs_where_shifts_do_not_apply(pattern, monkeypatch):
    # "drop" with S ∤ N (clients sit epochs out), and an epoch of 100 rounds (beyond the shifts' table)
    auto = monte_carlo(pattern, 90, 40, seed=1, progress=False)
    trace = monte_carlo(pattern, 90, 40, seed=1, progress=False, method="trace")
    assert auto.tau_max == trace.tau_max
    assert auto.tau_avg.mean == pytest.approx(trace.tau_avg.mean, abs=1e-12)
    import participation.expected.samplers.epochs as epochs

    calls = []
    original = epochs.epoch_chunk
    monkeypatch.setattr(epochs, "epoch_chunk", lambda *a: calls.append(a) or original(*a))
    monte_carlo(pattern, 90, 4, seed=1, progress=False)
    assert calls                                     # "auto" took the epochs path


def test_to_precision_with_epochs_is_the_trace_answer():
    pattern = ReshuffledCyclic(10, 3)
    a = monte_carlo(pattern, 50, target_stderr=0.2, seed=2, progress=False, method="epochs")
    b = monte_carlo(pattern, 50, target_stderr=0.2, seed=2, progress=False, method="trace")
    assert a.reps == b.reps and a.tau_max == b.tau_max


@pytest.mark.parametrize("pattern, kwargs", [(Cyclic(10, 3), {}), (Bernoulli(0.3, 10), {}),
                                             (ReshuffledCyclic(10, 3), {"device": "cpu"})])
def test_epochs_refused_where_it_does_not_apply(pattern, kwargs):
    with pytest.raises(ValueError, match="epochs"):
        monte_carlo(pattern, 20, 4, seed=0, method="epochs", **kwargs)
