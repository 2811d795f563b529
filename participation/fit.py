"""Fit availability models to a participation trace and judge them on what drives delays.

Three models, each fitted per client and vectorised over clients:

* ``fit_bernoulli``: client i present in each round with probability p_i, independently
  (FedSUM §2.1, Case 2). Maximum likelihood: p̂_i = (rounds present)/T.
* ``fit_markov``: client i follows a two-state chain with a_i = P(absent → present) and
  b_i = P(present → absent), started in its stationary law π_i = a_i/(a_i + b_i)
  (CA-Fed §III-A, Assumption 1; the two-state chain of eq. (236)). Maximum likelihood
  conditional on the first round: â_i = N_01/N_0, b̂_i = N_10/N_1 with N_xy the transition
  counts of :func:`participation.markov.estimate`.
* ``fit_periodic``: client i active in round t iff (t + φ_i) mod P < c_i (the pattern
  ``OnOffCycles``), with c_i and φ_i maximising the number of rounds where the model and
  the mask agree.

Goodness of fit is judged on what sets the delays: the lengths of absence runs. τ_max is
the longest run of consecutive absences of any client (FedSUM, proof of Lemma F.1), and τ_t
is the age of the oldest run in progress, so a model that gets the run lengths right gets
the delays right.

Absence runs and the edges of the trace
---------------------------------------
An absence run is a maximal set of consecutive rounds in which a client is absent. A run
is *complete* when a presence ends it, i.e. its last round is before T − 1; the leading run
(starting at round 0) counts when it is complete, the trailing run (reaching round T − 1)
never does, being censored by the end of the trace, and a client never present has no
complete run. The goodness of fit compares the law of complete runs only; the censored
trailing runs are reported apart (``RunLengthFit.trailing``). Including the leading run is
exact for the Bernoulli and Markov models: by memorylessness, the absence that is in
progress at round 0 lasts Geometric(a) rounds from there, as an interior one does.

Under a stationary two-state chain (Bernoulli is a = p, b = 1 − p, π = p), the expected
number of complete runs of length k in T rounds is (``expected_run_counts``)

    E_k = [(1 − π)·1{k ≤ T − 1} + π·b·max(0, T − 1 − k)] · (1 − a)^{k−1} a,   k = 1..T−1,

(a run from round 0: absent at 0..k−1, present at k; a run from round s ≥ 1: present at s − 1,
absent at s..s+k−1, present at s + k ≤ T − 1). The model's law of a complete run is
E_k / Σ_j E_j: the geometric law (1 − a)^{k−1} a with success probability a (Bernoulli: p;
Markov: one minus the chain's stay-off probability), reweighted by the number of places a
complete run of length k has in the window. For the periodic model the law
is that of the fitted model's own complete runs in the same T rounds (deterministic).

Statistics: per client the Kolmogorov–Smirnov distance D_i = max_k |F̂_i(k) − F_i(k)|
between the empirical and the model CDF of complete-run lengths, and the total-variation
distance ½ Σ_k |f̂_i(k) − f_i(k)|; pooled, the same distances between all clients' runs
together and the mixture Σ_i (n_i/n) f_i weighted by the observed run counts n_i. The
p-values of the KS distances are parametric-bootstrap p-values, p = (1 + #{D* ≥ D})/(B + 1),
over B traces drawn from the fitted model and refitted (so that estimating the parameters
is accounted for, and so is the discreteness of run lengths, for which the tabulated KS
law of ``scipy.stats.kstest`` would not hold). The periodic model draws nothing: its
distances are reported without p-values.

Clients never present (p̂ = 0) stay never available in every fitted model (Bernoulli
p = 0; Markov: pinned off by ``PinnedClients``, a chain needing π ∈ (0, 1); periodic:
active = 0), are listed in ``never`` and have no complete run (distances 0, p-value 1,
``n_runs`` 0). Clients always present are kept always available likewise (``always``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ._random import seed_sequence
from .markov import estimate as _estimate_markov
from .markov import transition_counts
from .patterns import Bernoulli, Markov, Pattern
from .trace import as_mask
from .validation import integer

__all__ = [
    "AbsenceRuns", "absence_runs", "complete_run_counts", "expected_run_counts", "PinnedClients",
    "RunLengthFit", "BernoulliFit", "MarkovFit", "PeriodicFit", "fit_bernoulli", "fit_markov", "fit_periodic",
    "FitRow", "FitComparison", "compare_fits",
]

#: Cells (replicates × rounds × clients) handled per bootstrap chunk.
CHUNK_CELLS = 1 << 22
#: Bootstrap replicates of a goodness-of-fit test unless told.
DEFAULT_REPS = 199


# --------------------------------------------------------------------------------------
# absence runs
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AbsenceRuns:
    """Every absence run of a trace, ordered by client then start round.

    ``client``, ``start``, ``length`` describe run j; ``left_censored`` is True when it starts
    at round 0, ``right_censored`` when it reaches round T − 1 (then it is not *complete*).
    """

    client: np.ndarray
    start: np.ndarray
    length: np.ndarray
    left_censored: np.ndarray
    right_censored: np.ndarray
    n_rounds: int
    n_clients: int

    @property
    def complete(self) -> np.ndarray:
        """Mask of the runs ended by a presence (the ones the goodness of fit uses)."""
        return ~self.right_censored

    def counts(self, complete_only: bool = True) -> np.ndarray:
        """counts[i, k] = number of runs of client i of length k, k = 0..T (column 0 is 0)."""
        keep = self.complete if complete_only else np.ones(self.length.shape, bool)
        flat = self.client[keep] * (self.n_rounds + 1) + self.length[keep]
        size = self.n_clients * (self.n_rounds + 1)
        return np.bincount(flat, minlength=size).reshape(self.n_clients, self.n_rounds + 1)


def absence_runs(x) -> AbsenceRuns:
    """All maximal absence runs of a trace (a ``Trace`` or a 0/1 array ``(T, N)``).

    A run of client i is a maximal [s, e] with i absent in rounds s..e; its length is
    e − s + 1. Found without a loop over clients: padding the mask with a presence on each
    side, runs start where presence turns into absence and end where absence turns into
    presence; taken client by client (transposed order), starts and ends pair up.
    """
    mask = as_mask(x, what="trace")
    rounds, n = mask.shape
    padded = np.ones((n, rounds + 2), dtype=bool)
    padded[:, 1:-1] = mask.T
    client_s, start = np.nonzero(padded[:, :-1] & ~padded[:, 1:])      # start = first absent round
    _, stop = np.nonzero(~padded[:, :-1] & padded[:, 1:])             # stop = first present round after
    length = stop - start
    out = dict(client=client_s.astype(np.int64), start=start.astype(np.int64), length=length.astype(np.int64),
               left_censored=start == 0, right_censored=stop == rounds)
    for v in out.values():
        v.flags.writeable = False
    return AbsenceRuns(**out, n_rounds=rounds, n_clients=n)


def complete_run_counts(x) -> np.ndarray:
    """counts[..., i, k] = number of complete absence runs of length k of client i.

    ``x`` is a ``(T, N)`` mask or a batch ``(reps, T, N)``; the result has shape
    ``(N, T)`` or ``(reps, N, T)``, k = 0..T−1 (column 0 is 0; a complete run has length
    ≤ T − 1). A complete run ends at round t ≤ T − 2 where the client is absent and present
    at t + 1; its length is t − a_{i,t}, with a_{i,t} the last round ≤ t the client was
    present (−1 if none, FedSUM eqs. (2)–(3)).
    """
    mask = as_mask(x, what="trace", batch=True)
    batch = mask.ndim == 3
    mask3 = mask if batch else mask[None]
    reps, rounds, n = mask3.shape
    t = np.arange(rounds, dtype=np.int32)[:, None]
    last = np.maximum.accumulate(np.where(mask3, t, np.int32(-1)), axis=1)
    rep, end, client = np.nonzero(~mask3[:, :-1] & mask3[:, 1:])
    length = end - last[rep, end, client]
    counts = np.bincount((rep * n + client) * rounds + length, minlength=reps * n * rounds).reshape(reps, n, rounds)
    return counts if batch else counts[0]


def _trailing(mask: np.ndarray) -> np.ndarray:
    """Length of each client's censored trailing run (0 if present at T − 1; T if never present)."""
    rounds = mask.shape[0]
    present = mask.any(axis=0)
    last = rounds - 1 - np.argmax(mask[::-1], axis=0)
    return np.where(present, rounds - 1 - last, rounds).astype(np.int64)


def expected_run_counts(a, b, pi, rounds: int) -> np.ndarray:
    """E_k, the expected number of complete absence runs of length k, k = 0..T−1.

    For a two-state chain with P(absent → present) = a, P(present → absent) = b, in its
    stationary law (present with probability π) at round 0 (see the module docstring)::

        E_k = [(1 − π)·1{k ≤ T − 1} + π·b·max(0, T − 1 − k)] · (1 − a)^{k−1} a,

    E_0 = 0. Independent Bernoulli(p) participation is a = p, b = 1 − p, π = p. ``a``,
    ``b``, ``pi`` broadcast; the result has their shape + (T,).
    """
    rounds = integer(rounds, "rounds")
    a, b, pi = (np.asarray(v, dtype=float)[..., None] for v in (a, b, pi))
    k = np.arange(rounds, dtype=float)
    starts = (1.0 - pi) + pi * b * np.maximum(0.0, rounds - 1.0 - k)
    with np.errstate(invalid="ignore"):
        geometric = np.power(1.0 - a, np.maximum(k - 1.0, 0.0)) * a
    out = np.where(k >= 1, starts * geometric, 0.0)
    return out


# --------------------------------------------------------------------------------------
# distances between run-length laws
# --------------------------------------------------------------------------------------
def _normalise(w: np.ndarray) -> np.ndarray:
    total = w.sum(axis=-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w, dtype=float), where=total > 0)


def _distances(counts: np.ndarray, law: np.ndarray):
    """Per-client and pooled KS and TV distances.

    ``counts`` (..., N, K) observed complete runs by length, ``law`` (..., N, K) model law
    per client (rows summing to 1, or 0 where the model has no complete run). Clients with no
    observed run get distance 0. Returns (ks, tv, n_runs, pooled_ks, pooled_tv).
    """
    n_runs = counts.sum(axis=-1)
    has = n_runs > 0
    emp = _normalise(counts.astype(float))
    diff = emp - law
    ks = np.where(has, np.abs(np.cumsum(diff, axis=-1)).max(axis=-1), 0.0)
    tv = np.where(has, 0.5 * np.abs(diff).sum(axis=-1), 0.0)
    total = n_runs.sum(axis=-1, keepdims=True)
    weight = np.divide(n_runs, total, out=np.zeros(n_runs.shape), where=total > 0)
    pooled_emp = _normalise(counts.sum(axis=-2).astype(float))
    pooled_law = (weight[..., None] * law).sum(axis=-2)
    pooled_diff = pooled_emp - pooled_law
    pooled_ks = np.abs(np.cumsum(pooled_diff, axis=-1)).max(axis=-1)
    pooled_tv = 0.5 * np.abs(pooled_diff).sum(axis=-1)
    return ks, tv, n_runs, pooled_ks, pooled_tv


@dataclass(frozen=True, eq=False)
class RunLengthFit:
    """Goodness of fit of a model's law of complete absence-run lengths (module docstring).

    ``ks``, ``tv``: per-client Kolmogorov–Smirnov and total-variation distances between
    the observed and the model law; ``pvalue``: parametric-bootstrap p-values of ``ks``
    (None for a deterministic model); ``n_runs``: complete runs per client; ``trailing``:
    length of the censored trailing run per client (excluded from the fit); ``pooled_*``:
    the same over all clients' runs against the run-count-weighted mixture of the model
    laws; ``reps``: bootstrap replicates (0 when none).
    """

    ks: np.ndarray
    tv: np.ndarray
    pvalue: np.ndarray | None
    n_runs: np.ndarray
    trailing: np.ndarray
    pooled_ks: float
    pooled_tv: float
    pooled_pvalue: float | None
    reps: int
    method: str

    def rejected(self, level: float = 0.05) -> np.ndarray:
        """Clients whose bootstrap p-value is at most ``level`` (none for a deterministic model)."""
        if self.pvalue is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.pvalue <= level)

    def __str__(self) -> str:
        tested = int((self.n_runs > 0).sum())
        line = f"pooled KS {self.pooled_ks:.3f}, TV {self.pooled_tv:.3f}"
        if self.pooled_pvalue is not None:
            line += f", bootstrap p = {self.pooled_pvalue:.3g} ({self.reps} reps)"
            line += f"; {self.rejected().size}/{tested} clients rejected at 5%"
        else:
            line += " (deterministic model: no p-value)"
        return line + f"; median per-client KS {np.median(self.ks[self.n_runs > 0]) if tested else 0.0:.3f}"


def _observed_fit(counts, law, trailing, method) -> RunLengthFit:
    ks, tv, n_runs, pks, ptv = _distances(counts, law)
    return RunLengthFit(_frozen(ks), _frozen(tv), None, _frozen(n_runs), _frozen(trailing), float(pks), float(ptv),
                        None, 0, method)


def _bootstrap_fit(mask, law, pattern, refit_law, reps, seed, method) -> RunLengthFit:
    """Observed distances plus parametric-bootstrap p-values: ``reps`` traces drawn from
    ``pattern``, each refitted by ``refit_law(batch) -> law (reps, N, T)``."""
    counts = complete_run_counts(mask)
    observed = _observed_fit(counts, law, _trailing(mask), method)
    reps = integer(reps, "reps")
    root = seed_sequence(seed)  # once: a Generator seed is consumed here, not per chunk
    rounds, n = mask.shape
    exceed = np.zeros(n, dtype=np.int64)
    exceed_pooled = 0
    chunk = max(1, CHUNK_CELLS // (rounds * n))
    tol = 1e-12
    for first in range(0, reps, chunk):
        batch = pattern.sample_batch(rounds, min(chunk, reps - first), root, first_replicate=first)
        ks, _, _, pks, _ = _distances(complete_run_counts(batch), refit_law(batch))
        exceed += (ks >= observed.ks - tol).sum(axis=0)
        exceed_pooled += int((pks >= observed.pooled_ks - tol).sum())
    pvalue = np.where(observed.n_runs > 0, (1.0 + exceed) / (reps + 1.0), 1.0)
    return RunLengthFit(observed.ks, observed.tv, _frozen(pvalue), observed.n_runs, observed.trailing,
                        observed.pooled_ks, observed.pooled_tv, (1.0 + exceed_pooled) / (reps + 1.0), reps, method)


def _frozen(array) -> np.ndarray:
    array = np.array(array)
    array.flags.writeable = False
    return array


# --------------------------------------------------------------------------------------
# a pattern with clients pinned never / always available
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PinnedClients(Pattern):
    """``base`` drives the clients ``free`` (in order); the clients in ``always`` are present
    in every round and all others are never present.

    Used by the fits to keep clients that were never (or always) present in the trace so
    in the model when the model's own pattern cannot (a Markov chain needs π ∈ (0, 1)).
    Replicate r of seed s is replicate r of ``base`` with the pinned columns inserted.
    """

    base: Pattern | None
    n_clients: int
    free: np.ndarray
    always: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self):
        n = integer(self.n_clients, "n_clients")
        free = np.asarray(self.free, dtype=np.int64).reshape(-1)
        always = np.asarray(self.always, dtype=np.int64).reshape(-1)
        both = np.concatenate([free, always])
        if both.size and (both.min() < 0 or both.max() >= n or np.unique(both).size != both.size):
            raise ValueError("free and always must be distinct client ids in [0, n_clients)")
        if (self.base is None) != (free.size == 0):
            raise ValueError("base is needed exactly when some clients are free")
        if self.base is not None and self.base.n_clients != free.size:
            raise ValueError(f"base has {self.base.n_clients} clients, {free.size} free clients given")
        object.__setattr__(self, "free", _frozen(free))
        object.__setattr__(self, "always", _frozen(always))

    @property
    def deterministic(self) -> bool:
        return self.base is None or bool(self.base.deterministic)

    @property
    def never(self) -> np.ndarray:
        """Ids of the clients never present."""
        pinned = np.ones(self.n_clients, dtype=bool)
        pinned[self.free] = False
        pinned[self.always] = False
        return np.flatnonzero(pinned)

    def _generate(self, root, replicates, start, stop):
        out = np.zeros((len(replicates), stop - start, self.n_clients), dtype=bool)
        if self.base is not None:
            out[:, :, self.free] = self.base.sample_batch(stop - start, len(replicates), root, start=start,
                                                          first_replicate=replicates.start)
        out[:, :, self.always] = True
        return out


def _pin(base_factory, keep: np.ndarray, always: np.ndarray, n: int) -> Pattern:
    """PinnedClients over ``base_factory(keep)`` (keep: bool mask of free clients)."""
    free = np.flatnonzero(keep)
    base = base_factory(keep) if free.size else None
    return PinnedClients(base, n, free, np.flatnonzero(always))


# --------------------------------------------------------------------------------------
# Bernoulli
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BernoulliFit:
    """Independent Bernoulli participation fitted to a trace (``fit_bernoulli``).

    ``p``: p̂_i = (rounds present)/T, the maximum-likelihood estimate, with standard error
    ``p_stderr`` = sqrt(p̂(1 − p̂)/T); ``never``/``always``: clients with p̂ = 0 / 1;
    ``pattern``: the fitted pattern; ``goodness``: the run-length fit (law: geometric with
    success probability p̂_i, truncated by the window).
    """

    pattern: Pattern
    p: np.ndarray
    p_stderr: np.ndarray
    never: np.ndarray
    always: np.ndarray
    goodness: RunLengthFit
    n_rounds: int
    name: str = "bernoulli"

    @property
    def n_clients(self) -> int:
        return self.p.size

    def __str__(self) -> str:
        return (f"Bernoulli fit: {self.n_clients} clients, {self.n_rounds} rounds, mean p = {self.p.mean():.3g}, "
                f"{self.never.sum()} never / {self.always.sum()} always present\n  {self.goodness}")


def _bernoulli_law(mask_batch: np.ndarray) -> np.ndarray:
    p = mask_batch.mean(axis=-2)
    return _normalise(expected_run_counts(p, 1.0 - p, p, mask_batch.shape[-2]))


def fit_bernoulli(trace, *, reps: int = DEFAULT_REPS, seed=0) -> BernoulliFit:
    """Fit independent participation, i ∈ S_t with probability p_i (FedSUM Case 2).

    The likelihood Π_t p_i^{x_{t,i}} (1 − p_i)^{1 − x_{t,i}} is maximal at p̂_i = (1/T) Σ_t x_{t,i},
    the participation rate. A client never present keeps p = 0 (never available), one always
    present p = 1. Goodness of fit: the run-length laws, with ``reps`` bootstrap traces
    drawn with ``seed`` (module docstring).
    """
    mask = as_mask(trace, what="trace")
    rounds, n = mask.shape
    p = mask.mean(axis=0)
    never, always = p == 0, p == 1
    pattern = Bernoulli(p)  # p = 0: a never-available client
    goodness = _bootstrap_fit(mask, _bernoulli_law(mask), pattern, _bernoulli_law, reps, seed,
                              "complete absence runs vs truncated Geometric(p̂); parametric bootstrap of KS")
    return BernoulliFit(pattern, _frozen(p), _frozen(np.sqrt(p * (1 - p) / rounds)), _frozen(never), _frozen(always),
                        goodness, rounds)


# --------------------------------------------------------------------------------------
# Markov
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MarkovFit:
    """Per-client two-state Markov availability fitted to a trace (``fit_markov``).

    ``a`` = P(absent → present), ``b`` = P(present → absent); ``pi`` = a/(a + b) the
    stationary availability of the fitted chain and ``lam`` = 1 − a − b its second
    eigenvalue (CA-Fed eqs. (236)–(238)); ``stay_off`` = 1 − a, the parameter of the law of
    absence runs. ``rate`` is the observed participation rate. ``regularised`` marks the
    clients whose maximum-likelihood rate was 0, undefined, or a = b = 1 (see
    ``fit_markov``). ``transitions[i, x, y]`` are the counts N_xy. Clients never / always
    present have a = b = pi = lam = 0 / (a, b, pi) = (1, 0, 1) by convention and are pinned
    in the pattern.
    """

    pattern: Pattern
    a: np.ndarray
    b: np.ndarray
    pi: np.ndarray
    lam: np.ndarray
    rate: np.ndarray
    regularised: np.ndarray
    transitions: np.ndarray
    never: np.ndarray
    always: np.ndarray
    goodness: RunLengthFit
    n_rounds: int
    name: str = "markov"

    @property
    def stay_off(self) -> np.ndarray:
        return 1.0 - self.a

    @property
    def n_clients(self) -> int:
        return self.a.size

    def __str__(self) -> str:
        free = ~(self.never | self.always)
        lam = float(np.median(self.lam[free])) if free.any() else float("nan")
        return (f"Markov fit: {self.n_clients} clients, {self.n_rounds} rounds, median λ = {lam:.3g}, "
                f"{self.never.sum()} never / {self.always.sum()} always present, {self.regularised.sum()} regularised\n"
                f"  {self.goodness}")


def _markov_rates(counts: np.ndarray, rate: np.ndarray, prior: float = 0.0):
    """(a, b, pi, regularised, never, always) per client from the transition counts and the
    participation rate, vectorised over any leading axes.

    a = (N_01 + c)/(N_0 + 2c), b = (N_10 + c)/(N_1 + 2c) with c = ``prior``; a rate that is
    then 0 or undefined, or a = b = 1, is replaced by the Jeffreys estimate (N_xy + ½)/(N_x + 1).
    Clients never present get a = b = π = 0, clients always present a = 1, b = 0, π = 1.
    """
    n00, n01, n10, n11 = (counts[..., x, y].astype(float) for x, y in ((0, 0), (0, 1), (1, 0), (1, 1)))
    n0, n1 = n00 + n01, n10 + n11
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (n01 + prior) / (n0 + 2.0 * prior)
        b = (n10 + prior) / (n1 + 2.0 * prior)
    never, always = rate == 0, rate == 1
    free = ~(never | always)
    both_one = (a == 1) & (b == 1)
    fix_a = free & (~np.isfinite(a) | (a == 0) | both_one)
    fix_b = free & (~np.isfinite(b) | (b == 0) | both_one)
    a = np.where(fix_a, (n01 + 0.5) / (n0 + 1.0), a)
    b = np.where(fix_b, (n10 + 0.5) / (n1 + 1.0), b)
    a = np.where(never, 0.0, np.where(always, 1.0, a))
    b = np.where(free, b, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pi = np.where(free, a / (a + b), np.where(always, 1.0, 0.0))
    return a, b, pi, fix_a | fix_b, never, always


def _markov_law(mask_batch: np.ndarray) -> np.ndarray:
    a, b, pi, *_ = _markov_rates(transition_counts(mask_batch), mask_batch.mean(axis=-2))
    return _normalise(expected_run_counts(a, b, pi, mask_batch.shape[-2]))


def fit_markov(trace, *, prior: float = 0.0, reps: int = DEFAULT_REPS, seed=0) -> MarkovFit:
    """Fit independent two-state availability chains (CA-Fed §III-A, eq. (236)).

    With N_xy the number of rounds s ≥ 1 where the client is in state x at s − 1 and y at s
    (state 1 = present), N_x = N_x0 + N_x1, the likelihood conditional on round 0,
    a^{N_01}(1 − a)^{N_00} b^{N_10}(1 − b)^{N_11}, is maximal at

        â = N_01 / N_0,   b̂ = N_10 / N_1,   π̂ = â/(â + b̂),   λ̂ = 1 − â − b̂,

    the counting estimate of :func:`participation.markov.estimate` (whose transition
    counts are reused; ``prior`` = c adds c pseudo-counts to every N_xy as there). Where
    the maximum is degenerate — a state never left (â = 0: absent to the end; b̂ = 0),
    never visited before the last round (N_x = 0), or â = b̂ = 1 (a periodic chain) — the
    rate is replaced by the Jeffreys posterior mean (N_xy + ½)/(N_x + 1), which keeps the
    chain irreducible and aperiodic (Assumption 1), and the client is flagged
    ``regularised``. Clients never present stay never available, clients always present
    stay always available (pinned, reported in ``never``/``always``).

    The fitted pattern starts each chain in its stationary law π̂. Goodness of fit: the
    run-length laws, geometric with success probability â, by parametric bootstrap
    (``reps`` traces drawn with ``seed``; module docstring).
    """
    mask = as_mask(trace, what="trace")
    rounds, n = mask.shape
    if rounds < 2:
        raise ValueError("fit_markov needs at least two rounds (one transition)")
    prior = float(prior)
    if not (prior >= 0 and math.isfinite(prior)):
        raise ValueError(f"prior must be a finite number >= 0, got {prior}")
    counts = _estimate_markov(mask, prior).transitions
    a, b, pi, regularised, never, always = _markov_rates(counts, mask.mean(axis=0), prior)
    free = ~(never | always)
    lam = np.where(free, 1.0 - a - b, 0.0)
    if free.all():
        pattern = Markov.from_rates(a, b)
    else:
        pattern = _pin(lambda keep: Markov.from_rates(a[keep], b[keep]), free, always, n)
    law = _normalise(expected_run_counts(a, b, pi, rounds))
    goodness = _bootstrap_fit(mask, law, pattern, _markov_law, reps, seed,
                              "complete absence runs vs truncated Geometric(a); parametric bootstrap of KS")
    return MarkovFit(pattern, _frozen(a), _frozen(b), _frozen(pi), _frozen(lam), _frozen(mask.mean(axis=0)),
                     _frozen(regularised), _frozen(counts), _frozen(never), _frozen(always), goodness, rounds)


# --------------------------------------------------------------------------------------
# periodic on/off cycles
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PeriodicFit:
    """On/off cycles of a given period fitted to a trace (``fit_periodic``).

    Client i is active in round t iff (t + ``phases[i]``) mod ``period`` < ``active[i]``.
    ``agreement[i]`` is the fraction of rounds where the fitted model and the mask agree;
    ``mode`` says how the active counts were chosen (``fit_periodic``'s ``active``).
    ``never``/``always``: clients with active = 0 / active = period in the fit.
    """

    pattern: Pattern
    period: int
    active: np.ndarray
    phases: np.ndarray
    agreement: np.ndarray
    never: np.ndarray
    always: np.ndarray
    goodness: RunLengthFit
    n_rounds: int
    mode: str = "agreement"

    @property
    def name(self) -> str:
        return f"periodic({self.period})" if self.mode == "agreement" else f"periodic({self.period}, rate)"

    @property
    def n_clients(self) -> int:
        return self.active.size

    def __str__(self) -> str:
        return (f"Periodic fit (period {self.period}): {self.n_clients} clients, {self.n_rounds} rounds, "
                f"mean agreement {self.agreement.mean():.3f}, {self.never.sum()} never / {self.always.sum()} always "
                f"active\n  {self.goodness}")


def _folded_scores(mask: np.ndarray, period: int):
    """(base, prefix) with agreement(c, s) = base + prefix[s + c] − prefix[s] (see ``_best_cycles``)."""
    rounds, n = mask.shape
    residue = np.arange(rounds) % period
    on = np.zeros((period, n), dtype=np.int64)
    np.add.at(on, residue, mask.astype(np.int64))
    m = np.bincount(residue, minlength=period).astype(np.int64)
    g = 2 * on - m[:, None]
    base = (m[:, None] - on).sum(axis=0)
    prefix = np.zeros((2 * period + 1, n), dtype=np.int64)
    prefix[1:] = np.cumsum(np.concatenate([g, g]), axis=0)
    return base, prefix


def _best_cycles(mask: np.ndarray, period: int, active: np.ndarray | None = None):
    """Per client, the (active, phase) maximising Σ_t 1{x_{t,i} = 1{(t + φ) mod P < c}}.

    Fold the rounds by residue r = t mod P: on[r, i] rounds present, m[r] rounds in all, and
    g[r, i] = 2·on[r, i] − m[r]. The model is active on the cyclic window of residues
    s, s+1, ..., s+c−1 (mod P) with s = −φ mod P, so

        agreement(c, s) = Σ_r (m[r] − on[r, i]) + Σ_{j<c} g[(s + j) mod P, i],

    a window sum of the doubled prefix sums of g. Each c is scanned over all φ and clients
    at once (O(P²N)). Ties go to the smallest c, then the smallest φ. With ``active`` given
    (one c per client) only the phase is chosen.
    """
    rounds, n = mask.shape
    base, prefix = _folded_scores(mask, period)
    start = (-np.arange(period)) % period           # window start s of phase φ = 0, 1, ..., P − 1
    columns = np.arange(n)
    if active is not None:
        score = base + prefix[start[:, None] + active[None, :], columns] - prefix[start[:, None], columns]
        phase = np.where((active == 0) | (active == period), 0, np.argmax(score, axis=0))
        return active, phase, score[phase, columns] / rounds
    best = base.copy()  # c = 0: never active
    best_c = np.zeros(n, dtype=np.int64)
    best_phase = np.zeros(n, dtype=np.int64)
    for c in range(1, period + 1):
        score = base + (prefix[start + c] - prefix[start])          # (P phases, N)
        phase = np.argmax(score, axis=0) if c < period else np.zeros(n, dtype=np.int64)
        top = score[phase, columns]
        better = top > best
        best = np.where(better, top, best)
        best_c = np.where(better, c, best_c)
        best_phase = np.where(better, phase, best_phase)
    return best_c, best_phase, best / rounds


def fit_periodic(trace, period: int, *, active: str = "agreement") -> PeriodicFit:
    """Fit ``OnOffCycles(n, period, active, phases)``: client i active in round t iff
    (t + φ_i) mod P < c_i, with (c_i, φ_i) ∈ {0..P} × {0..P−1} maximising the agreement
    (1/T) Σ_t 1{x_{t,i} = 1{(t + φ_i) mod P < c_i}} (vectorised over clients, see
    ``_best_cycles``; ties to the smallest c, then φ). A client never present gets c = 0
    (never available).

    Maximum agreement is a 0–1 loss: a client present in fewer than about half of the
    rounds of every residue is best matched by c = 0 (never active), which makes rarely
    available clients never available in the model. ``active="rate"`` keeps each client's
    duty cycle instead, c_i = round(P·p̂_i) (halves up; ``OnOffCycles.from_probability``),
    p̂_i its participation rate, and fits the phase alone by maximum agreement.

    The model draws nothing; its run-length fit compares the trace's complete absence runs
    with the fitted model's own in the same rounds (KS and TV, no p-value).
    """
    from .patterns import OnOffCycles  # added beside this module; imported when needed

    mask = as_mask(trace, what="trace")
    rounds, n = mask.shape
    period = integer(period, "period")
    period = int(period)
    if active not in ("agreement", "rate"):
        raise ValueError(f"active must be 'agreement' or 'rate', got {active!r}")
    mode = active
    duty = np.floor(period * mask.mean(axis=0) + 0.5).astype(np.int64) if mode == "rate" else None
    active, phases, agreement = _best_cycles(mask, period, duty)
    pattern = OnOffCycles(n, period, active, phases)
    model = np.asarray(pattern.sample(rounds, 0).mask)
    law = _normalise(complete_run_counts(model).astype(float))
    goodness = _observed_fit(complete_run_counts(mask), law, _trailing(mask),
                             "complete absence runs vs the fitted cycles' own runs (deterministic)")
    return PeriodicFit(pattern, period, _frozen(active), _frozen(phases), _frozen(agreement), _frozen(active == 0),
                       _frozen(active == period), goodness, rounds, mode)


# --------------------------------------------------------------------------------------
# expected delays under the fitted models
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FitRow:
    """E[τ_max] and E[τ_avg] under one fitted model over the trace's T rounds; standard
    errors are 0 for exact values (``method`` says which)."""

    name: str
    tau_max: float
    tau_max_stderr: float
    tau_avg: float
    tau_avg_stderr: float
    method: str


@dataclass(frozen=True)
class FitComparison:
    """The trace's own τ_max and τ_avg beside E[τ_max], E[τ_avg] under each fitted model."""

    n_rounds: int
    n_clients: int
    tau_max: int
    tau_avg: float
    rows: tuple[FitRow, ...]

    def row(self, name: str) -> FitRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"no fit named {name!r}; have {[r.name for r in self.rows]}")

    def __str__(self) -> str:
        width = max([len("model"), len("trace")] + [len(r.name) for r in self.rows]) + 2

        def fmt(mean, stderr):
            return f"{mean:.4g}" if stderr == 0 else f"{mean:.4g} ± {stderr:.2g}"

        lines = [f"Delays over T = {self.n_rounds} rounds, N = {self.n_clients} clients",
                 f"{'model':<{width}}{'E[tau_max]':>18}{'ratio':>8}{'E[tau_avg]':>20}{'ratio':>8}  method",
                 f"{'trace':<{width}}{self.tau_max:>18d}{'':>8}{self.tau_avg:>20.4g}{'':>8}  observed"]
        def ratio(value, observed):
            return f"{value / observed:>8.2f}" if observed else f"{'n/a':>8}"

        for r in self.rows:
            lines.append(f"{r.name:<{width}}{fmt(r.tau_max, r.tau_max_stderr):>18}{ratio(r.tau_max, self.tau_max)}"
                         f"{fmt(r.tau_avg, r.tau_avg_stderr):>20}{ratio(r.tau_avg, self.tau_avg)}  {r.method}")
        return "\n".join(lines)


def _expected_delays(fit, rounds: int, reps: int, seed) -> FitRow:
    from .expected import exact_tau_avg, exact_tau_max, monte_carlo

    if np.any(fit.never):
        # a client never present has age t + 1 in round t, the largest possible: τ_t = t + 1
        return FitRow(fit.name, float(rounds), 0.0, (rounds + 1) / 2.0, 0.0, "exact (a client is never available)")
    pattern = fit.pattern
    if isinstance(pattern, PinnedClients):  # only always-present clients pinned: their age is 0
        pattern = pattern.base
        if pattern is None:
            return FitRow(fit.name, 0.0, 0.0, 0.0, 0.0, "exact (every client always available)")
    try:
        return FitRow(fit.name, exact_tau_max(pattern, rounds), 0.0, exact_tau_avg(pattern, rounds), 0.0, "exact")
    except ValueError:
        mc = monte_carlo(pattern, rounds, reps, seed, progress=False)
        return FitRow(fit.name, mc.tau_max.mean, mc.tau_max.stderr, mc.tau_avg.mean, mc.tau_avg.stderr,
                      f"Monte-Carlo ({reps} reps)")


def compare_fits(trace, fits, reps: int = 1000, seed=0) -> FitComparison:
    """E[τ_max] and E[τ_avg] over the trace's T rounds under each fitted model, beside the
    trace's own τ_max and τ_avg (FedSUM §2.2).

    ``fits`` is a sequence of fit results (rows named by ``fit.name``) or a mapping
    name → fit. Exact where :mod:`participation.expected` has a formula (Bernoulli and
    Markov: the exact law of τ_max; a deterministic pattern: its own delays), else
    :func:`participation.expected.monte_carlo` with ``reps`` replicates and ``seed``,
    with its standard error. A model with a client never available has τ_t = t + 1 in
    every round, hence E[τ_max] = T and E[τ_avg] = (T + 1)/2 exactly.
    """
    from .delays import delay_metrics

    mask = as_mask(trace, what="trace")
    rounds, n = mask.shape
    reps = integer(reps, "reps")
    items = list(fits.items()) if isinstance(fits, Mapping) else [(f.name, f) for f in fits]
    rows = []
    for name, fit in items:
        if fit.n_clients != n:
            raise ValueError(f"fit {name!r} has {fit.n_clients} clients, the trace {n}")
        rows.append(dataclasses.replace(_expected_delays(fit, rounds, reps, seed), name=name))
    m = delay_metrics(mask)
    return FitComparison(rounds, n, int(m.tau_max), float(m.tau_avg), tuple(rows))
