"""The counter-based noise: Philox4x32-10 against its authors' known answers and a plain
integer implementation, the uniforms and normals built from it, and the independence of a
draw from the rows drawn beside it."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from algorithms.noise import NoiseStream
from algorithms.philox import MASK32, box_muller, philox4x32, uniform53


def philox_reference(counter, key, rounds=10):
    """Philox4x32 with Python integers, from Salmon et al. (SC'11), Section 4.2."""
    c, (k0, k1) = list(counter), key
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c[3] ^ k1) & MASK32, p0 & MASK32]
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c


def words(counter, key):
    as_t = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    return [int(w) for w in philox4x32(*map(as_t, counter), *map(as_t, key))]


# Known-answer vectors of the Random123 library (philox4x32, 10 rounds).
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox_known_answers(counter, key, want):
    assert words(counter, key) == list(want)
    assert philox_reference(counter, key) == list(want)


@given(st.lists(st.integers(0, MASK32), min_size=6, max_size=6))
def test_philox_equals_the_integer_reference(values):
    counter, key = values[:4], values[4:]
    assert words(counter, key) == philox_reference(counter, key)


def test_philox_broadcasts_counters_against_keys():
    lanes = torch.arange(5, dtype=torch.int64)[None, :]
    keys = torch.tensor([[1, 2], [3, MASK32]], dtype=torch.int64)
    out = philox4x32(lanes, torch.tensor([[7]]), torch.tensor([[9]]), torch.tensor([[11]]), keys[:, :1], keys[:, 1:])
    for b in range(2):
        for j in range(5):
            want = philox_reference((j, 7, 9, 11), tuple(int(v) for v in keys[b]))
            assert [int(w[b, j]) for w in out] == want


def test_uniform53_is_exact_and_spans_the_unit_interval():
    high = torch.tensor([0, MASK32, 0, 1], dtype=torch.int64)
    low = torch.tensor([0, MASK32, 2**11, 0], dtype=torch.int64)
    u = uniform53(high, low)
    assert u[0] == 0 and u[1] == 1 - 2.0**-53 and u[2] == 2.0**-53 and u[3] == 2.0**-32


def test_box_muller_at_the_edges_of_its_inputs():
    zero = torch.zeros(1, dtype=torch.int64)
    top = torch.full((1,), MASK32, dtype=torch.int64)
    a, b = box_muller((top, top, zero, zero))           # u = 1: radius 0
    assert a.item() == 0 and b.item() == 0
    a, b = box_muller((zero, zero, zero, zero))         # u = 2^-53: the largest radius, √(106 ln 2)
    assert a.item() == pytest.approx(math.sqrt(-2 * math.log(2.0**-53)), rel=1e-15) and b.item() == 0


def test_normals_and_uniforms_have_their_laws():
    noise = NoiseStream(2024)
    clients = torch.arange(400)
    z = torch.cat([noise.draws(t, 0, clients).normal(25).flatten() for t in range(10)]).numpy()
    u = torch.cat([noise.draws(t, 0, clients).uniform(25).flatten() for t in range(10)]).numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 5 / math.sqrt(z.size)
    assert ((u >= 0) & (u < 1)).all()


def test_a_row_is_the_same_whoever_is_drawn_beside_it():
    noise = NoiseStream(7)
    full = noise.draws(3, 2, torch.arange(10)).normal(6)
    for i in (0, 4, 9):
        assert torch.equal(noise.draws(3, 2, torch.tensor([i])).normal(6), full[i:i + 1])
    some = torch.tensor([1, 5, 8])
    assert torch.equal(noise.draws(3, 2, some).normal(6), full[some])
    # a wider draw extends a narrower one
    assert torch.equal(noise.draws(3, 2, some).normal(9)[:, :6], full[some])


def test_rows_of_a_batch_draw_with_their_own_runs_keys():
    batch = NoiseStream([5, 6, 7])
    runs, clients = torch.tensor([0, 0, 2, 2, 2]), torch.tensor([1, 3, 0, 1, 3])
    got = batch.draws(4, 1, clients, runs).uniform(3)
    for row, (b, i) in enumerate(zip(runs.tolist(), clients.tolist())):
        alone = NoiseStream([5, 6, 7][b]).draws(4, 1, torch.tensor([i])).uniform(3)
        assert torch.equal(got[row:row + 1], alone)


def test_draws_differ_across_seeds_rounds_steps_clients_and_kinds():
    base = NoiseStream(1).draws(0, 0, torch.tensor([0])).uniform(4)
    others = [NoiseStream(2).draws(0, 0, torch.tensor([0])).uniform(4),
              NoiseStream(1).draws(1, 0, torch.tensor([0])).uniform(4),
              NoiseStream(1).draws(0, 1, torch.tensor([0])).uniform(4),
              NoiseStream(1).draws(0, 0, torch.tensor([1])).uniform(4)]
    assert all(not torch.equal(base, other) for other in others)
    normal = NoiseStream(1).draws(0, 0, torch.tensor([0])).normal(4)
    assert not torch.equal(torch.special.ndtr(normal), base)


def test_prefetched_draws_equal_draws_made_one_by_one():
    noise = NoiseStream([11, 12])
    rounds = [(t, torch.tensor([0, 1, 1]), torch.tensor([2, 0, 3])) for t in range(5)]
    covered = noise.prefetch(rounds, 3, "normal", 4)
    assert covered == 5
    fresh = NoiseStream([11, 12])
    for t, runs, clients in rounds:
        for k in range(3):
            assert torch.equal(noise.draws(t, k, clients, runs).normal(4), fresh.draws(t, k, clients, runs).normal(4))


def test_a_subset_of_prefetched_rows_reads_the_prefetch():
    noise = NoiseStream([3, 4])
    runs, clients = torch.tensor([0, 0, 1, 1, 1]), torch.tensor([1, 4, 0, 2, 3])
    noise.prefetch([(2, runs, clients)], 1, "normal", 5)
    some = torch.tensor([0, 3, 4])
    got = noise.draws(2, 0, clients[some], runs[some]).normal(5)
    assert torch.equal(got, NoiseStream([3, 4]).draws(2, 0, clients[some], runs[some]).normal(5))
    other = noise.draws(2, 0, torch.tensor([3]), torch.tensor([0])).normal(5)     # not prefetched: computed
    assert torch.equal(other, NoiseStream([3, 4]).draws(2, 0, torch.tensor([3]), torch.tensor([0])).normal(5))


def test_prefetched_draws_read_in_float32_equal_direct_float32_draws():
    noise = NoiseStream(4)
    clients = torch.tensor([0, 2])
    noise.prefetch([(0, torch.zeros(2, dtype=torch.long), clients)], 1, "uniform", 3)
    cached = noise.draws(0, 0, clients)
    assert torch.equal(cached.uniform(3), NoiseStream(4).draws(0, 0, torch.tensor([0, 2])).uniform(3))
    assert torch.equal(cached.uniform(3, torch.float32),
                       NoiseStream(4).draws(0, 0, torch.tensor([0, 2])).uniform(3, torch.float32))


def test_a_prefetch_stops_at_its_memory_budget():
    noise = NoiseStream(3)
    rounds = [(t, torch.zeros(50, dtype=torch.long), torch.arange(50)) for t in range(10)]
    assert noise.prefetch(rounds, 2, "normal", 100, budget_bytes=2**20) < 10
    assert noise.prefetch(rounds[:1], 2, "normal", 100, budget_bytes=1) == 1


def test_seed_words_are_keys_of_numpys_seed_sequence():
    stream = NoiseStream([0, 2**70 + 3])
    want = [list(np.random.SeedSequence(e).generate_state(2, np.uint32)) for e in (0, 2**70 + 3)]
    assert stream.keys.tolist() == [[int(w) for w in row] for row in want]
    assert stream.entropies == [0, 2**70 + 3]


@pytest.mark.parametrize("t, k", [(-1, 0), (2**32, 0), (0, 2**31)])
def test_counters_outside_their_words_are_refused(t, k):
    with pytest.raises(ValueError, match="2\\^32"):
        NoiseStream(0).draws(t, k, torch.tensor([0]))
