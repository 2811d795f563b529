"""Exact delay laws for independent units (see :mod:`.units`).

Both quantities rest on absence windows. For rounds a..b of one unit,
P(off throughout) = P(off at a) · Π_{s=a+1}^{b} P(off at s | off at s−1).

* τ_t (FedSUM eq. (4)): τ_t ≥ k iff some client is absent in rounds t−k+1..t (k ≤ t+1),
  so P(τ_t < k) = Π_g (1 − W_g(t, k))^{m_g} over independent units g of multiplicity m_g
  (derived here, Markov units included).
* τ_max: τ_max ≥ l iff some client has an absence run of length ≥ l in rounds 0..T−1
  (FedSUM, proof of Lemma F.1, the leading and trailing runs included), so
  P(τ_max < l) = Π_g A_g(l)^{m_g} with A_g(l) = P(no absence run ≥ l). A_g(l) comes from a
  first-passage recursion over rounds, run for every needed l at once:
      S_r = P(no run ≥ l in 0..r) = S_{r−1} − F_r,
      B_r = P(no run ≥ l in 0..r, on at r) = (c_r − a_r) B_{r−1} + a_r S_{r−1},
  with c_r = P(on|on), a_r = P(on|off), S_{−1} = B_{−1} = 1 and c_0 = a_0 = P(on at 0).
  F_r, the probability that a run first reaches length l at round r, is
  B_{r−l} P(off at r−l+1 | on) Π_{s=r−l+2}^{r} P(off|off) (with P(off at 0) for the leading
  run, r = l − 1, and 0 for r < l − 1). Then A_g(l) = S_{T−1}.

Truncation, with q_g the largest one-round absence probability of unit g (any l absent
rounds have probability ≤ q_g^l):

* τ_t windows stop at the k where Σ_g m_g q_g^{k−1}/(1 − q_g) < TAIL;
* τ_max rows stop at L_g with m_g T q_g^{L_g+1}/(1 − q_g) ≤ TAIL/G (a run of ≥ l rounds
  starts somewhere in T rounds with probability ≤ T q^l), and start at the l_0 below
  which P(τ_max < l) < TAIL/T is certified by disjoint blocks of l rounds: A_g(l) ≤
  Π_j (1 − P(block j absent | the round before it)), the bound taking the smaller of
  P(off|on) and P(off|off) for the block's first round. Below l_0, P(τ_max ≥ l) = 1 to
  that precision (the law of a unit that is almost surely absent for long needs no rows).

Every expectation therefore neglects less than 2·TAIL = 2e-13. Rounding adds little, as
nothing is formed in a way whose rounding grows with T or with the run length l: powers
(1 − a)^k are taken without rounding 1 − a first (:func:`_off_power`; log1p for their
logarithms), prefix sums over rounds or window lengths are rounded once
(:func:`_prefix_sum`), and 1 − S_r is accumulated as Σ F_r, never as a difference, with
the rounding errors of its block-to-block sums kept (:func:`_carry`).

The promise: an absolute error below 1e-12 for every E[τ_t], E[τ_avg] and E[τ_max] below
2^12 (above 2^12 half an ulp of a float64 is itself 4.5e-13 or more: add a few ulps of the
value). Measured against 40-digit (mpmath) and long-double references: E[τ_max] within
1.2e-13 over Bernoulli(p, N) with p ∈ {0.005, …, 0.9}, N ∈ {1, …, 1000} and T from 100 to
10^6, per-client p, Markov, time-varying Bernoulli and Sine units (most of it the
truncated tail), and E[τ_t] within 4.5e-13 (values up to 2927). Without these measures the
errors reach 1.2e-12 in E[τ_max] (Bernoulli(0.005, 10), T = 2·10^4) and 1.8e-10 in
E[τ_t] (Bernoulli(0.001, 10), T = 5·10^4); the recursion carries 1 − A_g(l) rather than
A_g(l) itself because A_g(l) nears 1 and its complement, formed as a difference, would be
2.4e-10 off at Bernoulli(0.2, 100), T = 400.

The recursion for τ_max runs in blocks of b ≤ l_0 rounds: within a block the lag-l terms
come from earlier blocks, so the block is a prefix sum for S and a first-order linear scan
for B, vectorised over the block and every row l. Its rows, memory and time are estimated
from the sizes before anything is allocated (:mod:`._limits`).
"""
from __future__ import annotations

import math

import numpy as np

from ._limits import require
from .units import Units

#: Bound on the neglected tail mass of each expectation.
TAIL = 1e-13
#: Cells (rows × rounds) handled per block of the τ_max recursion.
BLOCK_CELLS = 1 << 20
#: Unit costs (seconds) behind the time estimates, measured on a busy two-core machine and
#: rounded up: one numpy call; one (t, k) element of the E[τ_t] windows; per block and per
#: (row, round) cell of the τ_max recursion, with the extras of a scan step (Markov units)
#: and of time-varying units.
_CALL, _WINDOW_CELL = 8e-6, 6e-8
_BLOCK_CALLS, _VARYING_CALLS = 3e-5, 9e-5
_DP_CELL, _SCAN_CELL, _VARYING_CELL = 2.5e-8, 5e-9, 3.5e-8


def _window_limit(units: Units, q: np.ndarray) -> np.ndarray:
    """Per unit, the window length beyond which absence windows are negligible."""
    limit = np.full(q.shape, units.rounds, dtype=np.int64)
    small = q < 1
    with np.errstate(divide="ignore"):
        budget = TAIL * (1 - q[small]) / (units.multiplicity[small] * units.multiplicity.size)
        need = 1 + np.ceil(np.log(budget) / np.log(np.where(q[small] > 0, q[small], 0.5)))
    limit[small] = np.clip(np.where(q[small] > 0, need, 1), 1, units.rounds)
    return limit


def _tail_from_log_window(log_w: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """1 − Π_g (1 − W_g)^{m_g}, summed over the unit axis 0 in log space."""
    with np.errstate(divide="ignore"):
        log_none = (multiplicity * np.log1p(-np.exp(log_w))).sum(axis=0)
    return -np.expm1(log_none)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def _log_off(on: np.ndarray) -> np.ndarray:
    """ln(1 − on) without rounding 1 − on first (−inf where on = 1)."""
    with np.errstate(divide="ignore"):
        return np.log1p(-np.asarray(on, dtype=float))


def _off_power(on: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(1 − on)^k to a few ulps whatever k.

    np.power(1 − on, k) inherits the rounding of 1 − on (up to half an ulp) k times over:
    a relative error up to k·2^−53, which for on = 0.02 and the run lengths around
    E[τ_max] (k ≈ 500) is 6e-14, with the same sign in every row. Here 1 − on = hi + lo
    exactly (hi = fl(1 − on), lo = (1 − hi) − on: Dekker's Fast2Sum, as |1| ≥ |on|), so
    (1 − on)^k = hi^k (1 + lo/hi)^k = hi^k · exp(k·lo/hi) up to a relative k(lo/hi)²/2 ≤
    k·2^−107, and pow rounds hi^k to within about an ulp.
    """
    on = np.asarray(on, dtype=float)
    hi = 1.0 - on
    lo = (1.0 - hi) - on
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return np.power(hi, k) * np.exp(k * ratio)


def _prefix_sum(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Cumulative sums of finite x along ``axis``, each rounded about once.

    A plain cumsum rounds at every step, and the roundings of similar terms pile up over the
    thousands of terms of E[τ_t] (prefix sums of P(τ_t ≥ k)) at small p and long T, or of
    E[τ_max] of a time-varying p (prefix sums of ln P(off | off) over rounds).
    Here x = hi + lo exactly, hi on the grid h = 2^(e−52) with Σ|x| ≤ 2^e per slice: the
    prefix sums of hi are exact (multiples of h below 2^(e+1)), those of lo (|lo| ≤ h/2) are
    tiny, and one addition joins the two.
    """
    _, exponent = np.frexp(np.abs(x).sum(axis=axis, keepdims=True))
    step = np.ldexp(1.0, exponent - 52)
    hi = np.round(x / step) * step
    return np.cumsum(hi, axis=axis) + np.cumsum(x - hi, axis=axis)


def expected_tau_t(units: Units, what: str = "exact E[τ_t]") -> np.ndarray:
    """E[τ_t] for t = 0..T−1."""
    rounds = units.rounds
    m = units.multiplicity
    k_max = int(_window_limit(units, units.worst_absence()).max())
    if units.is_stationary():  # W_g(t, k) = P(off) P(off|off)^{k−1}, whatever t
        k = np.arange(1, k_max + 1)[None, :]
        log_off = _log_off(units.first_on[:, None])
        log_stay = _log_off(units.on_after_off[:, :1]) if rounds > 1 else np.zeros_like(log_off)
        with np.errstate(invalid="ignore"):
            log_w = log_off + np.where(k == 1, 0.0, (k - 1) * log_stay)
        tail = _tail_from_log_window(log_w, m[:, None])  # P(τ_t ≥ k) for k ≤ t + 1
        cumulative = _prefix_sum(tail)
        return cumulative[np.minimum(np.arange(rounds), k_max - 1)]
    n_units = units.first_on.size
    cells = n_units * rounds * k_max
    chunk = max(1, int(4e6 // max(1, n_units * k_max)))
    require(f"{what} ({n_units} time-varying units, windows of up to {k_max} rounds)",
            3 * n_units * rounds * 8 + 10 * n_units * chunk * k_max * 8,
            cells * _WINDOW_CELL + (rounds / chunk) * 30 * _CALL)
    log_off = _log_off(units.on_probability())  # (G, T)
    _, on_after_off = units.transitions(0, rounds)
    on_after_off = np.asarray(on_after_off, dtype=float)
    stay_zero = on_after_off >= 1
    log_stay = _log_off(np.where(stay_zero, 0.0, on_after_off))
    result = np.empty(rounds)
    for t0 in range(0, rounds, chunk):
        t1 = min(rounds, t0 + chunk)
        first = t0 - k_max + 1                 # s runs over first..t1−1; s < 0 is padding
        lo = max(0, first)
        local = np.zeros((n_units, t1 - first))
        zeros = np.zeros((n_units, t1 - first), dtype=np.int64)
        offset = lo - first
        # LQ[s] = Σ_{u=lo+1}^{s} ln P(off at u | off at u−1), zero factors counted apart
        local[:, offset + 1 :] = _prefix_sum(log_stay[:, lo + 1 : t1], axis=1)
        zeros[:, offset + 1 :] = np.cumsum(stay_zero[:, lo + 1 : t1], axis=1)
        start_term = np.full((n_units, t1 - first), -np.inf)
        start_term[:, offset:] = log_off[:, lo:t1] - local[:, offset:]   # ln P(off at s) − LQ[s]
        windows = np.lib.stride_tricks.sliding_window_view(start_term, k_max, axis=1)      # (G, t1−t0, k)
        zero_windows = np.lib.stride_tricks.sliding_window_view(zeros, k_max, axis=1)
        at_t = slice(k_max - 1, k_max - 1 + t1 - t0)
        log_w = windows + local[:, at_t, None]
        log_w = np.where(zero_windows < zeros[:, at_t, None], -np.inf, log_w)
        with np.errstate(invalid="ignore"):
            tail = _tail_from_log_window(log_w, m[:, None, None])
        result[t0:t1] = tail.sum(axis=-1)
    return result


# ---------------------------------------------------------------------------- τ_max


def _upper_rows(units: Units, q: np.ndarray) -> np.ndarray:
    """L_g: rows l > L_g of unit g are left out (A_g(l) = 1 up to TAIL/G summed over l)."""
    rounds, n_units = units.rounds, units.first_on.size
    limit = np.full(q.shape, rounds, dtype=np.int64)
    limit[q <= 0] = 0
    inner = (q > 0) & (q < 1)
    if inner.any():
        budget = TAIL * (1 - q[inner]) / (n_units * units.multiplicity[inner] * rounds)
        limit[inner] = np.clip(np.ceil(np.log(budget) / np.log(q[inner])) - 1, 0, rounds)
    return limit


class _BlockBound:
    """log of Π_j (1 − w_j) ≥ log A_g(l), over disjoint blocks of l rounds (module docstring)."""

    def __init__(self, units: Units):
        self.units = units
        self.off0 = 1 - units.first_on
        if not units.constant:
            on_after_on, on_after_off = units.transitions(0, units.rounds)
            self.log_stay = _log(1 - np.asarray(on_after_off, dtype=float))
            self.log_enter = np.minimum(_log(1 - np.asarray(on_after_on, dtype=float)), self.log_stay)

    def log_bound(self, l: int) -> np.ndarray:
        units, rounds = self.units, self.units.rounds
        blocks = rounds // l
        if units.constant:
            stay = 1 - units.on_after_off[:, 0] if rounds > 1 else np.zeros_like(self.off0)
            run = np.power(stay, l - 1)
            first = np.log1p(-self.off0 * run)
            later = np.log1p(-np.minimum(1 - units.on_after_on[:, 0], stay) * run)
            return first + (blocks - 1) * np.where(blocks > 1, later, 0.0)
        rest = self.log_stay[:, : blocks * l].reshape(-1, blocks, l)[:, :, 1:].sum(axis=2)
        lead = self.log_enter[:, : blocks * l : l].copy()
        lead[:, 0] = _log(self.off0)
        with np.errstate(invalid="ignore"):
            return np.log1p(-np.exp(lead + rest)).sum(axis=1)


def _certified_below(units: Units, top: int) -> int:
    """The largest l ≤ top for which P(τ_max < l) < TAIL/T is certified (0 if none)."""
    if top < 1:
        return 0
    bound = _BlockBound(units)
    target = math.log(TAIL / units.rounds)
    m = units.multiplicity

    def certified(l: int) -> bool:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.sum(m * bound.log_bound(l))) < target

    lo, hi = 0, top + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if certified(mid):
            lo = mid
        else:
            hi = mid
    return lo


def tau_max_plan(units: Units, what: str = "exact E[τ_max]") -> dict:
    """Rows, block size and cost of :func:`tau_max_tail`, from the sizes alone (time-varying
    units first check the O(G·T) passes that find them)."""
    if not units.constant:
        cells = units.first_on.size * units.rounds
        require(f"{what} at T={units.rounds} ({units.first_on.size} time-varying units)", 8 * 4 * cells, 40 * cells * 5e-9)
    q = units.worst_absence()
    upper = _upper_rows(units, q)
    certified = _certified_below(units, int(upper.max(initial=0)))
    first = certified + 1
    counts = np.maximum(upper - first + 1, 0)
    rows = int(counts.sum())
    ring = int(sum((first + upper[g]) * counts[g] // 2 for g in range(counts.size) if counts[g]))
    block = max(1, min(first, BLOCK_CELLS // max(rows, 1)))
    blocks = -(-units.rounds // block)
    scan = 0 if units.independent else max(1, math.ceil(math.log2(block)))
    varying = 0 if units.constant else units.first_on.size
    span = int(upper.max(initial=0)) + block
    per_block = _BLOCK_CALLS + (_VARYING_CALLS if varying else 0)
    per_cell = _DP_CELL + scan * _SCAN_CELL + (_VARYING_CELL if varying else 0)
    seconds = blocks * per_block + units.rounds * rows * per_cell + blocks * varying * span * _DP_CELL
    nbytes = 8 * (ring + 16 * rows * block + 3 * varying * units.rounds + 6 * varying * span)
    return dict(q=q, upper=upper, first=first, counts=counts, rows=rows, ring=ring, block=block,
                seconds=seconds, nbytes=nbytes)


def tau_max_tail(units: Units, what: str = "exact E[τ_max]") -> np.ndarray:
    """P(τ_max ≥ l) for l = 1..T (ones below the certified l_0, zeros past the truncation)."""
    rounds = units.rounds
    plan = tau_max_plan(units, what)
    require(f"{what} at T={rounds} ({plan['rows']} run lengths, blocks of {plan['block']} rounds)",
            plan["nbytes"], plan["seconds"])
    first, upper, counts = plan["first"], plan["upper"], plan["counts"]
    tail = np.zeros(rounds)
    tail[: first - 1] = 1.0
    if plan["rows"] == 0:
        return tail
    unit_of = np.repeat(np.arange(counts.size), counts)
    run = np.concatenate([np.arange(first, first + c) for c in counts if c]).astype(np.int64)
    absorbed = _absorbed(units, unit_of, run, plan["block"])
    log_none = np.zeros(int(upper.max()) + 1)
    with np.errstate(divide="ignore"):
        np.add.at(log_none, run, units.multiplicity[unit_of] * np.log1p(-np.minimum(absorbed, 1.0)))
    top = int(upper.max())
    tail[first - 1 : top] = -np.expm1(log_none[first : top + 1])
    return tail


def _absorbed(units: Units, unit_of: np.ndarray, run: np.ndarray, block: int) -> np.ndarray:
    """1 − A_g(l) for each row (unit_of[i], run[i]): the recursion of the module docstring
    in blocks of ``block`` ≤ min(run) rounds.

    Row i keeps B over its last l rounds in a ring of l cells; round r sits in cell r mod l,
    which is also where B_{r−l} is read just before B_r replaces it.
    """
    rounds = units.rounds
    n_rows = run.size
    offset = np.concatenate([[0], np.cumsum(run)[:-1]])
    ring = np.zeros(int(run.sum()))
    ring[offset + run - 1] = 1.0                       # B_{−1} = 1 in the cell of round −1
    absorbed = np.zeros(n_rows)                        # 1 − S_{r0−1} = absorbed + carried (unevaluated sum)
    carried = np.zeros(n_rows)                         # the rounding errors of the block-to-block carry
    on_prev = np.ones(n_rows)                          # B_{r0−1}
    first_on = units.first_on[unit_of]
    independent = units.independent
    top = int(run.max())
    j = np.arange(block)[None, :]
    phase = np.zeros(n_rows, dtype=np.int64)           # r0 mod l
    if units.constant:
        c = units.on_after_on[unit_of, 0] if rounds > 1 else first_on
        a = units.on_after_off[unit_of, 0] if rounds > 1 else first_on
        stay_run = _off_power(a, run - 1)
        kappa_lead, kappa_later = (1 - first_on) * stay_run, ((1 - c) * stay_run)[:, None]
        decay = (c - a)[:, None]
    else:
        on_after_on, on_after_off = units.transitions(0, rounds)
    for r0 in range(0, rounds, block):
        n = min(block, rounds - r0)
        cell = phase[:, None] + j[:, :n]
        np.subtract(cell, run[:, None], out=cell, where=cell >= run[:, None])
        cell += offset[:, None]
        before = ring[cell]                            # B_{r−l}: 1 at r − l = −1, 0 before
        if units.constant:
            passage = before * kappa_later
            if r0 < top:                               # the leading run reaches l at r = l − 1
                lead = (r0 + j[:, :n]) == run[:, None] - 1
                passage[lead] = np.broadcast_to(kappa_lead[:, None], lead.shape)[lead]
            c_block, a_block = c[:, None], a[:, None]
            if r0 == 0:                                # c_0 = a_0 = P(on at 0)
                c_block = np.repeat(c_block, n, axis=1)
                a_block = np.repeat(a_block, n, axis=1)
                c_block[:, 0] = a_block[:, 0] = first_on
        else:
            kappa, c_block, a_block = _varying_factors(units, on_after_on, on_after_off, unit_of, run, r0, n, top)
            passage = before * kappa
        absorbed_block = np.cumsum(passage, axis=1)
        added = absorbed_block[:, -1].copy()
        absorbed_block += (absorbed + carried)[:, None]
        drive = 1.0 - absorbed_block
        drive += passage                               # S_{r−1} = 1 − (absorbed through r) + F_r
        drive *= a_block
        if independent:
            on = drive
        elif units.constant and r0 > 0:
            on = _scan_constant(decay, drive, on_prev)
        else:
            on = _scan(np.broadcast_to(c_block - a_block, drive.shape), drive, on_prev)
        ring[cell] = on
        absorbed, carried = _carry(absorbed, added, carried)
        on_prev = on[:, -1]
        phase += n
        np.subtract(phase, run, out=phase, where=phase >= run)
    return np.clip(absorbed + carried, 0.0, 1.0)


def _carry(total: np.ndarray, added: np.ndarray, carried: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """total + added, with the rounding error of that sum (Knuth's TwoSum, exact) kept in
    ``carried``: 1 − S_r gains one block sum per block, T/b additions of numbers near 1
    whose roundings would otherwise pile up (1.6e-13 in E[τ_max] at Bernoulli(0.9, 1),
    T = 10^6)."""
    new = total + added
    back = new - total
    carried = carried + ((total - (new - back)) + (added - back))
    return new, carried


def _scan_constant(decay: np.ndarray, drive: np.ndarray, start: np.ndarray) -> np.ndarray:
    """x_j = decay x_{j−1} + drive_j along axis 1 from x_{−1} = ``start``, decay constant per row."""
    x = drive
    x[:, 0] += decay[:, 0] * start
    power, d = decay, 1
    while d < x.shape[1]:
        x[:, d:] += power * x[:, :-d]
        power = power * power
        d *= 2
    return x


def _scan(decay: np.ndarray, drive: np.ndarray, start: np.ndarray) -> np.ndarray:
    """x_j = decay_j x_{j−1} + drive_j along axis 1 from x_{−1} = ``start`` (Hillis–Steele doubling)."""
    a, x = decay.copy(), drive
    x[:, 0] += a[:, 0] * start
    d = 1
    while d < x.shape[1]:
        x[:, d:] = x[:, d:] + a[:, d:] * x[:, :-d]
        a[:, d:] = a[:, d:] * a[:, :-d]
        d *= 2
    return x


def _varying_factors(units, on_after_on, on_after_off, unit_of, run, r0, n, top):
    """κ (the first-passage factor of B_{r−l}), c_r and a_r for rounds r0..r0+n−1 of each row."""
    lo = max(0, r0 - top + 1)                          # earliest run start needed
    hi = r0 + n
    back = np.asarray(on_after_off[:, lo:hi], dtype=float)
    kept = np.array(on_after_on[:, lo:hi], dtype=float)  # P(on at s | on at s − 1), P(on at 0) at s = 0
    if lo == 0:
        kept[:, 0] = units.first_on
    zero = back >= 1                                   # P(off | off) = 0
    local = _prefix_sum(_log_off(np.where(zero, 0.0, back)), axis=1)
    zeros = np.cumsum(zero, axis=1)
    r = np.arange(r0, hi)[None, :]
    start = np.maximum(r - run[:, None] + 1, lo)       # run start (clamped where the run cannot exist)
    g = unit_of[:, None]
    s, t = start - lo, r - lo
    log_enter = _log_off(kept[g, s])                   # ln P(off at s | on at s − 1)
    log_kappa = log_enter + local[g, t] - local[g, s]
    broken = zeros[g, t] > zeros[g, s]
    kappa = np.where(broken, 0.0, np.exp(log_kappa))
    c_block = np.asarray(on_after_on[:, r0:hi], dtype=float)[unit_of]
    a_block = np.asarray(on_after_off[:, r0:hi], dtype=float)[unit_of]
    if r0 == 0:
        c_block[:, 0] = a_block[:, 0] = units.first_on[unit_of]
    return kappa, c_block, a_block
