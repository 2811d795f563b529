"""τ_max and τ_avg of ``Uniform`` (FedSUM Case 1) traces from the S ids of each round.

Method "subsets" of ``monte_carlo``: every round draws only the S selected client ids,
never an N-wide mask, and the delays follow from one backward pass over the rounds.

Delays from the ids. With next_i(r) the first selection of client i after round r (T if
none) and D_r = max{next_i(r) : i ∈ S_r} (D_{−1} = max_i of i's first selection), the
cover time c(x) = max_i (first selection of i at a round ≥ x, T if none) is
c(x) = max(D_{−1}, D_0, …, D_{x−1}) for 0 ≤ x ≤ T [derived: for each i the first selection
at or after x is next_i of its last selection before x (or its first selection), so c(x) is
at most that prefix maximum; and each term of it (next_i(r) with r < x, or a first
selection) is either below x ≤ c(x) or i's first selection at or after x, so at most c(x)].
As in :mod:`.gaps` (m_t = min_i a_{i,t} ≥ x iff c(x) ≤ t),

    Σ_t τ_t = T(T+1)/2 − Σ_{x≤T} (T − c(x)),      τ_max = max_{x≤T} (c(x) − x).

D_r comes from one pass over the rounds from the last to the first, keeping next_i for
every client (initially T): D_r = max of next_i over S_r, then next_i = r for i in S_r —
a gather, a maximum and a scatter of S values a round, vectorised over the replicates of
a chunk; at the end next_i is i's first selection, whose maximum is D_{−1}. O(T·S) per
replicate instead of O(T·N).

Subsets, exactly. Each round's ids come from one of two exact samplers of a uniform
S-subset, picked from (N, S) alone (:func:`uses_choice`):

* Floyd's algorithm (J. Bentley and R. W. Floyd, "A sample of brilliance", CACM 30(9), 1987):
  for j = 0..S−1 draw k_j uniform on {0, …, N−S+j} and take k_j, or N−S+j when k_j was
  already taken. By induction the set after step j is a uniform (j+1)-subset of
  {0, …, N−S+j}: a given (j+1)-subset A arises from the j-subset A minus N−S+j with k_j in
  it or equal to N−S+j (j + 1 values, when N−S+j ∈ A), or from one of its j+1 j-subsets with
  k_j the missing element (when N−S+j ∉ A), probability (j+1)/C(N−S+j, j)/(N−S+j+1) =
  1/C(N−S+j+1, j+1) either way. The k_j are unbiased bounded integers (D. Lemire's
  multiply-shift with rejection, ACM TOMACS 29(1), 2019, on 32-bit words; a rejected word,
  a fraction below N/2^32, is replaced by ``Generator.integers`` on a separate stream),
  drawn for a unit of rounds at once; the "already taken" test runs column by column over a block of
  rounds × replicates with a byte map of block × N cells (a few MB, in cache).
* ``Generator.choice(N, S, replace=False, shuffle=False)`` row by row (numpy's Floyd with a
  hash set, or a partial Fisher–Yates shuffle), when S and N are large enough that its
  per-call cost is the smaller.

Streams. The rounds of replicate r come in units of ``unit_rounds(S)`` rounds; unit u is
drawn from the generator keyed by (seed, r, tag, u), in round order, so a replicate does
not depend on the chunk size, the executor or its workers, and the first T rounds are the
same whatever the horizon. These streams differ from ``sample_batch``'s, so "subsets" and
"trace" give different, equally distributed, samples.
"""
from __future__ import annotations

import numpy as np

from ...patterns import Uniform
from ...patterns.base import BlockPattern
from .sampler import FunctionSampler

#: Spawn-key tags of this method's streams (the patterns' keys are (replicate, block)).
_SUBSET_STREAM, _REJECT_STREAM = 0x5B5, 0x5B6
#: Random values per unit of rounds (a unit is ⌈2^16 / S⌉ rounds).
UNIT_VALUES = 1 << 16
#: Byte map of the "already taken" test: at least this many rows (rounds × replicates) a
#: block when they fit in ``_MAP_MAX`` bytes, else about ``_MAP_BYTES``.
_MAP_ROWS, _MAP_BYTES, _MAP_MAX = 2048, 1 << 20, 1 << 22
#: Bytes a chunk of replicates aims at, and the most replicates a chunk holds.
CHUNK_BYTES, MAX_CHUNK = 1 << 26, 512


def applies(pattern) -> bool:
    """Whether ``pattern`` draws its traces as ``Uniform`` does."""
    return (isinstance(pattern, Uniform) and type(pattern)._from_uniforms is Uniform._from_uniforms
            and type(pattern)._generate is BlockPattern._generate)


def uses_choice(n: int, s: int) -> bool:
    """Whether rounds are drawn by ``Generator.choice`` (about 5 µs + 12 ns an id) rather
    than by the vectorised Floyd (about 11 + N/800 ns an id, measured for N from 10^2 to
    10^5)."""
    return 5000 / s + 1 < n / 800


def unit_rounds(s: int) -> int:
    """Rounds per keyed unit: about ``UNIT_VALUES`` ids."""
    return -(-UNIT_VALUES // s)


def _block_rounds(n: int, count: int, unit: int) -> int:
    """Rounds per block of the Floyd test (its byte map holds block × count rows of N cells)."""
    rows = min(max(_MAP_BYTES // n, _MAP_ROWS), _MAP_MAX // n)
    return int(np.clip(rows // count, 1, unit))


def chunk_size(pattern: Uniform, rounds: int) -> int:
    """Replicates per chunk: the most (up to ``MAX_CHUNK``) whose :func:`chunk_bytes` fit in
    ``CHUNK_BYTES``, so that the per-round gather and scatter handle many replicates a call."""
    low, high = 1, MAX_CHUNK
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if chunk_bytes(pattern, rounds, mid) <= CHUNK_BYTES else (low, mid - 1)
    return low


def chunk_bytes(pattern: Uniform, rounds: int, count: int) -> int:
    """Peak bytes of :func:`subset_chunk` for ``count`` replicates: next_i (int32), the cover
    times with their prefix maximum (int64, twice) and one unit of ids: for Floyd its
    candidates (int32), one replicate's 64-bit products, and a block's byte map, positions
    and ids (int64); for ``choice`` the ids (int64)."""
    n, s = pattern.n_clients, pattern.per_round
    width = min(unit_rounds(s), rounds) * s          # ids in one unit of one replicate
    common = count * (4 * n + 16 * (rounds + 1) + 8 * s)
    if uses_choice(n, s):
        return common + count * 8 * width + 64 * s
    rows = count * _block_rounds(n, count, min(unit_rounds(s), rounds))   # rows of a Floyd block
    return common + count * 4 * width + 20 * width + rows * (n + 16 * s)


def _key(root: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(int(k) for k in key))


def _floyd_candidates(root, replicate: int, unit: int, width: int, n: int, s: int) -> np.ndarray:
    """k_j of Floyd's algorithm for ``width`` rounds of one unit: (s, width), int32 (int64 for
    N > 2^31; N ≤ 2^32), k_j uniform on 0..N−S+j, from 32-bit words by Lemire's multiply-shift;
    rejected words (low half of the product below 2^32 mod range) are redrawn, in round order,
    from a separate stream."""
    ranges = np.arange(n - s + 1, n + 1, dtype=np.uint64)
    words = np.random.PCG64(_key(root, replicate, _SUBSET_STREAM, unit)).random_raw(-(-width * s // 2))
    x = words.view(np.uint32)[: width * s].reshape(width, s)
    product = x * ranges
    rejected = (product & np.uint64(0xFFFF_FFFF)) < (np.uint64(1 << 32) % ranges)
    product >>= np.uint64(32)
    if rejected.any():
        extra = np.random.Generator(np.random.PCG64(_key(root, replicate, _REJECT_STREAM, unit)))
        for row, col in zip(*np.nonzero(rejected)):
            product[row, col] = extra.integers(0, int(ranges[col]))
    return product.T.astype(np.int32 if n <= 1 << 31 else np.int64)


def _blocks(n: int, s: int, rounds: int, root, first: int, count: int):
    """(start, ids) for blocks of rounds from the last to the first: ids[l, :, j] are the S
    distinct clients of round start + l of replicate first + j, plus j·N, as int64."""
    unit = unit_rounds(s)
    offsets = np.arange(count, dtype=np.intp) * n
    replicates = range(first, first + count)
    choice = uses_choice(n, s)
    if not choice:
        block = _block_rounds(n, count, min(unit, rounds))
        rows = (np.arange(block * count, dtype=np.intp) * n).reshape(block, count)  # byte-map row of (l, j)
        shift = rows - offsets                                                      # byte-map row − j·N
        taken = np.zeros(count * block * n, dtype=bool)
        fallback = np.arange(n - s, n, dtype=np.intp)                               # N − S + j
    for u in range(-(-rounds // unit) - 1, -1, -1):
        start, width = u * unit, min(unit, rounds - u * unit)
        if choice:
            ids = np.empty((width, s, count), dtype=np.intp)
            for j, rep in enumerate(replicates):
                rng = np.random.Generator(np.random.PCG64(_key(root, rep, _SUBSET_STREAM, u)))
                for l in range(width):
                    ids[l, :, j] = rng.choice(n, s, replace=False, shuffle=False)
            ids += offsets
            yield start, ids
            ids = None                               # the caller has let it go: one unit held at a time
            continue
        k = np.empty((count, s, width), dtype=np.int32)
        for j, rep in enumerate(replicates):
            k[j] = _floyd_candidates(root, rep, u, width, n, s)
        for lo in range(((width - 1) // block) * block, -1, -block):
            size = min(block, width - lo)
            base = rows[:size]
            chosen = []
            for j in range(s):                       # Floyd, one column for all rows of the block
                position = k[:, j, lo : lo + size].T + base
                if j:
                    np.add(base, fallback[j], out=position, where=taken[position])
                taken[position] = True
                chosen.append(position)
            ids = np.empty((size, s, count), dtype=np.intp)
            for j, position in enumerate(chosen):
                taken[position] = False
                np.subtract(position, shift[:size], out=ids[:, j])
            chosen = None
            yield start + lo, ids
            ids = None
        k = None


def subsets(pattern: Uniform, rounds: int, root, first: int, count: int) -> np.ndarray:
    """The selected clients of replicates first..first+count−1 as method "subsets" draws
    them: (count, rounds, S) int64, each row sorted (for tests and inspection)."""
    n, s = pattern.n_clients, pattern.per_round
    out = np.empty((count, rounds, s), dtype=np.intp)
    offsets = np.arange(count, dtype=np.intp) * n
    for start, ids in _blocks(n, s, rounds, root, first, count):
        out[:, start : start + ids.shape[0]] = (ids - offsets).transpose(2, 0, 1)
    out.sort(axis=2)
    return out


def subset_chunk(pattern: Uniform, rounds: int, root, first: int, count: int):
    """τ_max (int64) and τ_avg of replicates ``first .. first + count − 1`` over rounds 0..rounds−1."""
    n, s = pattern.n_clients, pattern.per_round
    if s == n:                                       # every client every round
        return np.zeros(count, dtype=np.int64), np.zeros(count)
    index = np.int32 if rounds < 1 << 31 else np.int64
    after = np.full(count * n, rounds, dtype=index)          # next_i: first selection after the current round
    cover = np.empty((rounds + 1, count), dtype=np.int64)   # row r + 1: D_r; row 0: D_{−1}
    largest = np.maximum.reduce
    for start, ids in _blocks(n, s, rounds, root, first, count):
        for l in range(ids.shape[0] - 1, -1, -1):
            selected = ids[l]
            largest(after[selected], axis=0, out=cover[start + l + 1])
            after[selected] = start + l
        ids = selected = None                        # freed before the next block is drawn
    cover[0] = after.reshape(count, n).max(axis=1)
    np.maximum.accumulate(cover, axis=0, out=cover)          # c(x), x = 0..T
    tau_max = (cover - np.arange(rounds + 1)[:, None]).max(axis=0)
    tau_sum = rounds * (rounds + 1) // 2 - (rounds - cover).sum(axis=0)
    return tau_max, tau_sum / rounds


#: Method "subsets": the law is the pattern itself (``Uniform`` where :func:`applies`).
SAMPLER = FunctionSampler("subsets", "a Uniform pattern and no device", __name__, accepts="applies",
                          size="chunk_size", peak="chunk_bytes", draw="subset_chunk")
