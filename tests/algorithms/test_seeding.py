"""The batched seed words equal numpy's SeedSequence, so the engine's noise is unchanged."""
import numpy as np
import pytest
import torch

from algorithms.noise import NoiseStream
from algorithms.seeding import spawn_words

ENTROPIES = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 12345, 2**127 + 2**64 + 5, 2**200 + 7]


def _numpy_word(entropy, t, k):
    return int(np.random.SeedSequence(entropy, spawn_key=(int(t), int(k))).generate_state(1, np.uint64)[0])


@pytest.mark.parametrize("entropy", ENTROPIES)
def test_spawn_words_equal_numpys_seed_sequence(entropy):
    rng = np.random.default_rng(entropy % 1000)
    t, k = rng.integers(0, 2**32, 40), rng.integers(0, 2**32, 40)
    t[:4], k[:4] = [0, 1, 2**32 - 1, 0], [0, 7, 2**32 - 1, 2**32 - 1]
    got = spawn_words(entropy, t, k)
    assert got.dtype == np.uint64
    assert [int(w) for w in got] == [_numpy_word(entropy, a, b) for a, b in zip(t, k)]


def test_spawn_words_broadcast_a_grid():
    words = spawn_words(99, np.arange(300)[:, None], np.arange(3)[None, :])
    assert words.shape == (300, 3)
    assert int(words[299, 2]) == _numpy_word(99, 299, 2) and int(words[0, 0]) == _numpy_word(99, 0, 0)


def test_spawn_words_refuse_keys_past_32_bits():
    with pytest.raises(ValueError, match="2\\^32"):
        spawn_words(1, [2**32], [0])


@pytest.mark.parametrize("t, k", [(0, 0), (255, 63), (256, 0), (1000, 5), (7, 64), (7, 500), (2**32 - 3, 1), (2**40, 2)])
def test_noise_stream_words_are_seed_sequence_words(t, k):
    """Within the cached blocks, past them (k ≥ 64, rounds near 2^32 and beyond), and in any order."""
    stream = NoiseStream(424242)
    assert stream.seed_word(t, k) == _numpy_word(424242, t, k)
    assert stream.seed_word(3, 2) == _numpy_word(424242, 3, 2)
    assert stream.seed_word(t, k) == _numpy_word(424242, t, k)


def test_a_generator_draws_what_the_seed_sequence_word_seeds():
    stream = NoiseStream(5)
    want = torch.Generator().manual_seed(_numpy_word(5, 12, 3))
    assert torch.equal(torch.randn(4, generator=stream.generator(12, 3)), torch.randn(4, generator=want))
