"""Monte-Carlo for independent clients with time-constant probabilities: long absences only.

The delays of a replicate follow from the cover time c(x) = max_i next_i(x), the first
round by which every client has been selected since round x:

* m_t = min_i a_{i,t} ≥ x iff c(x) ≤ t, so Σ_t τ_t = T(T+1)/2 − Σ_{x<T} max(0, T − c(x));
* τ_max = max_{x<T} (min(c(x), T) − x), the longest absence run (FedSUM, proof of
  Lemma F.1), reached at the start of that run;
* with the intervals (a, b] between consecutive selections of a client (a = −1 before
  the first), c(x) = max{b : a < x ≤ b}, and c(x) ≥ x always.

An interval shorter than a threshold H (a gap G = b − a ≤ H − 1) ends by x + H − 2, so
wherever some interval of length ≥ H reaches x + H − 2 the short ones cannot change
c(x). Only the long intervals are therefore drawn. For Geometric(p) gaps they form a
renewal process: from a selection, the short gaps before the next long one sum to
S = Σ_{k<K} G_k with K ~ Geometric(ρ), ρ = P(G ≥ H) = q^{H−1}, and the long gap is
H − 1 + Geometric(p) (memorylessness). S has mass P(S = s) = ρ·u(s), where
u(s) = Σ_{g<H} p q^{g−1} u(s − g), u(0) = 1, computed once per (p, H) by a linear
filter after exponential tilting (weights p q^{g−1} θ^{−g} summing to one, so u/θ^s
neither under- nor overflows; θ is found from an equation that keeps its sign change
however small ρ is, see ``_tilt``). H is picked per pattern so that, with N = 100 clients at
p = 0.2, about one replicate in a thousand has a round left unresolved; there the short
gaps of the covering segments are drawn exactly, conditioned on their sum (or on S
exceeding the table), so every replicate is exact.

The clients of one probability are laid end to end as one renewal process started at
−1, each in a window of W ≥ T rounds (W a power of two, so windows and slots are bit
operations; rounds T..W−1 are drawn and ignored). By memorylessness every window is an
independent Bernoulli(p) sequence, and an interval crossing into a window starts there
at −1.

Draws are exact inversions: a 16-bit uniform indexes a table, and the few cells that a
CDF breakpoint may cross fall back to inversion with a further 53-bit uniform taken from
the replicate's reserve words. The words of replicate r are row r mod 256 of the stream
keyed by (seed, r // 256), reached by jumping ahead, and its rarer draws (past the
reserve, completing a short row, the short-gap paths) come from streams keyed by r, so
results do not depend on chunking. The streams differ from ``sample_batch``'s, so the two
Monte-Carlo methods give different (equally distributed) samples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np
from scipy import optimize, signal

from ...patterns import Pattern
from .sampler import FunctionSampler
from .streams import WORD_BLOCK, block_words, keyed_bits
from ..laws.units import constant_probabilities as _constant_probabilities

_CELLS = 1 << 16
#: Replicates sharing one keyed stream of words.
_WORD_BLOCK = WORD_BLOCK
#: Spawn-key tags separating these streams from the patterns' own.
_GAP_STREAM, _EXTRA_STREAM, _SEGMENT_STREAM = 0x6A9, 0x6AB, 0x6AA
#: Largest S table (entries); a group needing more draws every gap (H = 1).
_MAX_TABLE = 1 << 22
#: Most multiply-adds the S tables' filters may take: a larger H is not considered. The cost model
#: of ``_choose_threshold`` counts draws, not table building, so without this limit many clients over
#: few rounds would pick an H whose tables cost far more to build than the draws they save.
_MAX_FILTER_WORK = 1 << 27
#: Relative cost of one unresolved round (its refinement walks short-gap paths), in drawn long intervals.
_REFINE_COST = 2e5
#: S ≥ cap is drawn by walking the path once V(cap) = P(S ≥ cap) falls below this.
_TAIL = 1e-30


def constant_probabilities(pattern: Pattern, rounds: int, auto: bool = False) -> np.ndarray | None:
    """Per-client p if ``pattern`` is independent with time-constant probabilities (read in
    chunks of rounds, never as one rounds × clients array): the law of method "gaps", "auto"
    (``auto``) or not."""
    return _constant_probabilities(pattern, rounds)


def _step_counts(edges: np.ndarray, start: int = 0) -> np.ndarray:
    """start + #{k : edges[k] ≤ u} for every cell u < 2^16, for nondecreasing ``edges`` in [0, 2^16];
    int16 when every value is below 2^15 − 1 (the tables' sentinel range), else int64."""
    lengths = np.diff(edges, prepend=0, append=_CELLS)
    dtype = np.int16 if start + edges.size < 2**15 - 1 else np.int64
    return np.repeat(np.arange(start, start + edges.size + 1, dtype=dtype), lengths)


@lru_cache(maxsize=64)
def _long_table(p: float, threshold: int) -> np.ndarray:
    """table[u] = H − 1 + Geometric(p) for u/2^16 ≤ U < (u+1)/2^16, or −1 when a CDF
    breakpoint 1 − q^k may lie in (or next to) that cell.

    For p ≤ 2^−16 consecutive breakpoints lie less than a cell apart (1 − q^{k+1} − (1 − q^k)
    = p q^k ≤ 2^−16), so every cell is −1 and the table is written without listing the
    breakpoints, of which there are about 11/p."""
    if p <= 1.0 / _CELLS:
        table = np.full(_CELLS, -1, dtype=np.int16)
        table.flags.writeable = False
        return table
    log_q = math.log1p(-p)
    k = np.arange(1, int(math.ceil(-16 * math.log(2) / log_q)) + 3)
    crossing = np.floor(-np.expm1(k * log_q) * _CELLS).astype(np.int64)   # cell of 1 − q^k
    # Geometric(p) − 1 at U = #{k ≥ 1 : 1 − q^k ≤ U}; in a cell at least one cell away from every
    # crossing that is the number of crossings in earlier cells
    table = _step_counts(np.minimum(crossing + 1, _CELLS), threshold)
    if table.dtype != np.int16:
        table = np.where(table < 2**15 - 1, table, -1).astype(np.int16)
    for shift in (-1, 0, 1):
        table[np.clip(crossing + shift, 0, _CELLS - 1)] = -1
    table[-1] = -1
    table.flags.writeable = False
    return table


def _long_exact(p: float, threshold: int, uniform: np.ndarray, limit: int) -> np.ndarray:
    """H − 1 + Geometric(p) by inversion, clipped at ``limit`` (a longer gap covers the rest all the same)."""
    with np.errstate(over="ignore"):  # a gap past float range (p near 1e−308) is clipped all the same
        gap = np.floor(np.log1p(-uniform) / math.log1p(-p)) + threshold
    return np.minimum(gap, limit).astype(np.int64)


@dataclass(frozen=True, eq=False)
class _ShortRunLaw:
    """The law of S, the short gaps (G < H) summed before the next long gap, truncated
    at ``cap`` (the value ``cap`` stands for S ≥ cap)."""

    p: float
    threshold: int
    cap: int
    theta: float
    tilted: np.ndarray  # w̃_g = p q^{g−1} θ^{−g}, g = 1..H−1
    u: np.ndarray  # ũ(s) = u(s)/θ^s, s = 0..cap
    v: np.ndarray  # Ṽ(r) = P(S ≥ r)/θ^r, r = 1..cap (index r − 1)
    cdf: np.ndarray  # P(S ≤ s), s = 0..cap−1
    table: np.ndarray  # 16-bit inversion table, −1 where a breakpoint lies in the cell
    rho: float

    def tail_ratio(self, r: int) -> float:
        """Ṽ(r) with Ṽ(k) = θ^{−k} for k ≤ 0 (P(S ≥ k) = 1 there)."""
        return self.v[r - 1] if r > 0 else self.theta ** (-r)

    def mean_var(self) -> tuple[float, float]:
        pmf = np.diff(self.cdf, prepend=0.0)
        values = np.arange(self.cap + 1, dtype=float)
        pmf = np.append(pmf, max(0.0, 1.0 - self.cdf[-1]))
        mean = float(pmf @ values)
        return mean, float(pmf @ (values - mean) ** 2)


def _tilt(p: float, threshold: int) -> float:
    """θ ∈ (0, 1] with Σ_{g<H} p q^{g−1} θ^{−g} = 1, the tilt that makes ũ(s) = u(s)/θ^s level.

    Solved for x = −ln θ ≥ 0 as h(x) = Σ_g w_g·expm1(g x) − ρ = 0 (ρ = q^{H−1} = 1 − Σ_g w_g),
    which keeps its sign change however small ρ is: h(0) = −ρ < 0 and, from the g = 1 term
    alone, h(ln(1 + ρ/p)) ≥ 0; brentq runs on y = x/ln(1 + ρ/p) ∈ [0, 1] with h/ρ, so
    its tolerances see numbers near one. Written as Σ_g w_g θ^{−g} − 1, the same equation loses the
    sign at θ = 1 once ρ falls below the rounding of Σ_g w_g (q^{H−1} < 2^−52): brentq then
    refused the bracket, as for P2 at T = 71570 where H = 187 was chosen. θ = 1 when
    there are no short gaps (p = 1 or H = 1) or no long ones in floating point (ρ = 0).
    """
    q = 1.0 - p
    rho = q ** (threshold - 1)
    if p == 1.0 or threshold <= 1 or rho >= 1.0 or rho == 0.0:
        return 1.0
    g = np.arange(1, threshold, dtype=float)
    weights = p * q ** (g - 1.0)
    high = math.log1p(rho / p)
    if threshold == 2:
        return math.exp(-high)
    def h(y: float) -> float:  # h(x)/ρ at x = y·high; an overflow (tiny weights, large g·x) is +∞, of the right sign
        with np.errstate(over="ignore"):
            return float(weights @ np.expm1(g * (y * high))) / rho - 1.0

    if h(1.0) <= 0.0:  # the root lies within rounding of the bracket's end
        return math.exp(-high)
    return math.exp(-high * optimize.brentq(h, 0.0, 1.0, xtol=1e-300, rtol=4 * np.finfo(float).eps))


@lru_cache(maxsize=64)
def _short_run_law(p: float, threshold: int, length: int) -> _ShortRunLaw | None:
    """The S law for gaps ≥ ``threshold`` counted long, or None if its table would be too big."""
    q = 1.0 - p
    g = np.arange(1, threshold)
    weights = p * q ** (g - 1.0)
    rho = q ** (threshold - 1)
    theta = _tilt(p, threshold)
    cap = length
    if theta < 1.0:  # past P(S ≥ cap) < _TAIL the path is walked: the table stops there
        cap = min(length, int(math.ceil(math.log(_TAIL) / math.log(theta))) + threshold)
    if cap > _MAX_TABLE:
        return None
    tilted = weights * theta ** (-g.astype(float))
    denominator = np.concatenate([[1.0], -tilted])
    impulse = np.zeros(cap + 1)
    impulse[0] = 1.0
    u = signal.lfilter([1.0], denominator, impulse)
    forcing = np.zeros(cap)  # Σ_{g ≥ r} w_g θ^{−r}: the terms with S' ≥ r − g certain
    head = min(cap, threshold - 1)
    forcing[:head] = (np.cumsum(weights[::-1])[::-1] * theta ** (-g.astype(float)))[:head]
    v = signal.lfilter([1.0], denominator, forcing)
    pmf = rho * u[:cap] * np.exp(np.arange(cap) * math.log(theta)) if theta < 1.0 else rho * u[:cap]
    cdf = np.minimum(np.cumsum(pmf), 1.0)
    # the value #{s : cdf(s) ≤ U} is that of U = u/2^16 throughout cell u unless some cdf(s) lies in
    # (u/2^16, (u+1)/2^16); scaling by 2^16 is exact, so cdf(s) ≤ u/2^16 iff ⌈2^16·cdf(s)⌉ ≤ u, and
    # cdf(s) lies inside cell ⌊2^16·cdf(s)⌋ when 2^16·cdf(s) is not a whole number
    scaled = cdf * _CELLS
    table = _step_counts(np.ceil(scaled).astype(np.int64))
    if table.dtype != np.int16:
        table = table.astype(np.int32)
    low = np.floor(scaled)
    inside = low[scaled != low].astype(np.int64)
    table[inside[inside < _CELLS]] = -1
    for array in (u, v, cdf, table, tilted):
        array.flags.writeable = False
    return _ShortRunLaw(p, threshold, cap, theta, tilted, u, v, cdf, table, rho)


def _choose_threshold(p: np.ndarray, rounds: int) -> int:
    """H minimising (long intervals drawn) + _REFINE_COST × (expected unresolved rounds).

    A client covers round x with a long interval reaching x + H − 2 with probability
    about q^{H−1}, so about T·Π_i(1 − q_i^{H−1}) rounds are unresolved; none for H ≤ 2.
    Thresholds whose S tables would take more than ``_MAX_FILTER_WORK`` multiply-adds to build
    are not considered. The refinement cost grows with the number of unresolved rounds, without a
    cap: a cost capped at one replicate's worth would make a threshold leaving every round
    unresolved look cheapest once T·N·p·q^{H−1} passes 2·10^5 (for P2 from T ≈ 7·10^4), and
    such an H also makes ρ = q^{H−1} fall below float rounding.
    Clients with p = 0 are left out: their one interval (−1, ∞) is drawn whatever H, and
    counting them would make every H look resolved and push H past what the S tables can hold.
    """
    values, counts = np.unique(p[p > 0], return_counts=True)
    q = 1.0 - values
    candidates = np.unique(np.concatenate([np.arange(1, 65), np.geomspace(65, 1 << 14, 48).astype(int)]))
    # each group's S table is a linear filter of H − 1 taps over up to min(length, _MAX_TABLE) values
    window = 1 << (rounds - 1).bit_length()
    filtering = (candidates - 1.0) * np.minimum(counts * float(window), _MAX_TABLE).sum()
    candidates = candidates[(candidates <= 2) | (filtering <= _MAX_FILTER_WORK)]
    survive = q[None, :] ** (candidates[:, None] - 1.0)
    drawn = rounds * (survive * values[None, :]) @ counts
    with np.errstate(divide="ignore"):
        log_unresolved = np.log1p(-survive) @ counts
    unresolved = np.where(candidates <= 2, 0.0, rounds * np.exp(log_unresolved))
    return int(candidates[np.argmin(drawn + _REFINE_COST * unresolved)])


@dataclass(frozen=True, eq=False)
class _Group:
    clients: np.ndarray
    p: float
    length: int  # n·W: the group's windows end to end
    law: _ShortRunLaw | None  # None: every gap is drawn (threshold 1)
    pairs: int  # (S, L) pairs drawn at first
    first_column: int  # in the replicate's 16-bit draws

    @property
    def threshold(self) -> int:
        return 1 if self.law is None else self.law.threshold

    @property
    def short_columns(self) -> slice:
        """The replicate's columns of this group's short runs S (none when H = 1)."""
        return slice(self.first_column, self.first_column + (0 if self.law is None else self.pairs))

    @property
    def long_columns(self) -> slice:
        """The replicate's columns of this group's long gaps, after its short runs."""
        return slice(self.short_columns.stop, self.short_columns.stop + self.pairs)


@dataclass(frozen=True, eq=False)
class _Plan:
    rounds: int
    window: int  # W, a power of two ≥ T
    threshold: int
    groups: tuple[_Group, ...]
    columns: int  # 16-bit draws per replicate (a multiple of 4)
    reserve: int  # 64-bit words kept for table fallbacks

    @property
    def words(self) -> int:
        return self.columns // 4 + self.reserve


@lru_cache(maxsize=32)
def _plan_cached(p_bytes: bytes, rounds: int, threshold: int | None) -> _Plan:
    p = np.frombuffer(p_bytes)
    threshold = _choose_threshold(p, rounds) if threshold is None else threshold
    window = 1 << (rounds - 1).bit_length()
    groups, column, fallbacks = [], 0, 0.0
    for value in np.unique(p):
        clients = np.flatnonzero(p == value)
        length = clients.size * window
        if value == 0.0:  # never selected: one interval (−1, ∞) covers every window
            groups.append(_Group(clients, 0.0, length, None, 1, column))
            column += 1
            continue
        law = _short_run_law(float(value), threshold, length) if threshold > 1 else None
        pairs = _pairs_needed(float(value), length, law)
        group = _Group(clients, float(value), length, law, pairs, column)
        groups.append(group)
        column += pairs * (1 if law is None else 2)
        if value < 1.0:
            fallbacks += pairs * np.count_nonzero(_long_table(float(value), group.threshold) < 0) / _CELLS
        if law is not None:
            fallbacks += pairs * np.count_nonzero(law.table < 0) / _CELLS
    columns = -(-column // 4) * 4
    reserve = int(math.ceil(fallbacks + 6 * math.sqrt(fallbacks) + 16))
    return _Plan(rounds, window, threshold, tuple(groups), columns, reserve)


def _pairs_needed(p: float, length: int, law: _ShortRunLaw | None) -> int:
    """(S, long gap) pairs that cover ``length`` rounds but for a five-sigma shortfall:
    length/μ + 5·√(length·v/μ³) + 8 for a renewal whose cycles have mean μ and variance v.

    A cycle is one Geometric(p) gap (mean 1/p, variance (1 − p)/p²) or, with short runs,
    S + H − 1 + Geometric(p). Where 1/p² overflows (p below about 1e−154) the same count is
    taken in the form length·r + 5·√(length·v·r³) with r = 1/μ, which stays finite."""
    value = np.float64(p)
    with np.errstate(divide="ignore", over="ignore"):
        mean, var = float(1 / value), float((1 - value) / value**2)
    if law is not None:
        s_mean, s_var = law.mean_var()
        mean, var = mean + law.threshold - 1 + s_mean, var + s_var
    if math.isfinite(var):
        return int(math.ceil(length / mean + 5 * math.sqrt(length * var / mean**3) + 8))
    rate = 1.0 / mean
    spread = ((1.0 - p) * rate / p) * (rate / p) * rate + (s_var * rate**3 if law is not None else 0.0)
    return int(math.ceil(length * rate + 5 * math.sqrt(length * spread) + 8))


def _plan(p: np.ndarray, rounds: int, threshold: int | None = None) -> _Plan:
    p = np.ascontiguousarray(p, dtype=float)
    if threshold is not None and (threshold < 1 or threshold != int(threshold)):
        raise ValueError(f"threshold must be a positive integer, got {threshold}")
    return _plan_cached(p.tobytes(), int(rounds), None if threshold is None else int(threshold))


# ---------------------------------------------------------------------------- streams


def _segment_generator(root, replicate: int, group: int, segment: int) -> np.random.Generator:
    return np.random.Generator(keyed_bits(root, replicate, _SEGMENT_STREAM, group, segment))


def _segment_path(law: _ShortRunLaw, rng: np.random.Generator, total: int | None, until: int) -> tuple[np.ndarray, int | None]:
    """Selection offsets (from the segment's start) of its short gaps, one uniform per gap.

    ``total`` known: gaps drawn with P(g | r left) = w̃_g ũ(r − g)/ũ(r), ending at total.
    ``total`` None (S ≥ cap): P(g | r to cap) = w̃_g Ṽ(r − g)/Ṽ(r) until the cap is
    passed, then unconditionally (long with probability ρ, which ends the segment)
    until a long gap or ``until``. Returns the offsets and S when it was reached.
    """
    w = np.asarray(law.tilted)
    g = np.arange(1, law.threshold)
    positions, at = [], 0
    while True:
        if total is not None and at == total:
            return np.asarray(positions, dtype=np.int64), total
        if total is None and at >= law.cap and at >= until:
            return np.asarray(positions, dtype=np.int64), None
        uniform = rng.random()
        if total is not None:
            left = total - at
            usable = g <= left
            prob = w[usable] * law.u[left - g[usable]] / law.u[left]
        elif at < law.cap:
            left = law.cap - at
            prob = w * np.array([law.tail_ratio(left - k) for k in g]) / law.tail_ratio(left)
        else:
            if uniform < law.rho:
                return np.asarray(positions, dtype=np.int64), at
            uniform = (uniform - law.rho) / (1.0 - law.rho)
            prob = w * law.theta ** g  # untilted short-gap weights
        cumulative = np.cumsum(prob)
        step = int(g[min(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"), prob.size - 1)])
        at += step
        positions.append(at)


# ---------------------------------------------------------------------------- drawing


@dataclass
class _Intervals:
    """One group's long intervals (a, e] for a chunk of replicates, with their S."""

    end1: np.ndarray  # (count, m) e_j + 1
    long: np.ndarray  # (count, m) e_j − a_j
    short: np.ndarray  # (count, m) S_j = a_j − e_{j−1}; the value cap stands for S ≥ cap

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts a_j, ends e_j, S_j) of replicate r, as int64."""
        end1 = self.end1[r].astype(np.int64)
        return end1 - 1 - self.long[r], end1 - 1, self.short[r].astype(np.int64)


class _Fallbacks:
    """Hands out each replicate's reserve words in draw order, then its own stream."""

    def __init__(self, words: np.ndarray, plan: _Plan, root, first: int):
        self.words, self.plan, self.root, self.first = words, plan, root, first
        self.used = np.zeros(words.shape[0], dtype=np.int64)
        self.extra: dict[int, np.random.Generator] = {}

    def uniforms(self, rows: np.ndarray) -> np.ndarray:
        """53-bit uniforms for the (row-sorted) fallback cells of one draw block."""
        rank = self.used[rows] + np.arange(rows.size) - np.searchsorted(rows, rows, side="left")
        self.used += np.bincount(rows, minlength=self.used.size)
        out = np.empty(rows.size)
        fits = rank < self.plan.reserve
        reserve_at = self.plan.columns // 4
        out[fits] = (self.words[rows[fits], reserve_at + rank[fits]] >> np.uint64(11)) * 2.0**-53
        for k in np.flatnonzero(~fits):
            out[k] = self.generator(int(rows[k])).random()
        return out

    def generator(self, row: int) -> np.random.Generator:
        if row not in self.extra:
            self.extra[row] = np.random.Generator(keyed_bits(self.root, self.first + row, _EXTRA_STREAM))
        return self.extra[row]


def _invert_short(law: _ShortRunLaw, uniform: np.ndarray) -> np.ndarray:
    return np.searchsorted(law.cdf, uniform, side="right")


def _spans(plan: _Plan) -> list[tuple[slice, np.ndarray, object]]:
    """(columns, 16-bit table, exact inversion) of every drawn block of columns:
    each group's short runs S, then its long gaps H − 1 + Geometric(p) (every gap when H = 1)."""
    spans = []
    for group in plan.groups:
        if group.law is not None:
            spans.append((group.short_columns, group.law.table, partial(_invert_short, group.law)))
        if 0.0 < group.p < 1.0:
            spans.append((group.long_columns, _long_table(group.p, group.threshold),
                          partial(_long_exact, group.p, group.threshold, limit=group.length + 1)))
    return spans


def _table_values(plan: _Plan, cells: np.ndarray, fallbacks: _Fallbacks) -> np.ndarray:
    """The value of every drawn column: its table at the cell, or, in a cell the table leaves open,
    the exact inversion at the cell completed by a fallback uniform. The fallbacks of a row are
    handed out in column order (one call for every group of the chunk)."""
    spans = _spans(plan)
    dtype = np.result_type(np.int16, *(table.dtype for _, table, _ in spans))
    values = np.zeros(cells.shape, dtype=dtype)
    for columns, table, _ in spans:
        np.take(table.astype(dtype, copy=False), cells[:, columns], out=values[:, columns], mode="clip")
    bad = np.flatnonzero(values < 0)
    if bad.size:
        rows, cols = np.divmod(bad, cells.shape[1])
        uniform = (cells[rows, cols] + fallbacks.uniforms(rows)) / _CELLS
        exact = np.empty(bad.size, dtype=np.int64)
        for columns, _, invert in spans:
            inside = (cols >= columns.start) & (cols < columns.stop)
            if inside.any():
                exact[inside] = invert(uniform[inside])
        if exact.max() > np.iinfo(values.dtype).max:
            values = values.astype(np.int64)
        values[rows, cols] = exact
    return values


def _draw(plan: _Plan, root, first: int, count: int) -> list[_Intervals]:
    """The long intervals of replicates first..first+count−1, every group complete."""
    words = block_words(plan, root, first, count, _GAP_STREAM)
    cells = words[:, : plan.columns // 4].view(np.uint16)
    fallbacks = _Fallbacks(words, plan, root, first)
    values = _table_values(plan, cells, fallbacks)
    out = []
    for index, group in enumerate(plan.groups):
        law = group.law
        if law is not None:
            short = values[:, group.short_columns]
            if law.cap < group.length:
                short = _resolve_capped(short, law, root, first, index)
        else:
            short = np.zeros((count, group.pairs), dtype=np.int16)
        if group.p == 0.0:      # never selected: one interval (−1, ∞)
            long = np.full((count, group.pairs), group.length + 1, dtype=np.int64)
        elif group.p == 1.0:
            long = np.full((count, group.pairs), group.threshold, dtype=np.int16)
        else:
            long = values[:, group.long_columns]
        widest = (int(short.max()) + int(long.max())) * group.pairs  # bounds every cumulative sum
        end1 = np.add(short, long, dtype=np.int32 if widest < 2**31 - 1 else np.int64)
        np.cumsum(end1, axis=1, out=end1)
        intervals = _Intervals(end1, long, short)
        _complete(intervals, group, index, fallbacks, root, first)
        out.append(intervals)
    return out


def _resolve_capped(short: np.ndarray, law: _ShortRunLaw, root, first: int, group: int) -> np.ndarray:
    """Replace S ≥ cap (cap below the group's length) by its exact value, path by path."""
    capped = np.flatnonzero(short == law.cap)
    if capped.size:
        short = short.astype(np.int64)
        for row, col in zip(*np.divmod(capped, short.shape[1])):
            _, total = _segment_path(law, _segment_generator(root, first + int(row), group, int(col)), None, math.inf)
            short[row, col] = total
    return short


def _complete(intervals: _Intervals, group: _Group, index: int, fallbacks: _Fallbacks, root, first: int) -> None:
    """Extend replicates whose drawn intervals end before the group's end (rare)."""
    last = group.length  # complete once an interval reaches it: later ones start past the end
    rows = np.flatnonzero(intervals.end1[:, -1] < last)
    if not rows.size:
        return
    law, extensions = group.law, {}
    for row in rows:
        rng = fallbacks.generator(int(row))
        end1 = int(intervals.end1[row, -1])
        added = []
        while end1 < last:
            s = 0 if law is None else int(_invert_short(law, rng.random(1))[0])
            if law is not None and s == law.cap and law.cap < group.length:
                column = intervals.end1.shape[1] + len(added)
                _, s = _segment_path(law, _segment_generator(root, first + int(row), index, column), None, math.inf)
            g = group.threshold if group.p == 1.0 else int(_long_exact(group.p, group.threshold, rng.random(1), last + 1)[0])
            end1 += s + g
            added.append((end1, g, s))
        extensions[int(row)] = np.array(added, dtype=np.int64).reshape(-1, 3)
    width = max(len(e) for e in extensions.values())
    dtype = np.int64
    grown = []
    for array, fill in ((intervals.end1, np.iinfo(dtype).max // 4), (intervals.long, 1), (intervals.short, 0)):
        grown.append(np.hstack([array.astype(dtype), np.full((array.shape[0], width), fill, dtype=dtype)]))
    for row, added in extensions.items():
        for array, k in zip(grown, range(3)):
            array[row, array.shape[1] - width : array.shape[1] - width + len(added)] = added[:, k]
    intervals.end1, intervals.long, intervals.short = grown


# ---------------------------------------------------------------------------- delays


def _cover(plan: _Plan, drawn: list[_Intervals], count: int) -> np.ndarray:
    """max(c_h(x), x) for each replicate (uncapped): the long intervals' ends, prefix-maximised.

    An interval covering from flat position f = a + 1 lands in slot f mod W of its
    window (base f − slot) with local end e − base. With e clipped at the group's end
    (so the last window's intervals still reach W ≥ T), an interval starting past the
    end gets a local end ≤ 0 (harmless). One
    reaching past its window (local end ≥ W) also covers slot 0 of the next window up
    to local end − W, so slot 0 takes the row's largest local end minus W; an interval
    that does not cross gives a negative value there, which c(x) ≥ x makes harmless.
    """
    rounds, window = plan.rounds, plan.window
    width = window + 1
    index_type = np.int64 if count * width >= 2**31 else np.int32
    cover = np.zeros((count, width), dtype=np.int32)
    row_base = (np.arange(count, dtype=index_type) * width)[:, None]
    for group, intervals in zip(plan.groups, drawn):
        slot = np.subtract(intervals.end1, intervals.long, dtype=index_type)  # first covered, then slot
        base = slot & ~(window - 1)
        slot -= base
        local_end1 = np.minimum(intervals.end1, group.length + 1).astype(index_type, copy=False)
        local_end1 -= base
        np.maximum(cover[:, 0], local_end1.max(axis=1) - window, out=cover[:, 0])
        slot += row_base
        np.maximum.at(cover.ravel(), slot.ravel(), local_end1.ravel().astype(np.int32, copy=False))
    cover = cover[:, :rounds]
    np.maximum.accumulate(cover, axis=1, out=cover)
    cover -= 1  # the scattered values were e + 1 − base
    return np.maximum(cover, np.arange(rounds, dtype=np.int32), out=cover)


def _refine(plan: _Plan, drawn: list[_Intervals], row: int, c: np.ndarray, unresolved: np.ndarray, root, replicate: int) -> None:
    """Add the short intervals' ends at the unresolved rounds of one replicate."""
    rounds, window = plan.rounds, plan.window
    for index, (group, intervals) in enumerate(zip(plan.groups, drawn)):
        if group.law is None:
            continue
        # Only the intervals at the unresolved rounds are read (a row holds every interval of
        # the group, ~T·N·ρ·p of them; converting it whole made a refinement cost O(T)).
        end1, long, short = intervals.end1[row], intervals.long[row], intervals.short[row]
        flat = (np.arange(group.length // window)[:, None] * window + unresolved[None, :]).ravel()
        segment = np.searchsorted(end1, (flat + 1).astype(end1.dtype), side="left")  # first j with e_j ≥ x
        start = end1[segment].astype(np.int64) - 1 - long[segment]                  # a_j
        before = np.where(segment > 0, end1[np.maximum(segment - 1, 0)].astype(np.int64) - 1, -1)   # e_{j−1}
        inside = flat <= start                                                       # e_{j−1} < x ≤ a_j
        paths = {}
        for x_flat, j, base in zip(flat[inside], segment[inside], before[inside]):
            if j not in paths:
                total = int(short[j])
                capped = total >= group.law.cap
                rng = _segment_generator(root, replicate, index, int(j))
                offsets, _ = _segment_path(group.law, rng, None if capped else total,
                                           group.length - int(base) if capped else 0)
                paths[j] = int(base) + offsets
            selections = paths[j]
            end = int(selections[np.searchsorted(selections, x_flat, side="left")])
            x = int(x_flat % window)
            c[x] = max(c[x], min(end - (x_flat - x), rounds))


def _resolve(plan: _Plan, drawn: list[_Intervals], count: int, root, first: int) -> np.ndarray:
    """c(x) capped at T for every replicate of the chunk."""
    rounds = plan.rounds
    c = _cover(plan, drawn, count)
    if plan.threshold > 2:
        need = np.minimum(np.arange(rounds) + plan.threshold - 2, rounds)
        for row in np.flatnonzero((c < need).any(axis=1)):
            _refine(plan, drawn, int(row), c[row], np.flatnonzero(c[row] < need), root, first + int(row))
    return np.minimum(c, rounds, out=c)


def gap_chunk_size(p: np.ndarray, rounds: int) -> int:
    """Replicates per chunk: about 2^20 drawn values. Once freed chunk arrays are reused rather
    than page-faulted in again (``montecarlo._raise_allocator_threshold``), larger chunks pay
    less per-group overhead (``fedverify bench`` times the samplers)."""
    return int(np.clip((1 << 20) // _plan(p, rounds).columns, 1, _WORD_BLOCK))


def gap_chunk_bytes(p: np.ndarray, rounds: int, count: int) -> int:
    """Peak bytes of :func:`gap_chunk` for ``count`` replicates: the 64-bit words, the long
    intervals of every group (ends, lengths and short runs, up to 64 bits each) and the
    cover array of W + 1 rounds with its prefix maximum."""
    plan = _plan(p, rounds)
    pairs = sum(group.pairs for group in plan.groups)
    return count * (8 * plan.words + 32 * pairs + 16 * (plan.window + 1))


def gap_chunk(p: np.ndarray, rounds: int, root, first: int, count: int, threshold: int | None = None):
    """(τ_max, τ_avg) of replicates first..first+count−1, each of shape (count,)."""
    plan = _plan(p, rounds, threshold)
    c = _resolve(plan, _draw(plan, root, first, count), count, root, first)
    tau_max = (c - np.arange(rounds, dtype=c.dtype)).max(axis=1).astype(float)
    tau_sum = rounds * (rounds + 1) // 2 - (rounds * rounds - c.sum(axis=1, dtype=np.int64))
    return tau_max, tau_sum / rounds


def gap_trace(p: np.ndarray, rounds: int, root, replicate: int, threshold: int | None = None) -> np.ndarray:
    """The participation mask of one replicate, every short gap drawn (to inspect or re-check it)."""
    plan = _plan(p, rounds, threshold)
    drawn = _draw(plan, root, replicate, 1)
    mask = np.zeros((rounds, p.size), dtype=bool)
    for index, (group, intervals) in enumerate(zip(plan.groups, drawn)):
        starts, ends, short = intervals.row(0)
        selections = [ends[ends < group.length]]
        previous = -1
        for j in range(starts.size):
            if previous + 1 >= group.length:
                break
            if group.law is not None and short[j] > 0:
                capped = short[j] >= group.law.cap
                rng = _segment_generator(root, replicate, index, j)
                offsets, _ = _segment_path(group.law, rng, None if capped else int(short[j]),
                                           group.length - previous if capped else 0)
                selections.append(previous + offsets)
            previous = int(ends[j])
        flat = np.concatenate(selections)
        flat = flat[(flat >= 0) & (flat < group.length) & (flat % plan.window < rounds)]
        mask[flat % plan.window, group.clients[flat // plan.window]] = True
    return mask


# ---------------------------------------------------------------------------- sampler

#: What method "gaps" requires, whichever of its samplers (constant, Markov, periodic and other
#: time-varying probabilities) would draw.
GAPS_NEEDS = "independent clients or Markov chains, and no device"


#: Method "gaps" for independent clients with time-constant probabilities: the law is the per-client p.
SAMPLER = FunctionSampler("gaps", GAPS_NEEDS, __name__, law="constant_probabilities", size="gap_chunk_size",
                          peak="gap_chunk_bytes", draw="gap_chunk",
                          caches=("_long_table", "_short_run_law", "_plan_cached"))
