"""Monte-Carlo for independent clients whose probabilities repeat with a period: long absences only.

FedSUM's P3, p_t = (S/N)(0.3 sin(πt/5) + 0.7) (App. H.2), and FedAWE's trajectories
p_i(t) = (a sin(2πt/20) + b) p_i repeat every P rounds (10 and 20). For such clients the
long-absence sampling of :mod:`.gaps` carries over once every law is indexed by a phase.

Gaps. A selection at round a is followed by independent rounds a + 1, a + 2, … of
probabilities p_{(a+1) mod P}, p_{(a+2) mod P}, …; call φ = (a + 1) mod P its phase. The
gap G to the next selection has P(G = g | φ) = w_φ(g) = p_{φ+g−1} Π_{k<g−1} (1 − p_{φ+k})
(indices mod P). With a threshold H, a gap is long when G ≥ H, with probability
ρ_φ = Π_{k<H−1} (1 − p_{φ+k}); a long gap is H − 1 absent rounds then an ordinary gap G''
from phase φ + H − 1 (the rounds are independent), so G = H − 1 + G''.

Short runs. From a selection of phase φ, the short gaps before the next long one sum to S:

    P(S = s | φ) = u_φ(s) ρ_{φ+s},   u_φ(0) = 1,   u_φ(s) = Σ_{g<H} u_φ(s − g) w_{φ+s−g}(g),

u_φ(s) being the probability that the short gaps from φ reach offset s (split at the
last gap before s). The tail V_φ(r) = P(S ≥ r | φ) is, splitting at the last point s' < r
of the short path (the next gap, short, jumps to r or beyond),

    V_φ(r) = Σ_{d=1}^{H−1} u_φ(r − d) Σ_{g ≥ d, g < H} w_{φ+r−d}(g),

a sum of positive terms (no cancellation, so small tails keep their relative precision);
V_φ(r) − V_φ(r + 1) = P(S = r | φ) is checked by the tests. Given S = s, the path is drawn
gap by gap with P(first gap g | s, φ) ∝ w_φ(g) u_{φ+g}(s − g); given S ≥ r, with
∝ w_φ(g) V_{φ+g}(r − g) (V = 1 at r ≤ 0), then unconditioned (long with probability ρ).

Rows. Each (replicate, client) is a row started at the virtual selection −1 (phase 0):
S, then the long gap, then S from the new phase, and so on until the row passes T − 1 —
a walk over steps vectorised across the rows of a chunk, the draws of a step depending on
the phase the previous step ended in. The long intervals (a, e] give the cover times
c(x) = max{e : a < x} (≥ x) exactly where some long interval reaches x + H − 2, as in
:mod:`.gaps`. Elsewhere each client whose x falls in a short run needs only the run's first
point z ≥ y = x − (run start): with z' the last point before y and g = z − z' the gap over y,

    P(z', g) ∝ u_φ(z') w_{φ+z'}(g) u_{φ+z}(S − z)     (V_{φ+z}(S − z) for a run known to pass T),

a draw over at most (H − 1)² pairs, vectorised over every such (round, client); rounds later in
the same run start from the point found (the path is Markov). Tables are cut at T + 1 (a
larger S or G'' ends the row) or where V falls below 2^−60 (S beyond the cut is then walked
exactly, gap by gap, and so is its path when a round falls in it).

Draws are inversions of survival functions at a uniform U' = 1 − U ∈ (0, 1]: S is the
number of r ≥ 1 with V_φ(r) > U', G'' is one plus the number of g ≥ 1 with
Π_{k<g}(1 − p_{ψ+k}) > U'. A step reads one 64-bit word: its high half is U's top 32 bits for
S, its low half for G''. The top b ≤ 16 bits index a table that holds the value wherever no
survival value falls inside the cell; a cell that holds one is split by the next 8 bits; where
both levels leave the value open (P3: about 3 draws in 10^5), U's top b + 8 bits are completed by a
53-bit uniform from a keyed stream and the value is found by binary search. Every value is thus
the inversion at one uniform, whichever level gives it.

The period. The law sampled is that of p_t = p_{t mod P} with p_0..p_{P−1} as the pattern
gives them. A pattern that declares a period (``repeats_every``: ``Sine`` with a whole number
of rounds) is taken at its word; any other is taken as periodic when every later round agrees
with its phase to within ``PERIOD_TOLERANCE``. The sine's own evaluations at large t differ
from its first period by rounding (about 10^−14 for P3 at T = 2000), while the paper's
p_t = (S/N)(0.3 sin(πt/5) + 0.7) is exactly periodic, so the law sampled here is the paper's.

Streams: step words of replicate r are row r mod 256 of the stream keyed by
(seed, r // 256, tag), as in :mod:`.gaps`; a row that runs past the planned steps, a cut
S and its path use streams keyed by the replicate, the client and the step, and the
refinement of replicate r one stream keyed by r, read in the order (client, run, round); so
results do not depend on chunking or workers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...budget import memory_limit
from .gaps import GAPS_NEEDS
from .sampler import FunctionSampler
from .streams import WORD_BLOCK, block_words, keyed_bits
from .varying_gaps import varying_applies

#: Longest period looked for, and the largest threshold H.
MAX_PERIOD = 64
MAX_THRESHOLD = 64
#: Largest |p_t − p_{t mod P}| accepted as periodic (rounding of the pattern's own formula).
PERIOD_TOLERANCE = 1e-12
#: Survival below which the S tables are cut; an S beyond the cut (probability below this) is walked gap by gap.
_TAIL = 2.0**-60
#: Cost of one cell of the refinement's weights, in drawn steps (about 7 ns against 18 ns a step);
#: an unresolved round costs clients × (H − 1)² cells.
_CELL_COST = 0.4
#: Most multiply-adds the recurrences for u and V may take; larger thresholds are not considered.
_MAX_TABLE_WORK = 1 << 28
#: Bytes of the lookup tables (their cells have fewer bits when many phases share the budget).
_LOOKUP_BYTES = 1 << 24
#: Cells of the refinement's (queries, H − 1, H − 1) weight arrays handled at a time.
_QUERY_CELLS = 1 << 20
#: Most replicates a chunk holds (those of one keyed stream of step words, as in :mod:`.gaps`).
_WORD_BLOCK = WORD_BLOCK
_STEP_STREAM, _EXTEND_STREAM, _PATH_STREAM, _EXACT_STREAM, _REFINE_STREAM = 0x6B1, 0x6B2, 0x6B3, 0x6B4, 0x6B5


#: Cells (rounds × clients) of probabilities read at a time when a period is checked.
_SLAB_CELLS = 1 << 22


def find_period(p, rounds: int | None = None) -> int | None:
    """The smallest P ≤ ``MAX_PERIOD`` (at most half the rounds) with |p_t − p_{t mod P}| ≤
    ``PERIOD_TOLERANCE`` for every round and client, or None. ``p`` is an array (T, N), or a
    function (start, stop) → rows start..stop−1 with ``rounds`` given (read a slab at a time, so
    memory stays O(N) per round of a slab whatever T)."""
    read = (lambda start, stop: p[start:stop]) if rounds is None else p
    rounds = p.shape[0] if rounds is None else rounds
    head = np.asarray(read(0, min(rounds, 4 * MAX_PERIOD)), dtype=float)
    slab = max(1, _SLAB_CELLS // max(1, head.shape[1]))
    for period in range(1, min(MAX_PERIOD, rounds // 2) + 1):
        if np.abs(head[period:] - head[:-period]).max(initial=0.0) > PERIOD_TOLERANCE:
            continue
        first = head[:period]
        if all(np.abs(np.asarray(read(start, min(start + slab, rounds)), dtype=float)
                      - first[np.arange(start, min(start + slab, rounds)) % period]).max() <= PERIOD_TOLERANCE
               for start in range(period, rounds, slab)):
            return period
    return None


@dataclass(frozen=True, eq=False)
class PeriodicLaws:
    """Tables of every (group, phase) row k = g·P + φ of clients sharing a periodic sequence."""

    rounds: int
    period: int
    threshold: int
    p: np.ndarray          # (G, P) the sequences' first periods
    group_of: np.ndarray   # (N,) group of each client
    w: np.ndarray          # (G·P, H − 1) w_φ(g), g = 1..H−1
    rho: np.ndarray        # (G·P,) P(G ≥ H | φ)
    u: np.ndarray          # (G·P, cap) u_φ(s), s < cap
    v: np.ndarray          # (G·P, cap) V_φ(r), r = 1..cap (index r − 1)
    long_survival: np.ndarray  # (G·P, T) Π_{k<g}(1 − p_{ψ+k}), g = 1..T (index g − 1)
    short_lookup: "_Lookup"    # S by the top bits of U'
    long_lookup: "_Lookup"     # G'' likewise
    steps: int             # steps drawn per row at first

    @property
    def cap(self) -> int:
        return self.u.shape[1]

    @property
    def n_clients(self) -> int:
        return self.group_of.size

    @property
    def words(self) -> int:
        """64-bit words per replicate: one per step and client (its halves draw S and G'')."""
        return self.steps * self.n_clients

    def tail(self, row, r) -> np.ndarray:
        """V_row(r) with V = 1 for r ≤ 0 (``row`` and ``r`` broadcast together)."""
        r = np.asarray(r)
        return np.where(r <= 0, 1.0, self.v[row, np.clip(r - 1, 0, self.cap - 1)])


def _short_gap_weights(p: np.ndarray, threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """w (G·P, H − 1) and ρ (G·P,) from the first periods p (G, P)."""
    groups, period = p.shape
    cells = (np.arange(period)[:, None] + np.arange(max(threshold - 1, 0))[None, :]) % period  # phase of cell φ+k
    pp = p[:, cells]                                   # (G, P, H − 1)
    absent = np.cumprod(1.0 - pp, axis=2)
    before = np.concatenate([np.ones(pp.shape[:2] + (1,)), absent[:, :, :-1]], axis=2)
    w = (pp * before).reshape(groups * period, -1)
    rho = (absent[:, :, -1] if threshold > 1 else np.ones((groups, period))).reshape(-1)
    return w, rho


def _renewal_tables(p: np.ndarray, threshold: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """u_φ(s), s < cap, and V_φ(r), r = 1..cap, for every row, cap ≤ ``length``: cut where
    every V_φ falls below ``_TAIL``.

    The recurrences u(s) = Σ_d w_{φ+s−d}(d) u(s − d) and V(s) = Σ_d (Σ_{g≥d} w_{φ+s−d}(g)) u(s − d)
    (d = 1..H − 1) are linear in the last H − 1 values of u, with coefficients that depend on
    s mod P only. A block of K rounds (K a multiple of P, so every block starts at the same
    phase) is therefore one fixed linear map of the H − 1 values before it: its matrices are
    the recurrences run once from each unit state, and the blocks then cost one product each
    instead of K steps. Every entry of those matrices is a sum of products of probabilities,
    so V keeps its terms positive and small tails their precision."""
    groups, period = p.shape
    w, _ = _short_gap_weights(p, threshold)
    rows, taps = w.shape
    if taps == 0:                                      # H = 1: no short gaps, S = 0
        return np.ones((rows, 1)), np.zeros((rows, 1))
    tail_w = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]    # Σ_{g ≥ d} w(g), d = 1..H−1
    # weights by (s mod P): sel[m][k, d − 1] = w_{φ + s − d}(d) with s ≡ m, row k = g·P + φ
    phase = np.arange(rows) % period
    base = np.arange(rows) - phase
    d = np.arange(1, taps + 1)
    pick = [base[:, None] + (phase[:, None] + m - d[None, :]) % period for m in range(period)]
    sel = np.stack([w[pick[m], d - 1] for m in range(period)])[:, :, ::-1]       # reversed: oldest first
    sel_tail = np.stack([tail_w[pick[m], d - 1] for m in range(period)])[:, :, ::-1]
    block = period * -(-_BLOCK_ROUNDS // period)
    # unit[:, b, taps + i]: u(s0 + i) from the state e_b (u(s0 − taps + b) = 1, the others 0), s0 ≡ 1 mod P
    unit = np.zeros((rows, taps, taps + block))
    unit[:, np.arange(taps), np.arange(taps)] = 1.0
    unit_tail = np.empty((rows, taps, block))
    for i in range(block):
        m = (1 + i) % period
        window = unit[:, :, i : i + taps]
        unit_tail[:, :, i] = np.einsum("kj,kbj->kb", sel_tail[m], window)
        unit[:, :, taps + i] = np.einsum("kj,kbj->kb", sel[m], window)
    step_u, step_v = unit[:, :, taps:], unit_tail          # (rows, taps, block)
    blocks = -(-length // block)
    u = np.zeros((rows, taps + blocks * block))           # u[:, taps + s] = u(s); zeros before s = 0
    v = np.zeros((rows, blocks * block))                  # v[:, s − 1] = V(s)
    u[:, taps] = 1.0
    cap = length
    for k in range(blocks):
        s0 = 1 + k * block
        state = u[:, s0 : s0 + taps]                      # u(s0 − taps) .. u(s0 − 1)
        v[:, s0 - 1 : s0 - 1 + block] = np.einsum("kb,kbi->ki", state, step_v)
        u[:, taps + s0 : taps + s0 + block] = np.einsum("kb,kbi->ki", state, step_u)[:, : u.shape[1] - taps - s0]
        below = np.flatnonzero(v[:, s0 - 1 : s0 - 1 + block].max(axis=0) < _TAIL)
        if below.size and s0 + int(below[0]) <= length:
            cap = s0 + int(below[0])
            break
    return u[:, taps : taps + cap].copy(), v[:, :cap].copy()


#: Rounds per block of the renewal recurrences (rounded up to a multiple of the period).
_BLOCK_ROUNDS = 64


#: Bits of the second-level cells (inside a first-level cell that a value falls in).
_FINE_BITS = 8


@dataclass(frozen=True, eq=False)
class _Lookup:
    """Inversion of survival functions by the top bits of U' = 1 − U: ``top[k, c]`` is the value
    for every U' of cell c of row k, or −1 − i where a value falls inside the cell, i being the row of
    ``fine`` that splits the cell into 2^8 cells by the next bits (−1 there: invert exactly)."""

    top: np.ndarray     # (rows, 2^bits) int32
    fine: np.ndarray    # (cells split, 2^8) int32
    bits: int

    @property
    def nbytes(self) -> int:
        return self.top.nbytes + self.fine.nbytes


def _counts_below(keys: np.ndarray, size: int) -> np.ndarray:
    """#{k ∈ keys : k < f} for f = 0..size−1, for sorted ``keys`` in [0, size), as int32."""
    lengths = np.diff(keys + 1, prepend=0, append=size)
    return np.repeat(np.arange(keys.size + 1, dtype=np.int32), lengths)


def _lookup(survival: np.ndarray, bits: int, offset: int) -> _Lookup:
    """The two-level tables of ``offset + #{j : survival[k, j] > U'}`` for every row k.

    U' ∈ (1 − (c + 1)/2^b, 1 − c/2^b] in cell c, so a value s lies in the cell
    c = 2^b − ⌈s·2^b⌉ (the scaling by a power of two is exact, and so is the ceiling); a cell
    holding no value has, for every U' in it, the count of the values in the cells before it,
    and a cell holding some is split the same way at b + 8 bits. The counts come from the
    sorted cell keys of the values, one step function over all rows."""
    rows, width = survival.shape
    cells, fine_bits = 1 << bits, bits + _FINE_BITS
    row, _ = np.nonzero(survival > 0)                 # a zero is never above U' > 0
    values = survival[survival > 0]
    fine_key = np.sort(row * (cells << _FINE_BITS) + (1 << fine_bits) - np.ceil(values * 2.0**fine_bits).astype(np.int64))
    flat, sub = fine_key >> _FINE_BITS, fine_key & ((1 << _FINE_BITS) - 1)   # row·2^b + cell, and the finer bits
    below = _counts_below(flat, rows * cells).reshape(rows, cells)
    below -= below[:, :1]                              # values in the cells before, in the same row
    top = below + np.int32(offset)
    split_flat, index = np.unique(flat, return_inverse=True)  # cells holding values; the one of each value
    np.put(top, split_flat, -1 - np.arange(split_flat.size, dtype=np.int32))
    inner = index * (1 << _FINE_BITS) + sub            # sorted: (split cell, finer bits) of each value
    fine = _counts_below(inner, split_flat.size << _FINE_BITS).reshape(split_flat.size, 1 << _FINE_BITS)
    fine -= fine[:, :1]
    fine += (np.int32(offset) + below.ravel()[split_flat])[:, None]
    np.put(fine, inner, -1)
    return _Lookup(top, fine, bits)


def _count_above(survival: np.ndarray, rows: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """#{j : survival[row, j] > U'} for each (row, U'): one searchsorted per distinct row."""
    out = np.empty(rows.size, dtype=np.int32)
    for k in np.unique(rows):
        at = np.flatnonzero(rows == k)
        out[at] = np.searchsorted(-survival[k], -uniform[at], side="left")
    return out


def _draw(lookup: _Lookup, survival: np.ndarray, offset: int, rows: np.ndarray, half: np.ndarray,
          exact) -> np.ndarray:
    """offset + #{j : survival[row, j] > U'} for each row and 32-bit draw ``half`` (the top bits of
    U = 1 − U'); ``exact(at)`` gives 53-bit uniforms V completing U = (top b + 8 bits + V)/2^(b+8)
    where both levels of the table leave the value open."""
    bits = lookup.bits
    index = rows.astype(np.intp) << bits
    index |= (half >> np.uint64(32 - bits)).astype(np.intp)
    values = lookup.top.ravel().take(index)             # int32
    split = np.flatnonzero(values < 0)
    if split.size:
        sub = (half[split] >> np.uint64(32 - bits - _FINE_BITS)).astype(np.intp) & ((1 << _FINE_BITS) - 1)
        finer = lookup.fine.ravel().take((-1 - values[split].astype(np.intp)) << _FINE_BITS | sub)
        values[split] = finer
        bad = split[finer < 0]
        if bad.size:
            prefix = (half[bad] >> np.uint64(32 - bits - _FINE_BITS)).astype(float)
            uniform_open = 1.0 - (prefix + exact(bad)) * 2.0 ** -(bits + _FINE_BITS)
            values[bad] = offset + _count_above(survival, rows[bad], uniform_open)
    return values


def _choose_threshold(p: np.ndarray, counts: np.ndarray, rounds: int) -> int:
    """H minimising (steps drawn) + (expected unresolved rounds) × N (H − 1)² ``_CELL_COST`` (the
    refinement's weights), among the H whose recurrences cost at most ``_MAX_TABLE_WORK``.

    With A_g(φ, H) = Π_{k<H−1} (1 − p_{g,φ+k}) the probability that a client of sequence g is
    absent on rounds x..x+H−2 (x of phase φ), a round is unresolved with probability at most
    Π_g (1 − A_g(φ, H))^{n_g}; a client draws about T·mean_φ(p_{g,φ} A_g(φ, H)) + 1 steps."""
    groups, period = p.shape
    most = min(MAX_THRESHOLD, 1 + max(1, _MAX_TABLE_WORK // max(1, p.size * 2 * (rounds + 1))))
    cells = (np.arange(period)[:, None] + np.arange(max(most - 1, 1))[None, :]) % period
    absent = np.concatenate([np.ones((groups, period, 1)), np.cumprod(1.0 - p[:, cells], axis=2)], axis=2)
    heights = np.arange(1, most + 1)
    a = absent[:, :, heights - 1]                     # (G, P, H): A_g(φ, H)
    drawn = rounds * np.einsum("g,gph->h", counts, p[:, :, None] * a) / period + counts.sum()
    with np.errstate(divide="ignore"):
        log_open = np.einsum("g,gph->ph", counts, np.log1p(-np.minimum(a, 1.0)))
    unresolved = np.where(heights <= 2, 0.0, rounds / period * np.exp(log_open).sum(axis=0))
    refine = counts.sum() * (heights - 1.0) ** 2 * _CELL_COST
    return int(heights[np.argmin(drawn + refine * unresolved)])


@lru_cache(maxsize=16)
def _laws_cached(p_bytes: bytes, shape: tuple, groups_bytes: bytes, rounds: int, threshold: int | None,
                 steps: int | None, cap: int | None) -> PeriodicLaws:
    p = np.frombuffer(p_bytes).reshape(shape)
    group_of = np.frombuffer(groups_bytes, dtype=np.int64)
    counts = np.bincount(group_of, minlength=shape[0]).astype(float)
    period = shape[1]
    h = _choose_threshold(p, counts, rounds) if threshold is None else threshold
    w, rho = _short_gap_weights(p, h)
    u, v = _renewal_tables(p, h, rounds + 1 if cap is None else cap)
    rows = p.size
    phase = np.arange(rows) % period
    base = np.arange(rows) - phase
    cells = base[:, None] + (phase[:, None] + np.arange(rounds)[None, :]) % period
    long_survival = np.cumprod(1.0 - p.reshape(-1)[cells], axis=1)   # g = 1..T
    bits = int(np.clip(math.floor(math.log2(_LOOKUP_BYTES / (8 * rows))), 8, 16))
    short_lookup = _lookup(v, bits, 0)
    long_lookup = _lookup(long_survival, bits, 1)
    if steps is None:
        steps = _planned_steps(p, rho, u, long_survival, h, rounds)
    for array in (w, rho, u, v, long_survival, short_lookup.top, short_lookup.fine, long_lookup.top, long_lookup.fine):
        array.flags.writeable = False
    return PeriodicLaws(rounds, period, h, p, group_of, w, rho, u, v, long_survival, short_lookup, long_lookup, steps)


def _planned_steps(p: np.ndarray, rho: np.ndarray, u: np.ndarray, long_survival: np.ndarray, threshold: int,
                   rounds: int) -> int:
    """Steps a row draws at first: the expected number to pass T plus 4.5 standard deviations
    (rows that fall short draw more afterwards, one step at a time).

    The step from phase φ is S + H − 1 + G''; its phases form a Markov chain whose stationary law
    π weights the per-phase means and variances (the dependence between consecutive steps is
    left out of the variance: the count only sizes the arrays)."""
    groups, period = p.shape
    rows, cap = u.shape
    phase = np.arange(rows) % period
    base = np.arange(rows) - phase
    s = np.arange(cap)
    p_short = u * rho[base[:, None] + (phase[:, None] + s[None, :]) % period]       # P(S = s | k)
    s_mean = p_short @ s / np.maximum(p_short.sum(axis=1), 1e-300)
    s_var = np.maximum(p_short @ (s.astype(float) ** 2) / np.maximum(p_short.sum(axis=1), 1e-300) - s_mean**2, 0)
    survive = np.concatenate([np.ones((rows, 1)), long_survival], axis=1)
    p_long = survive[:, :-1] - survive[:, 1:]                                        # P(G'' = g | ψ), g ≥ 1
    g = np.arange(1, p_long.shape[1] + 1, dtype=float)
    g_mean = p_long @ g + survive[:, -1] * g.size
    g_var = np.maximum(p_long @ g**2 - (p_long @ g) ** 2, 0.0)
    to_long = np.zeros((rows, period))                                               # P(ψ | φ)
    np.add.at(to_long, (np.repeat(np.arange(rows), cap), ((phase[:, None] + s[None, :] + threshold) % period).ravel()),
              p_short.ravel())
    out = np.zeros((rows, period))                                                   # P(next φ | ψ)
    np.add.at(out, (np.repeat(np.arange(rows), g.size), ((phase[:, None] + np.arange(1, g.size + 1)) % period).ravel()),
              p_long.ravel())
    steps = 1
    for group in range(groups):
        sl = slice(group * period, (group + 1) * period)
        a, b = to_long[sl], out[sl]
        chain = a @ b
        pi = np.full(period, 1.0 / period)
        for _ in range(200):
            pi = pi @ chain
            pi /= max(pi.sum(), 1e-300)
        mean_phase = s_mean[sl] + threshold - 1 + a @ g_mean[sl]
        var_phase = s_var[sl] + a @ g_var[sl]
        mu = float(pi @ mean_phase)
        var = float(pi @ (var_phase + (mean_phase - mu) ** 2))
        mu = max(mu, 1.0)
        count = (rounds + 1) / mu
        steps = max(steps, int(math.ceil(count + 4.5 * math.sqrt((rounds + 1) * var / mu**3) + 2)))
    return steps


def periodic_laws(p: np.ndarray, rounds: int, *, threshold: int | None = None, steps: int | None = None,
                  cap: int | None = None) -> PeriodicLaws | None:
    """The tables for probabilities ``p`` (T, N) if they repeat with a period (None otherwise).
    ``threshold``, ``steps`` and ``cap`` override the choices (tests use them to reach every path)."""
    p = np.asarray(p, dtype=float)
    period = find_period(p)
    return None if period is None else _laws_of_period(p[:period], rounds, threshold, steps, cap)


def _laws_of_period(first: np.ndarray, rounds: int, threshold=None, steps=None, cap=None) -> PeriodicLaws:
    """The tables for the first period ``first`` (P, N) of the clients' probabilities."""
    if threshold is not None and not 1 <= threshold <= MAX_THRESHOLD:
        raise ValueError(f"threshold must lie in [1, {MAX_THRESHOLD}], got {threshold}")
    sequences, group_of = _client_sequences(first)
    return _laws_cached(sequences.tobytes(), sequences.shape, group_of.tobytes(), int(rounds), threshold, steps, cap)


def _client_sequences(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct probability sequences (G, P) of the clients, sorted, and the group of each client
    (int64): what ``np.unique(first.T, axis=0, return_inverse=True)`` gives, without its sort of N
    rows when every client has the same sequence (FedSUM's P3: a minute at N = 10^7)."""
    if bool((first == first[:, :1]).all()):
        return np.ascontiguousarray(first[:, :1].T), np.zeros(first.shape[1], dtype=np.int64)
    sequences, group_of = np.unique(np.ascontiguousarray(first.T), axis=0, return_inverse=True)
    return np.ascontiguousarray(sequences), np.ascontiguousarray(group_of.ravel(), dtype=np.int64)


# ---------------------------------------------------------------------------- paths


def _generator(root, *key: int) -> np.random.Generator:
    return np.random.Generator(keyed_bits(root, *(int(k) for k in key)))


def short_path(laws: PeriodicLaws, row: int, total: int | None, until: float, rng: np.random.Generator):
    """Offsets of the selections of a short run from phase row ``row`` = g·P + φ, one uniform per
    gap: conditioned on S = ``total``, or (``total`` None) on S ≥ cap, walked until an offset
    reaches ``until`` or, past the cap, a long gap ends the run. Returns (offsets, S or None)."""
    period, taps = laws.period, laws.threshold - 1
    base, phase = row - row % laws.period, row % laws.period
    g = np.arange(1, taps + 1)
    offsets, at = [], 0
    while True:
        if total is not None and at == total:
            return np.asarray(offsets, dtype=np.int64), total
        if total is None and at >= until:
            return np.asarray(offsets, dtype=np.int64), None
        k = base + phase
        uniform = rng.random()
        if total is not None:
            left = total - at
            usable = g[g <= left]
            prob = laws.w[k, usable - 1] * laws.u[base + (phase + usable) % period, left - usable]
        elif at < laws.cap:
            usable = g
            left = laws.cap - at
            prob = laws.w[k] * laws.tail(base + (phase + g) % period, left - g)
        else:
            if uniform < laws.rho[k]:
                return np.asarray(offsets, dtype=np.int64), at
            usable = g
            prob = laws.w[k]
            uniform = (uniform - laws.rho[k]) / max(1.0 - laws.rho[k], 1e-300)
        cumulative = np.cumsum(prob)
        step = int(usable[min(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"), usable.size - 1)])
        at += step
        phase = (phase + step) % period
        offsets.append(at)


# ---------------------------------------------------------------------------- walking


def _words(laws: PeriodicLaws, root, first: int, count: int) -> np.ndarray:
    """(count, steps, N) words of replicates first..first+count−1."""
    return block_words(laws, root, first, count, _STEP_STREAM).reshape(count, laws.steps, laws.n_clients)


class _Walk:
    """The steps drawn, part by part in step order: each part holds rows (replicate-major, then
    client), the step index j, a_j, e_j and S_j (``S_j = cap``: S ≥ cap)."""

    def __init__(self, parts: list):
        self.parts = parts
        self._columns = None

    def columns(self) -> list[np.ndarray]:
        """The parts joined (once, when a refinement first needs them)."""
        if self._columns is None:
            self._columns = ([np.concatenate(column) for column in zip(*self.parts)] if self.parts
                             else [np.zeros(0, dtype=np.int64)] * 5)
        return self._columns

    def replicate(self, first_row: int, n: int) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(a_j, e_j, S_j), j = 0, 1, …, of each row first_row .. first_row + n − 1."""
        rows, step, starts, ends, short = self.columns()
        keep = np.flatnonzero((rows >= first_row) & (rows < first_row + n))
        keep = keep[np.lexsort((step[keep], rows[keep]))]
        out = {}
        for r in range(first_row, first_row + n):
            at = keep[rows[keep] == r]
            out[r] = (starts[at], ends[at], short[at])
        return out


def _step(laws: PeriodicLaws, base: np.ndarray, ends: np.ndarray, words: np.ndarray, rows: "_Rows") -> tuple:
    """One step of the given rows (phase-row bases g·P, last selections, one word each): S from
    the phase after the last selection (high half of the word), then the long gap (low half).
    Returns (a, e, S)."""
    period, h, cap = laws.period, laws.threshold, laws.cap
    k = (ends + 1) % period
    k += base
    s = _draw(laws.short_lookup, laws.v, 0, k, words >> np.uint64(32), lambda at: rows.exact(at, 0))
    if cap <= laws.rounds:
        for i in np.flatnonzero(s >= cap):
            # walked until a long gap ends the run, or past T + 1 (the row is then done, whatever S is:
            # where every window of H − 1 rounds holds a certain presence there is no long gap at all)
            total = short_path(laws, int(k[i]), None, laws.rounds + 1, rows.path(int(i)))[1]
            s[i] = laws.rounds + 1 if total is None else total
    a = ends + s
    psi = (a + h) % period
    psi += base
    e = _draw(laws.long_lookup, laws.long_survival, 1, psi, words & np.uint64(0xFFFF_FFFF),
              lambda at: rows.exact(at, 1))
    e += a + (h - 1)
    return a, e, s


class _Rows:
    """The rows of one step (replicate-major row numbers) and the keyed streams of their rare draws."""

    def __init__(self, root, first: int, n: int, rows: np.ndarray, step: int):
        self.root, self.first, self.n, self.rows, self.step = root, first, n, rows, step

    def exact(self, at: np.ndarray, which: int) -> np.ndarray:
        """53-bit uniforms completing a draw that both table levels leave open."""
        rows = self.rows[at].tolist()
        return np.array([_generator(self.root, self.first + r // self.n, _EXACT_STREAM, r % self.n, self.step,
                                    which).random() for r in rows])

    def path(self, i: int) -> np.random.Generator:
        """The stream of the short path of row ``rows[i]`` at this step (replayed by the refinement)."""
        r = int(self.rows[i])
        return _generator(self.root, self.first + r // self.n, _PATH_STREAM, r % self.n, self.step)


def _walk(laws: PeriodicLaws, root, first: int, count: int) -> _Walk:
    """Walk every row of replicates first..first+count−1 until it passes T − 1."""
    rounds, n, m = laws.rounds, laws.n_clients, laws.steps
    words = _words(laws, root, first, count)
    rows = np.arange(count * n, dtype=np.int64)
    base = np.tile(laws.group_of * laws.period, count).astype(np.int32)
    ends = np.full(count * n, -1, dtype=np.int32)
    parts = []
    everyone = True
    for j in range(m):
        step_words = words[:, j].reshape(count * n)
        if not everyone:
            step_words = step_words[rows]
        a, e, s = _step(laws, base, ends, step_words, _Rows(root, first, n, rows, j))
        parts.append((rows, np.full(rows.size, j, dtype=np.int32), a, e, s))
        going = e < rounds - 1
        if not going.all():
            everyone = False
            rows, base, ends = rows[going], base[going], e[going]
            if not rows.size:
                break
        else:
            ends = e
    for r, b, end in zip(rows.tolist(), base.tolist(), ends.tolist()):  # rows still short of T after m steps
        parts.append(_extend(laws, root, first, n, r, b, end))
    return _Walk(parts)


def _extend(laws, root, first, n, r, base, end) -> tuple:
    """Steps m, m + 1, … of row r until it passes T − 1, a word each from its own stream."""
    rounds = laws.rounds
    replicate, client = first + r // n, r % n
    bits = keyed_bits(root, replicate, _EXTEND_STREAM, client)
    out = []
    step_index = laws.steps
    row = np.array([r])
    while end < rounds - 1:
        a, e, s = _step(laws, np.array([base], dtype=np.int32), np.array([end], dtype=np.int32), bits.random_raw(1),
                        _Rows(root, first, n, row, step_index))
        out.append((step_index, int(a[0]), int(e[0]), int(s[0])))
        end = int(e[0])
        step_index += 1
    arr = np.array(out, dtype=np.int32).reshape(-1, 4)
    return np.full(arr.shape[0], r, dtype=np.int64), arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]


# ---------------------------------------------------------------------------- delays


def _cover(laws: PeriodicLaws, walk: _Walk, count: int) -> np.ndarray:
    """max(x, max{e : a < x}) over the drawn long intervals, for x < T, each replicate."""
    rounds, n = laws.rounds, laws.n_clients
    width = rounds + 1
    cover = np.zeros(count * width, dtype=np.int32)
    for rows, _, starts, ends, _ in walk.parts:
        keep = np.flatnonzero(starts < rounds - 1)
        index = (rows[keep] // n) * width
        index += starts[keep]
        index += 1
        np.maximum.at(cover, index, np.minimum(ends[keep], rounds).astype(np.int32, copy=False))
    cover = cover.reshape(count, width)[:, :rounds]
    np.maximum.accumulate(cover, axis=1, out=cover)
    return np.maximum(cover, np.arange(rounds, dtype=np.int32), out=cover)


def _first_point_at_or_after(laws: PeriodicLaws, k: np.ndarray, y: np.ndarray, left: np.ndarray, capped: np.ndarray,
                             uniform: np.ndarray) -> np.ndarray:
    """The first point z ≥ y of a short path from phase row k (offset 0), conditioned on reaching
    ``left`` exactly (or, where ``capped``, on reaching ``left`` or beyond), by inversion at ``uniform``.

    The path's last point z' < y and the gap g = z − z' it jumps over y with have probability
    ∝ u_k(z') w_{k+z'}(g) R(z), R(z) = u_{k+z}(left − z) (or V_{k+z}(left − z), 1 at left − z ≤ 0),
    over z' ∈ [y − H + 1, y − 1], z' ≥ 0, g ∈ [y − z', H − 1] (and z ≤ left when exact)."""
    period, taps, cap = laws.period, laws.threshold - 1, laws.cap
    base = k - k % period
    phase = k % period
    d = g = np.arange(1, taps + 1)                    # y − z', and the gap
    before = y[:, None] - d[None, :]                  # z' (Q, H − 1)
    z = before[:, :, None] + g[None, None, :]         # (Q, H − 1, H − 1)
    valid = (before[:, :, None] >= 0) & (g[None, None, :] >= d[None, :, None])
    valid &= capped[:, None, None] | (z <= left[:, None, None])
    start_u = laws.u[k[:, None], np.clip(before, 0, cap - 1)]                           # u_k(z')
    at_before = base[:, None] + (phase[:, None] + np.maximum(before, 0)) % period
    weight = start_u[:, :, None] * laws.w[at_before]                                      # × w_{k+z'}(g)
    at_z = base[:, None, None] + (phase[:, None, None] + z) % period
    rest = left[:, None, None] - z
    weight = weight * np.where(capped[:, None, None], laws.tail(at_z, rest), laws.u[at_z, np.clip(rest, 0, cap - 1)])
    weight = np.where(valid, weight, 0.0).reshape(y.size, -1)
    cumulative = np.cumsum(weight, axis=1)
    pick = (cumulative < (uniform * cumulative[:, -1])[:, None]).sum(axis=1)
    pick = np.minimum(pick, weight.shape[1] - 1)
    return z.reshape(y.size, -1)[np.arange(y.size), pick]


def _refine(laws: PeriodicLaws, walk: _Walk, c: np.ndarray, need: np.ndarray, root, first: int) -> None:
    """Add the short runs' selections at the unresolved rounds (c < need) of every replicate.

    For each unresolved round x and client whose x falls in a short run (e_{j−1}, a_j], the first
    selection at or after x is drawn from the run's path conditioned on its S
    (:func:`_first_point_at_or_after`); several rounds in one run are taken in increasing order,
    each from the point the previous one found (the path is Markov). Each query has its uniform
    from the replicate's refinement stream, in the order (client, run, round), whatever the chunk.
    A run whose S was walked past a cut table keeps its walked path (``short_path`` replayed)."""
    rounds, n, period, cap = laws.rounds, laws.n_clients, laws.period, laws.cap
    replicate, x = np.nonzero(c < need)
    if not replicate.size:
        return
    rows, step, starts, ends, short = walk.columns()
    wanted = np.zeros(c.shape[0], dtype=bool)
    wanted[replicate] = True
    keep = np.flatnonzero(wanted[rows // n])
    order = keep[np.lexsort((step[keep], rows[keep]))]
    rows, starts, ends, short, step = rows[order], starts[order], ends[order], short[order], step[order]
    # queries: every (unresolved round, client) of the replicate, ordered by (replicate, client, round)
    q_row = ((replicate * n)[:, None] + np.arange(n)[None, :]).T.ravel()             # client-major per x
    q_x = np.tile(x, n)
    q_order = np.lexsort((q_x, q_row))
    q_row, q_x = q_row[q_order], q_x[q_order]
    big = np.int64(4 * rounds + 4 * cap + 8)
    key = rows.astype(np.int64) * big + ends
    at = np.searchsorted(key, q_row.astype(np.int64) * big + q_x, side="left")     # first j with e_j ≥ x
    previous = np.where((at > 0) & (rows[np.maximum(at - 1, 0)] == q_row), ends[np.maximum(at - 1, 0)], -1)
    inside = q_x <= starts[at]
    q_row, q_x, at, previous = q_row[inside], q_x[inside], at[inside], previous[inside]
    if not q_row.size:
        return
    uniform = np.empty(q_row.size)
    q_rep = q_row // n
    for r in np.unique(q_rep):                          # one stream per unresolved replicate
        mine = np.flatnonzero(q_rep == r)
        uniform[mine] = _generator(root, first + int(r), _REFINE_STREAM).random(mine.size)
    total = short[at].astype(np.int64)
    cut = (cap <= rounds) & (total >= cap)             # walked past a cut table: replay that walk
    k0 = laws.group_of[q_row % n] * period + (previous + 1) % period
    found = np.empty(q_row.size, dtype=np.int64)
    for i in np.flatnonzero(cut):
        rng = _generator(root, first + int(q_rep[i]), _PATH_STREAM, int(q_row[i] % n), int(step[at[i]]))
        offsets, _ = short_path(laws, int(k0[i]), None, rounds - int(previous[i]), rng)
        later = offsets[previous[i] + offsets >= q_x[i]]
        found[i] = previous[i] + (int(later[0]) if later.size else rounds + 1)
    # rank of each query within its run; a run's queries are consecutive, by increasing x
    todo = np.flatnonzero(~cut)
    run = at[todo]
    first_of_run = np.r_[True, run[1:] != run[:-1]]
    rank = np.arange(todo.size) - np.maximum.accumulate(np.where(first_of_run, np.arange(todo.size), 0))
    point = np.zeros(todo.size, dtype=np.int64)         # offset of the last point found in the run
    capped = total[todo] >= cap
    for level in range(int(rank.max(initial=-1)) + 1):
        now = todo[rank == level]
        here = np.flatnonzero(rank == level)
        if level:
            point[here] = point[here - 1]
        y = q_x[now] - previous[now]
        ahead = y > point[here]                         # not reached by the point found before
        if level == 0:
            ahead[:] = True
        go = here[ahead]
        batch = max(1, _QUERY_CELLS // max(1, (laws.threshold - 1) ** 2))   # bounds the (Q, H − 1, H − 1) arrays
        for lo in range(0, go.size, batch):
            part, y_part = go[lo : lo + batch], y[ahead][lo : lo + batch]
            start = point[part]
            group_base = laws.group_of[q_row[todo[part]] % n] * period
            k = group_base + (k0[todo[part]] - group_base + start) % period
            z = _first_point_at_or_after(laws, k, y_part - start, total[todo[part]] - start, capped[part],
                                         uniform[todo[part]])
            point[part] = start + z
        found[now] = previous[now] + point[here]
    np.maximum.at(c, (q_rep, q_x), np.minimum(found, rounds).astype(c.dtype))


def periodic_chunk(laws: PeriodicLaws, rounds: int, root, first: int, count: int):
    """(τ_max, τ_avg) of replicates first..first+count−1."""
    walk = _walk(laws, root, first, count)
    c = _cover(laws, walk, count)
    if laws.threshold > 2:
        _refine(laws, walk, c, np.minimum(np.arange(rounds) + laws.threshold - 2, rounds), root, first)
    np.minimum(c, rounds, out=c)
    tau_max = (c - np.arange(rounds, dtype=c.dtype)).max(axis=1).astype(float)
    tau_sum = rounds * (rounds + 1) // 2 - (rounds * rounds - c.sum(axis=1, dtype=np.int64))
    return tau_max, tau_sum / rounds


def periodic_trace(laws: PeriodicLaws, root, replicate: int) -> np.ndarray:
    """The participation mask (T, N) of one replicate with every short gap drawn (to inspect or test it)."""
    rounds, n, period = laws.rounds, laws.n_clients, laws.period
    own = _walk(laws, root, replicate, 1).replicate(0, n)
    mask = np.zeros((rounds, n), dtype=bool)
    for client in range(n):
        starts, ends, short = own[client]
        base_row = int(laws.group_of[client]) * period
        before = -1
        for j in range(starts.size):
            if before >= rounds - 1:
                break
            total = int(short[j])
            if total > 0:
                capped = total >= laws.cap
                rng = _generator(root, replicate, _PATH_STREAM, client, j)
                offsets, _ = short_path(laws, base_row + (before + 1) % period, None if capped else total,
                                        rounds - before if capped else 0, rng)
                picks = before + offsets
                mask[picks[picks < rounds], client] = True
            if starts[j] < rounds:
                end = int(ends[j])
                if end < rounds:
                    mask[end, client] = True
            before = int(ends[j])
    return mask


def periodic_chunk_size(laws: PeriodicLaws, rounds: int) -> int:
    """Replicates per chunk: about 2^22 step words, so that many replicates share each pass
    (``rounds`` is the horizon of ``laws``)."""
    return int(np.clip((1 << 22) // max(laws.words, 1), 1, _WORD_BLOCK))


def periodic_chunk_bytes(laws: PeriodicLaws, rounds: int, count: int) -> int:
    """Peak bytes of :func:`periodic_chunk` for ``count`` replicates: the words, three int64 values
    a step and row, the cover, and the tables (``rounds`` is the horizon of ``laws``)."""
    tables = sum(a.nbytes for a in (laws.u, laws.v, laws.long_survival, laws.short_lookup, laws.long_lookup))  # noqa
    return count * (8 * laws.words + 24 * laws.steps * laws.n_clients + 16 * (laws.rounds + 1)) + tables


#: Most (sequence, phase) rows a pattern may have for "auto" and "gaps" to use this sampler: each
#: row has tables of its own, built before any draw (FedAWE's sine with 100 distinct p_i has 2000
#: rows; P3 has 10).
MAX_PHASE_ROWS = 256


#: "auto" takes this sampler when a row draws at most this many steps per round at first; above it,
#: whole traces cost less (``fedverify bench`` measures the two on FedSUM's P3).
AUTO_STEPS_PER_ROUND = 0.12


#: Peak bytes of building the tables, per (sequence, phase) row and round of the horizon: the
#: survival products of every row over the horizon and their lookup's sorted keys (measured: 107 to
#: 126 for P3 at T = 10^5 to 10^6).
TABLE_BYTES = 128


def pattern_laws(pattern, rounds: int) -> PeriodicLaws | None:
    """The tables of an independent pattern whose probabilities over ``rounds`` rounds repeat
    with a period, with at most ``MAX_PHASE_ROWS`` (sequence, phase) rows; None otherwise, and
    None too where the tables would need more than the memory limit (``TABLE_BYTES`` a row and
    round; the caller then draws another way). The probabilities are read a slab of rounds at a
    time (never as one rounds × clients array)."""
    n = pattern.n_clients

    def read(start: int, stop: int) -> np.ndarray:
        rows = np.asarray(pattern.probabilities(start, stop), dtype=float)
        if rows.shape != (stop - start, n):
            raise _NotPeriodic
        return rows

    declared = getattr(pattern, "repeats_every", lambda: None)()
    try:
        if declared is not None and declared <= min(MAX_PERIOD, rounds // 2):
            period = declared                      # periodic by construction: nothing to check
        else:
            period = find_period(read, rounds)
    except _NotPeriodic:
        return None
    if period is None:
        return None
    first = read(0, period)
    groups = 1 if bool((first == first[:, :1]).all()) else np.unique(first.T, axis=0).shape[0]
    if groups * period > MAX_PHASE_ROWS:
        return None
    if TABLE_BYTES * groups * period * (rounds + 1) > memory_limit():
        return None
    return _laws_of_period(first, rounds)


class _NotPeriodic(Exception):
    """The pattern's probabilities do not have the shape (rounds, clients)."""


def periodic_law(pattern, rounds: int, auto: bool) -> PeriodicLaws | None:
    """The law of method "gaps" for independent clients whose probabilities repeat with a
    period: the tables of :func:`pattern_laws`. "auto" declines laws that draw more than
    ``AUTO_STEPS_PER_ROUND`` steps a round (dense: whole traces are cheaper)."""
    if not varying_applies(pattern, rounds):
        return None
    laws = pattern_laws(pattern, rounds)
    if auto and laws is not None and laws.steps > AUTO_STEPS_PER_ROUND * rounds:
        return None
    return laws


SAMPLER = FunctionSampler("gaps", GAPS_NEEDS, __name__, law="periodic_law", size="periodic_chunk_size",
                          peak="periodic_chunk_bytes", draw="periodic_chunk", caches=("_laws_cached",))
