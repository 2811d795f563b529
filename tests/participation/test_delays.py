"""Delay metrics against the paper's definitions, computed independently."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from participation import Trace, delay_metrics, last_selection, per_round_delay
from participation.delays import DelayStream, stream_delay_metrics
from participation.patterns import Cyclic


def brute_force(mask):
    """FedSUM eqs. (2)–(4) literally, one round at a time (§2.2)."""
    rounds, n = mask.shape
    a = [-1] * n
    lasts, taus = [], []
    for t in range(rounds):
        for i in range(n):
            if mask[t, i]:
                a[i] = t
        lasts.append(list(a))
        taus.append(max(t - a[i] for i in range(n)))
    return np.array(lasts), np.array(taus)


def longest_absence(column):
    runs = [len(list(group)) for present, group in itertools.groupby(column) if not present]
    return max(runs, default=0)


masks = st.integers(1, 40).flatmap(
    lambda n: arrays(bool, st.tuples(st.integers(1, 60), st.just(n)),
                     elements=st.booleans() | st.sampled_from([False, False, False])))


@given(masks)
def test_matches_brute_force_definition(mask):
    lasts, taus = brute_force(mask)
    assert np.array_equal(last_selection(mask), lasts)
    assert np.array_equal(per_round_delay(mask), taus)
    m = delay_metrics(Trace(mask))
    assert m.tau_max == taus.max() and m.tau_avg == pytest.approx(taus.mean())


@given(masks)
def test_tau_max_is_longest_absence_run(mask):
    assert delay_metrics(mask).tau_max == max(longest_absence(mask[:, i]) for i in range(mask.shape[1]))


@given(masks)
def test_structural_identities(mask):
    tau = per_round_delay(mask)
    m = delay_metrics(mask)
    assert m.tau_avg <= m.tau_max
    assert (np.diff(tau) <= 1).all()                       # τ_{t+1} ≤ τ_t + 1
    assert (tau <= np.arange(mask.shape[0]) + 1).all()     # never-selected clients give t + 1
    a = last_selection(mask)
    # FedSUM Lemma B.2: min_i a_{i, k+τ_max} ≥ k while k + τ_max ≤ T − 1.
    for k in range(mask.shape[0] - m.tau_max):
        assert a[k + m.tau_max].min() >= k
    # First-selection identity (derived here; the F_0 term uses it, proof of
    # Lemma C.4, eq. (22)):
    # #{t : i ∉ A_t} ≤ τ_max.
    assert ((a < 0).sum(axis=0) <= m.tau_max).all()


@pytest.mark.slow
@given(masks, masks)
def test_batch_equals_each_trace(first, second):
    rounds, n = min(first.shape[0], second.shape[0]), min(first.shape[1], second.shape[1])
    batch = np.stack([first[:rounds, :n], second[:rounds, :n]])
    m = delay_metrics(batch)
    for r in range(2):
        single = delay_metrics(batch[r])
        assert np.array_equal(m.tau[r], single.tau)
        assert m.tau_max[r] == single.tau_max and m.tau_avg[r] == single.tau_avg


@given(masks)
def test_streaming_forms_agree(mask):
    expected = per_round_delay(mask)
    by_ids = stream_delay_metrics((np.flatnonzero(row) for row in mask), mask.shape[1], keep_tau=True)
    by_rows = stream_delay_metrics(iter(mask), mask.shape[1], as_ids=False, keep_tau=True)
    assert np.array_equal(by_ids.tau, expected) and np.array_equal(by_rows.tau, expected)
    assert by_ids.tau_max == expected.max() and by_ids.tau_avg == pytest.approx(expected.mean())


@pytest.mark.slow
def test_stream_memory_stays_linear_in_clients():
    rng = np.random.default_rng(3)
    n, rounds = 50, 20_000
    mask = rng.random((rounds, n)) < np.linspace(0.02, 0.9, n)  # frequent and rare clients
    stream = DelayStream(n, keep_tau=True)
    for row in mask:
        stream.push_ids(np.flatnonzero(row))
    assert stream._queue_client.size <= 4 * n + 16
    assert np.array_equal(stream.result().tau, per_round_delay(mask))


def test_deep_lifting_on_sparse_trace():
    rng = np.random.default_rng(0)
    mask = rng.random((3000, 5)) < 0.002  # τ in the hundreds to thousands: many doubling levels
    assert np.array_equal(per_round_delay(mask), brute_force(mask)[1])


def test_word_boundaries():
    rng = np.random.default_rng(1)
    for n in (63, 64, 65, 128, 130):
        mask = rng.random((80, n)) < 0.15
        assert np.array_equal(per_round_delay(mask), brute_force(mask)[1]), n


@pytest.mark.parametrize("n, s", [(100, 30), (100, 7), (10, 3), (10, 4), (100, 1), (100, 100), (100, 20)])
def test_cyclic_tau_max(n, s):
    rounds = 3 * n
    assert delay_metrics(Cyclic(n, s).sample(rounds)).tau_max == -(-n // s) - 1


def test_full_participation_has_zero_delay():
    m = delay_metrics(np.ones((5, 4), dtype=bool))
    assert m.tau_max == 0 and m.tau_avg == 0


def test_final_round_option_uses_printed_range():
    mask = np.array([[1, 0], [1, 0], [1, 0]], dtype=bool)  # client 1 never selected
    printed = delay_metrics(mask, final_round=True)
    default = delay_metrics(mask[:2])
    assert default.tau_max == 2 and printed.tau_max == 3
    assert printed.tau_avg == default.tau_avg == 1.5


@pytest.mark.parametrize("bad, message", [
    (np.zeros((3,), dtype=bool), "shape"),
    (np.zeros((0, 3), dtype=bool), "at least one round"),
    (np.full((2, 2), 0.5), "dtype"),
    (np.array([[0, 2]]), "found 2"),
])
def test_invalid_input(bad, message):
    with pytest.raises(ValueError, match=message):
        delay_metrics(bad)


def test_stream_rejects_bad_rounds():
    stream = DelayStream(3)
    with pytest.raises(ValueError, match="client id 3"):
        stream.push_ids([0, 3])
    with pytest.raises(ValueError, match="twice"):
        stream.push_ids([1, 1])
    with pytest.raises(ValueError, match="no rounds"):
        stream.tau_avg
