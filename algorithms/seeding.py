"""Seed words of many spawned ``numpy.random.SeedSequence`` children at once.

``spawn_words(entropy, t, k)`` equals ``SeedSequence(entropy, spawn_key=(t, k)).generate_state(1,
numpy.uint64)`` element-wise, for arrays of t and k below 2^32, with one pass of uint32 array
arithmetic instead of one SeedSequence object per pair. The steps are numpy's SeedSequence
(itself M. E. O'Neill's improved ``seed_seq``, "Developing a seed_seq alternative", 2015):

* the entropy is assembled as the 32-bit words of ``entropy`` (little-endian, zero-padded to the
  pool size 4 when a spawn key follows) then one word each for t and k;
* the pool of 4 words is filled with hashmix(word) (hash constant starting at 0x43b0d7e5 and
  multiplied by 0x931e8875 at every use; v ← (v ⊕ h)·h', v ← v ⊕ (v ≫ 16)), every pool word is
  mixed with the hashmix of every other one (mix(x, y) = (0xca01f9dd·x − 0x4973f715·y) mod 2^32,
  then ⊕ ≫ 16), and the words past the pool are mixed into every pool word in turn;
* two output words come from the first two pool words with the hash constant starting at
  0x8b51f9dd and multiplied by 0x58f38ded, and form one uint64 (low word first).

The hash constants do not depend on the data, so the whole batch shares them. Equality with
numpy's own SeedSequence is tested for single- and multi-word entropies and the extreme t, k.
"""
from __future__ import annotations

import numpy as np

__all__ = ["spawn_words"]

_POOL = 4
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = np.uint32(0xCA01F9DD), np.uint32(0x4973F715)
_SHIFT = np.uint32(16)
_MASK = 0xFFFFFFFF


def _words(value: int) -> list[int]:
    words = []
    while True:
        words.append(value & _MASK)
        value >>= 32
        if not value:
            return words


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = _MIX_L * x - _MIX_R * y
    return r ^ (r >> _SHIFT)


def spawn_words(entropy: int, t, k) -> np.ndarray:
    """uint64 array of SeedSequence(entropy, spawn_key=(t, k)).generate_state(1, uint64) over
    the broadcast of ``t`` and ``k`` (integers in [0, 2^32))."""
    t, k = np.broadcast_arrays(np.asarray(t), np.asarray(k))
    if t.size and (min(t.min(), k.min()) < 0 or max(t.max(), k.max()) > _MASK):
        raise ValueError("spawn_words takes t and k in [0, 2^32)")
    run = _words(int(entropy))
    run += [0] * (_POOL - len(run))
    columns = [np.full(t.shape, w, dtype=np.uint32) for w in run] + [t.astype(np.uint32), k.astype(np.uint32)]
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK
        value = value * np.uint32(hash_const)
        return value ^ (value >> _SHIFT)

    with np.errstate(over="ignore"):
        pool = [hashmix(columns[i]) for i in range(_POOL)]
        for source in range(_POOL):
            for target in range(_POOL):
                if source != target:
                    pool[target] = _mix(pool[target], hashmix(pool[source]))
        for source in range(_POOL, len(columns)):
            for target in range(_POOL):
                pool[target] = _mix(pool[target], hashmix(columns[source]))
        out, hash_const = [], _INIT_B
        for word in pool[:2]:
            value = word ^ np.uint32(hash_const)
            hash_const = (hash_const * _MULT_B) & _MASK
            value = value * np.uint32(hash_const)
            out.append((value ^ (value >> _SHIFT)).astype(np.uint64))
    return out[0] | (out[1] << np.uint64(32))
