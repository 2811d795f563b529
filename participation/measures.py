"""Participation measures of a trace: candidate quantities that may predict how fast
federated training converges under a participation sequence.

A trace is the boolean mask ``mask[t, n] = 1{n ∈ S_t}`` of shape (T, N) (rounds × clients,
:mod:`participation.trace`), or a :class:`~participation.trace.Trace`. Every measure is
computed with numpy over all rounds and clients at once.

* ``tau_max``, ``tau_avg`` — FedSUM's delays (R. You, S. Pu, arXiv:2512.18275, §2.2), from
  :func:`participation.delays.delay_metrics`.
* :func:`longest_empty_run` — the longest run of consecutive rounds with S_t = ∅. FedSUM's
  server steps in every round, an empty one too, along its stored sum of every client's
  latest update (arXiv:2512.18275, Algorithms 1–3); in an empty round all of it is stale.
* :func:`longest_group_absence` — the longest run of rounds in which no client of some group
  (e.g. the clients sharing a dominant label) takes part, maximised over the groups.
* :func:`participation_error` — the realised participation error δ²(P) of S. Wang, M. Ji,
  "A Unified Analysis of Federated Learning with Arbitrary Client Participation",
  NeurIPS 2022, arXiv:2205.13648, §3, with FedAvg's aggregation weights.
* :func:`return_time` — the largest mean return time T / (number of participations) over
  the clients, the empirical 1/π_n.
* :func:`mixing_time` — the largest relaxation time of the two-state chain fitted to each
  client's participation.
* :func:`label_coverage` — the mean total-variation distance between the label mix of the
  participations in a window of rounds and the population's label mix.
* :func:`measures` — all of them as one dict, keyed as in :data:`NAMES`; :data:`CITATIONS`
  gives each key's source in one line.

Times are in rounds; ``inf`` marks a quantity that the trace leaves unbounded
(a client that never takes part, a client that never switches state). Every bad argument
is a one-line ValueError that names it.
"""
from __future__ import annotations

import math

import numpy as np

from .delays import delay_metrics
from .trace import as_mask
from .validation import integer

__all__ = ["NAMES", "CITATIONS", "longest_empty_run", "longest_group_absence", "participation_error", "return_time",
           "mixing_time", "label_coverage", "default_scale", "measures"]

#: Keys of :func:`measures`, in order (the group and label measures appear only when their
#: inputs are given).
NAMES = ("tau_max", "tau_avg", "longest_empty_run", "longest_group_absence", "participation_error", "return_time",
         "mixing_time", "label_coverage")

#: One line per key of :func:`measures`: where the quantity comes from.
CITATIONS = {
    "tau_max": "R. You, S. Pu, FedSUM, arXiv:2512.18275, §2.2: τ_max = max_t τ_t, eq. (4) for τ_t",
    "tau_avg": "R. You, S. Pu, FedSUM, arXiv:2512.18275, §2.2: τ_avg = (1/T) Σ_t τ_t",
    "longest_empty_run": "FedSUM, arXiv:2512.18275, Algorithms 1-3: the server steps along its stale sum when "
                         "S_t = ∅",
    "longest_group_absence": "longest run of rounds with no participant from some group of clients (a group: e.g. "
                             "one dominant label)",
    "participation_error": "S. Wang, M. Ji, NeurIPS 2022, arXiv:2205.13648, §3: participation error δ²(P), "
                           "realised on the trace with FedAvg's weights 1/|S_t|",
    "return_time": "M. Even, ICML 2023, arXiv:2302.14428: Markov-sampled SGD's lower bound via the hitting time, "
                   "≥ max_n 1/π_n − 1 (Kac)",
    "mixing_time": "Levin, Peres, Wilmer, Markov Chains and Mixing Times, 2nd ed., Ch. 12: t_rel = 1/(1 − |λ|) of "
                   "each client's fitted two-state chain",
    "label_coverage": "mean over windows of the total-variation distance between the participants' label mix and "
                      "the population's",
}


def _mask(mask) -> np.ndarray:
    return as_mask(mask, what="mask")


def _longest_runs(flags: np.ndarray) -> np.ndarray:
    """The longest run of consecutive True entries down each column of ``flags`` (T, K).

    With f(t) the last round ≤ t whose flag is False (−1 if none), the run of True flags
    ending at round t has length t − f(t); its maximum over t is the answer, per column.
    """
    rounds = np.arange(flags.shape[0])[:, None]
    last_false = np.maximum.accumulate(np.where(flags, -1, rounds), axis=0)
    return (rounds - last_false).max(axis=0)


def _window(value, name: str, rounds: int) -> int:
    """``value`` as an int in [1, T]."""
    value = integer(value, name)
    if value > rounds:
        raise ValueError(f"{name} must be at most the number of rounds T = {rounds}, got {value}")
    return value


def longest_empty_run(mask) -> int:
    """The longest run of consecutive rounds with no participant (0 if no round is empty,
    T if every round is)."""
    mask = _mask(mask)
    return int(_longest_runs(~mask.any(axis=1)[:, None])[0])


def _groups(groups, n_clients: int) -> np.ndarray:
    array = np.asarray(groups)
    if array.ndim != 1 or array.shape[0] != n_clients:
        raise ValueError(f"groups must have shape ({n_clients},), one group per client, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"groups must be integers, got dtype {array.dtype}")
    return array


def longest_group_absence(mask, groups) -> int:
    """The longest run of consecutive rounds in which no client of some group participates,
    maximised over the groups.

    ``groups`` is an (N,) integer array: ``groups[n]`` is client n's group (any integers;
    the groups are the distinct values present). A group that never participates gives T.
    With one client per group this is the longest absence run of any client, which is
    FedSUM's τ_max (the proof of its Lemma F.1); with a single group it is
    :func:`longest_empty_run`.
    """
    mask = _mask(mask)
    groups = _groups(groups, mask.shape[1])
    _, label = np.unique(groups, return_inverse=True)
    order = np.argsort(label, kind="stable")
    ordered = label[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    present = np.logical_or.reduceat(mask[:, order], starts, axis=1)  # (T, groups)
    return int(_longest_runs(~present).max())


def participation_error(mask, period) -> float:
    """The participation error realised on the trace (Wang & Ji, NeurIPS 2022, §3).

    S. Wang, M. Ji, "A Unified Analysis of Federated Learning with Arbitrary Client
    Participation", NeurIPS 2022, arXiv:2205.13648, §3: participation enters their
    convergence bound through the single term δ̃²(P), built from the aggregation weights
    q_n^t summed over intervals of P rounds. The paper defines it in expectation over the
    participation; this is its realised value on one trace, with FedAvg's weights
    q_n^t = 1/|S_t| for n ∈ S_t and 0 otherwise (every weight 0 in an empty round):

        p_n^i = (1/P) Σ_{t=iP}^{(i+1)P−1} q_n^t,
        δ²(P) = (1/I) Σ_{i<I} (Σ_n |p_n^i − 1/N|)²,   I = ⌊T/P⌋ whole intervals

    (rounds after the last whole interval are left out). It is 0 when every interval gives
    every client the same total weight (full participation; one client per round in a cycle
    of P = N rounds), 1 for an interval of empty rounds, and at most 4 (Σ_n |p_n^i − 1/N| ≤ 2
    since Σ_n p_n^i ≤ 1). ``period`` = P, an integer in [1, T].
    """
    mask = _mask(mask)
    rounds, n = mask.shape
    period = _window(period, "period", rounds)
    intervals = rounds // period
    size = mask.sum(axis=1)
    q = mask / np.maximum(size, 1)[:, None]
    p = q[: intervals * period].reshape(intervals, period, n).mean(axis=1)
    deviation = np.abs(p - 1.0 / n).sum(axis=1)
    return float(np.mean(deviation**2))


def return_time(mask) -> float:
    """The largest mean return time over the clients: max_n T / (rounds client n takes part in),
    ``inf`` when some client never takes part; 1 under full participation.

    It is the empirical counterpart of the expected return time 1/π_n of an availability
    chain with stationary law π (Kac's formula, E_n[τ_n^+] = 1/π_n). With one participant
    per round the trace is the path of a walk over the clients, the setting of M. Even,
    "Stochastic Gradient Descent under Markovian Sampling Schemes", ICML 2023,
    arXiv:2302.14428, whose lower bound for SGD along such a path grows with the chain's
    hitting time τ_hit = max_{m,n} E_m[τ_n]; since E_n[τ_n^+] ≤ 1 + max_m E_m[τ_n],
    τ_hit ≥ max_n 1/π_n − 1.
    """
    mask = _mask(mask)
    counts = mask.sum(axis=0)
    if not counts.all():
        return math.inf
    return float(mask.shape[0] / counts.min())


def _relaxation_times(mask: np.ndarray) -> np.ndarray:
    """Each client's relaxation time 1/(1 − |λ|) (see :func:`mixing_time`), shape (N,)."""
    prev, nxt = mask[:-1], mask[1:]
    from_on = prev.sum(axis=0)
    from_off = (mask.shape[0] - 1) - from_on
    on_to_off = (prev & ~nxt).sum(axis=0)
    off_to_on = (~prev & nxt).sum(axis=0)
    p_on = np.divide(off_to_on, from_off, out=np.zeros(mask.shape[1]), where=from_off > 0)
    p_off = np.divide(on_to_off, from_on, out=np.zeros(mask.shape[1]), where=from_on > 0)
    gap = 1.0 - np.abs(1.0 - p_on - p_off)
    return np.divide(1.0, gap, out=np.full(mask.shape[1], np.inf), where=gap > 0)


def mixing_time(mask) -> float:
    """The largest relaxation time over the clients of the two-state chain fitted to each
    client's participation; ``inf`` if some client never switches state.

    Client n's sequence mask[0, n], …, mask[T−1, n] is read as a two-state chain (off, on)
    with transition matrix [[1 − p_on, p_on], [p_off, 1 − p_off]], estimated by counting its
    T − 1 transitions t → t + 1 (t = 0..T−2):

        p_on  = #(off at t, on at t+1) / #(off at t),
        p_off = #(on at t, off at t+1) / #(on at t).

    A two-state transition matrix has the eigenvalues 1 and λ = 1 − p_on − p_off (its trace
    is 1 + λ). The absolute spectral gap is γ⋆ = 1 − |λ| and the relaxation time
    t_rel = 1/γ⋆ (D. A. Levin, Y. Peres, E. L. Wilmer, "Markov Chains and Mixing Times",
    2nd ed., AMS 2017, Ch. 12); for λ ≥ 0 it is 1/(p_on + p_off).

    Rule for a state never left in the counted transitions (a zero denominator): its
    exit probability is taken as 0 — no exit seen, none estimated. So a client that never
    switches (always on, always off, or T = 1) has λ = 1, γ⋆ = 0 and t_rel = ``inf``; so
    does full participation. A client that switches once, at the end, gets
    t_rel = 1/p = T − 1 from the one state it leaves. A client that alternates every round
    has λ = −1 and t_rel = ``inf`` (a periodic chain).

    The fit is first-order: a deterministic cycle such as one client per round in turn
    (N ≥ 3) looks, to each client, like a chain that leaves "on" at once and "off" at rate
    ≈ 1/(N − 1), i.e. λ ≈ −1/(N − 1) and t_rel ≈ (N − 1)/(N − 2), fast mixing (N = 2
    alternates: ``inf``); long stretches on and off — blocks of K rounds each in turn — show
    as λ near 1 and t_rel of order K.

    The mixing time of the participation chain enters the convergence bounds of CA-Fed
    (A. Rodio et al., "Federated Learning under Heterogeneous and Correlated Client
    Availability", IEEE/ACM ToN 2023, extending their IEEE INFOCOM 2023 paper) and of Markov chain gradient
    descent (T. Sun, Y. Sun, W. Yin, "On Markov Chain Gradient Descent", NeurIPS 2018);
    :mod:`participation.markov` has the exact spectra of given chains and an estimator with
    standard errors.
    """
    mask = _mask(mask)
    return float(_relaxation_times(mask).max())


def _label_hist(label_hist, n_clients: int) -> np.ndarray:
    array = np.asarray(label_hist)
    if array.ndim != 2 or array.shape[0] != n_clients or array.shape[1] < 1:
        raise ValueError(f"label_hist must have shape ({n_clients}, C), one row of label counts per client, "
                         f"got shape {array.shape}")
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"label_hist must hold integer or real counts, got dtype {array.dtype}")
    array = array.astype(float)
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"label_hist must be finite and ≥ 0, found {float(array[where])!r} at index {where}")
    if not array.sum() > 0:
        raise ValueError("label_hist must hold at least one positive count, got all zeros")
    return array


def label_coverage(mask, label_hist, window) -> float:
    """The mean over windows of ``window`` rounds of the total-variation distance between the
    label mix of the window's participations and the population's label mix.

    ``label_hist`` (N, C): each client's label counts (non-negative, not all zero). For each
    of the ⌊T/window⌋ whole windows W (rounds after the last are left out),
    m_W = Σ_{t∈W} Σ_{n∈S_t} label_hist[n], normalised to sum 1, and the distance is
    ½‖m_W − μ‖₁ with μ = Σ_n label_hist[n] normalised. A window with no participation, or
    whose participants hold no labelled sample, counts as distance 1. The result lies in
    [0, 1]; it is 0 when every client takes part in every round. ``window`` is an integer
    in [1, T].
    """
    mask = _mask(mask)
    rounds, n = mask.shape
    hist = _label_hist(label_hist, n)
    window = _window(window, "window", rounds)
    windows = rounds // window
    counts = mask[: windows * window].reshape(windows, window, n).sum(axis=1)  # (windows, N)
    mix = counts.astype(float) @ hist  # (windows, C)
    total = mix.sum(axis=1)
    population = hist.sum(axis=0) / hist.sum()
    share = np.divide(mix, total[:, None], out=np.zeros_like(mix), where=total[:, None] > 0)
    distance = np.where(total > 0, 0.5 * np.abs(share - population).sum(axis=1), 1.0)
    return float(distance.mean())


def default_scale(mask) -> int:
    """The default ``period`` and ``window`` of :func:`measures`: N / (mean participants per
    round) = N·T / (participations), the rounds a full turn of the clients takes on average,
    rounded to the nearest integer (halves up) and clipped to [1, T]; T when nobody ever
    takes part."""
    mask = _mask(mask)
    rounds, n = mask.shape
    total = int(mask.sum())
    if total == 0:
        return rounds
    return int(min(rounds, max(1, math.floor(n * rounds / total + 0.5))))


def measures(mask, *, period=None, window=None, groups=None, label_hist=None) -> dict[str, float]:
    """Every measure of this module for one trace, keyed and ordered as in :data:`NAMES`.

    ``tau_max``, ``tau_avg``: :func:`participation.delays.delay_metrics` (rounds 0..T−1).
    ``period`` (for :func:`participation_error`) and ``window`` (for
    :func:`label_coverage`) default to :func:`default_scale`. ``longest_group_absence`` is
    present only when ``groups`` is given, ``label_coverage`` only when ``label_hist`` is.
    Every value is a float (``inf`` where the measure is unbounded).
    """
    mask = _mask(mask)
    scale = default_scale(mask) if period is None or window is None else None
    period = scale if period is None else period
    window = scale if window is None else window
    delays = delay_metrics(mask)
    values = {
        "tau_max": float(delays.tau_max),
        "tau_avg": float(delays.tau_avg),
        "longest_empty_run": float(longest_empty_run(mask)),
    }
    if groups is not None:
        values["longest_group_absence"] = float(longest_group_absence(mask, groups))
    values["participation_error"] = participation_error(mask, period)
    values["return_time"] = return_time(mask)
    values["mixing_time"] = mixing_time(mask)
    if label_hist is not None:
        values["label_coverage"] = label_coverage(mask, label_hist, window)
    return values
