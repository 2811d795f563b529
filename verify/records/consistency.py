"""Records that contradict themselves or each other are refused before they are judged.

* The header's participation model against the recorded replies (``check_availability``): a
  model with m clients a round ("full": m = N, and every model whose header gives ``m`` in
  ``verify.records.AVAILABILITY``: "uniform", "cyclic", "reshuffled", "any") must have
  exactly that many replies in every round; a Bernoulli model (probabilities p_i, or p_i^t per
  round in the ``probabilities`` field) and a Markov model (stationary π_i, second eigenvalue
  λ_i) are tested client by client on the number of rounds each replied, two-sided, at
  family-wise level ``LEVEL`` (Bonferroni over the clients): the exact binomial tails for a
  constant p_i, the smaller one doubled, the normal approximation of the Poisson-binomial
  count for per-round p_i^t, and for a two-state chain the normal approximation of the
  availability frequency, whose variance π(1 − π)(1 + λ)/((1 − λ)T) is that of a stationary
  two-state chain (the lag-k autocorrelation is λ^k). A probability of 0 or 1 contradicted once
  is refused outright.
* A server that weighted its participants unequally (``check_equal_weights``): Flower's FedAvg and
  FedAvgM weight each reply by its ``num-examples`` (recorded as ``example_weights``), while
  FedSUM (eq. (3)) and Server momentum (Algorithm 1) average the participants equally.
* Constants below what the record's own rounds show (``check_constants``): F_0 =
  (1/N) Σ_i ‖∇f_i(x_0)‖² is at least ‖∇f(x_0)‖² (Jensen's inequality); an L-smooth f bounded
  below has ‖∇f(x)‖² ≤ 2L(f(x) − f*), so ‖∇f(x_0)‖² ≤ 2LΔ_f; σ_g² (and ``zeta2``) bound the
  recorded ``heterogeneity`` of every round, and LOGIT's σ₃² its ``heterogeneity_max``.
* Several records judged together as seeds of one setting (``check_same_setting``): every header
  field that enters a bound (constants, step sizes, schedule, hyper-parameters, K, N, the
  participation model, the algorithm and the problem) must agree, whatever order the records are
  given in; only ``seed``, ``created``, ``notes`` and the constants of one run
  (:data:`PER_RUN_CONSTANTS`) may differ. Two records with the same rounds
  (who replied and every measured value) are one run, whatever their seed labels.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

__all__ = ["LEVEL", "check_availability", "check_same_setting", "check_equal_weights", "check_constants",
           "FREE_FIELDS", "PER_RUN_CONSTANTS"]

#: Family-wise level of the tests of a Bernoulli or Markov header against the replies.
LEVEL = 1e-3
#: Header fields that may differ between the seeds of one setting.
FREE_FIELDS = ("seed", "created", "notes")
#: Constants that belong to one run: CA-Fed's F_B* = min Σ_k p_k F_k and ε_bias = F(w_B*) − F* at
#: the run's own p = π ⊙̃ q (CA-Fed eq. (4) and Thm 1), q the run's aggregation weights.
PER_RUN_CONSTANTS = ("F_B_star", "eps_bias")


def _name(record) -> str:
    return Path(record.path).name if record.path is not None else "the record"


def _round_sizes(model: dict, n_clients: int, rounds: int, m: int) -> np.ndarray:
    """The clients each round of the header's model takes: its pattern's ``round_sizes`` where it
    has one (FedSUM Case 4's short last round of an epoch), else m every round."""
    from participation.patterns import pattern_from_header

    if model.get("model") not in ("full", "any"):
        pattern = pattern_from_header(model, n_clients)
        if hasattr(pattern, "round_sizes"):
            return np.asarray(pattern.round_sizes(rounds))
    return np.full(rounds, m)


def check_availability(record, level: float = LEVEL) -> None:
    """Refuse ``record`` (ValueError naming it, the model and the evidence) when its recorded
    replies contradict the header's ``availability`` model (module docstring)."""
    model = record.header.get("availability") or {}
    kind = model.get("model")
    mask = np.asarray(record.mask, dtype=bool)
    T, N = mask.shape
    if T == 0 or kind in (None, "estimate"):
        if kind is None and "probabilities" in record.vectors:
            _poisson_binomial(record, mask, record.vectors["probabilities"], level)
        return
    from .fields import AVAILABILITY

    counts = mask.sum(axis=1)
    if kind == "full" or "m" in AVAILABILITY.get(kind, ()):
        m = N if kind == "full" else int(model["m"])
        sizes = _round_sizes(model, N, T, m)
        wrong = np.flatnonzero(counts != sizes)
        if wrong.size:
            t = int(wrong[0])
            raise ValueError(f"{_name(record)}: the header's availability {kind!r} gives {int(sizes[t])} client(s) in "
                             f"round {t}, but it has {int(counts[t])} repl{'y' if counts[t] == 1 else 'ies'} "
                             f"({wrong.size} of {T} rounds differ)")
        return
    if kind == "bernoulli":
        if "probabilities" in record.vectors:
            _poisson_binomial(record, mask, record.vectors["probabilities"], level)
        else:
            _binomial(record, mask, np.broadcast_to(np.asarray(model["p"], dtype=float), (N,)), level)
        return
    if kind == "markov":
        _markov(record, mask, np.asarray(model["pi"], dtype=float), np.asarray(model["lam"], dtype=float), level)


def _impossible(record, replies: np.ndarray, p: np.ndarray, T: int, what: str) -> None:
    for value, word in ((0.0, "never"), (1.0, "always")):
        bad = np.flatnonzero((p == value) & (replies != (0 if value == 0 else T)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{_name(record)}: the header's {what} has client {i} available with probability "
                             f"{value:g} ({word}), but it replied in {int(replies[i])} of {T} rounds")


def _refuse(record, what: str, i: int, replies: int, T: int, expected: float, p_value: float, level: float, N: int):
    raise ValueError(f"{_name(record)}: client {i} replied in {replies} of {T} rounds, against {expected:.1f} "
                     f"expected under the header's {what} (two-sided p = {p_value:.2g}, below {level:g}/{N} at "
                     f"family-wise level {level:g}); the replies contradict the model")


def _first_rejected(record, replies, expected, p_values, what, T, level) -> None:
    """Refuse at the first client whose p-value is below the Bonferroni level ``level``/N."""
    N = replies.size
    below = np.flatnonzero(p_values < level / N)
    if below.size:
        i = int(below[0])
        _refuse(record, what if isinstance(what, str) else what(i), i, int(replies[i]), T, float(expected[i]),
                float(p_values[i]), level, N)


def _binomial(record, mask, p, level) -> None:
    """Per client, the exact binomial tails of its reply count, the smaller one doubled (a
    two-sided test), for every client at once."""
    from scipy.stats import binom

    T, N = mask.shape
    replies = mask.sum(axis=0)
    _impossible(record, replies, p, T, "Bernoulli availability")
    random = (p > 0) & (p < 1)
    tails = np.minimum(binom.cdf(replies, T, p), binom.sf(replies - 1, T, p))
    p_values = np.where(random, np.minimum(1.0, 2 * tails), 1.0)
    _first_rejected(record, replies, T * p, p_values, lambda i: f"Bernoulli availability p = {p[i]:g}", T, level)


def _normal(record, replies, mean, var, what, T, level) -> None:
    """Per client, the continuity-corrected normal approximation of its reply count, two-sided."""
    from scipy.stats import norm

    spread = np.sqrt(np.maximum(var, 0.0))
    z = np.maximum(np.abs(replies - mean) - 0.5, 0.0) / np.where(spread > 0, spread, 1.0)
    p_values = np.where(spread > 0, 2 * norm.sf(z), 1.0)
    _first_rejected(record, replies, mean, p_values, what, T, level)


def _poisson_binomial(record, mask, p, level) -> None:
    T, N = mask.shape
    p = np.asarray(p, dtype=float)
    if np.isnan(p).any():
        t, i = (int(v) for v in np.argwhere(np.isnan(p))[0])
        raise ValueError(f"{_name(record)}: probabilities is null for client {i} in round {t}; the replies cannot be "
                         "held against a probability that is not recorded")
    certain = (p == 0) | (p == 1)
    contradicted = np.argwhere(certain & (mask != (p == 1)))
    if contradicted.size:
        t, i = (int(v) for v in contradicted[0])
        raise ValueError(f"{_name(record)}: the recorded probabilities give client {i} probability {p[t, i]:g} in "
                         f"round {t}, but it {'replied' if mask[t, i] else 'did not reply'}")
    _normal(record, mask.sum(axis=0), p.sum(axis=0), (p * (1 - p)).sum(axis=0), "per-round probabilities p_i^t", T,
            level)


def _markov(record, mask, pi, lam, level) -> None:
    T, N = mask.shape
    pi, lam = np.broadcast_to(pi, (N,)), np.broadcast_to(lam, (N,))
    replies = mask.sum(axis=0)
    _impossible(record, replies, pi, T, "Markov availability (stationary π)")
    var = T * pi * (1 - pi) * (1 + lam) / (1 - lam)
    _normal(record, replies, T * pi, var, "Markov availability (stationary π, λ)", T, level)


def _content(record) -> str:
    """A digest of what a record measured: who was selected and replied, and every per-round and
    per-client value."""
    digest = hashlib.sha256()
    for array in (record.mask, record.selected):
        digest.update(np.ascontiguousarray(array).tobytes())
    for group in (record.metrics, record.vectors):
        for key in sorted(group):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(np.asarray(group[key], dtype=np.float64)).tobytes())
    return digest.hexdigest()


def check_same_setting(records: list, free: tuple = ()) -> list:
    """The records judged together, once refused those that are not seeds of one setting: a header
    field other than :data:`FREE_FIELDS` (and ``free``) that differs (named with both values), or
    two records with the same rounds (named as one run). Noise-free records (σ² = 0 in every
    header) of the same rounds are one run too, kept once: the seeds of a run without noise repeat
    it exactly, as ``check --noise-free --record`` writes them."""
    if len(records) < 2:
        return list(records)
    first = records[0]
    keys = sorted(set().union(*(r.header.keys() for r in records)) - set(FREE_FIELDS) - set(free))
    for other in records[1:]:
        for key in keys:
            mine, theirs = first.header.get(key), other.header.get(key)
            if key == "constants":
                mine, theirs = (_shared(c) for c in (mine, theirs))
                differing = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
                if differing:
                    name = differing[0]
                    raise ValueError(f"{_name(first)} and {_name(other)} differ in constants.{name} "
                                     f"({_short(mine.get(name))} against {_short(theirs.get(name))}): records judged "
                                     "together must be seeds of one setting")
            elif mine != theirs:
                raise ValueError(f"{_name(first)} and {_name(other)} differ in {key} ({_short(mine)} against "
                                 f"{_short(theirs)}): records judged together must be seeds of one setting")
    seen: dict[str, object] = {}
    noise_free = all((r.header.get("constants") or {}).get("sigma2") == 0 for r in records)
    for record in records:
        key = _content(record)
        if key in seen and not noise_free:
            raise ValueError(f"{_name(seen[key])} and {_name(record)} hold the same rounds: one run, whatever their "
                             "seed labels; judge it once")
        seen.setdefault(key, record)
    return list(seen.values())


def _shared(constants) -> dict:
    return {k: v for k, v in (constants or {}).items() if k not in PER_RUN_CONSTANTS}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def check_equal_weights(record, tolerance: float = 1e-12) -> None:
    """Refuse a record whose server weighted the replies of a round unequally (its
    ``example_weights``), naming the round and the weights; the theorems judged on such records
    average the participants equally."""
    weights = record.vectors.get("example_weights")
    if weights is None:
        return
    for t in range(record.n_rounds):
        row = weights[t][record.mask[t]]
        row = row[np.isfinite(row)]
        if row.size > 1 and row.max() - row.min() > tolerance * row.max():
            raise ValueError(f"{_name(record)}: in round {t} the server weighted the replies unequally (from "
                             f"{row.min():.3g} to {row.max():.3g}, e.g. Flower's num-examples); the theorems average "
                             "the participants equally: reply with equal weights")


#: Relative slack of :func:`check_constants` for the rounding of the recorded numbers.
CONSTANTS_RTOL = 1e-9


def check_constants(record, given: dict, largest: bool = False) -> None:
    """Refuse ``record`` when a constant it is judged with (``given``: its header's, or those passed
    in their place) is below what its own rounds show (module docstring), naming both values.
    ``largest``: ``zeta2`` is LOGIT's σ₃², a bound on every client's ‖∇F_n − ∇f‖², so on the
    recorded ``heterogeneity_max`` too."""
    def number(key):
        value = given.get(key)
        return None if value is None else float(value)

    def above(seen, limit) -> bool:
        return seen > limit + CONSTANTS_RTOL * max(abs(seen), abs(limit))

    grad2 = record.metrics.get("grad_norm2")
    first = float(grad2[0]) if grad2 is not None and grad2.size and np.isfinite(grad2[0]) else None
    F0, L, delta_f = number("F0"), number("L"), number("delta_f")
    if first is not None and F0 is not None and above(first, F0):
        raise ValueError(f"{_name(record)}: F0 = {F0!r} is below ‖∇f(x_0)‖² = {first!r} recorded in round 0; "
                         "F_0 = (1/N) Σ_i ‖∇f_i(x_0)‖² is at least ‖∇f(x_0)‖² (Jensen's inequality)")
    if first is not None and L is not None and delta_f is not None and above(first, 2 * L * delta_f):
        raise ValueError(f"{_name(record)}: ‖∇f(x_0)‖² = {first!r} recorded in round 0 exceeds 2·L·Δ_f = "
                         f"{2 * L * delta_f!r} (L = {L!r}, delta_f = {delta_f!r}); an L-smooth f has "
                         "‖∇f(x)‖² ≤ 2L(f(x) − f*), so these constants are not the run's")
    bounds = [("sigma_g2", "heterogeneity"), ("zeta2", "heterogeneity")] + ([("zeta2", "heterogeneity_max")]
                                                                            if largest else [])
    for key, field in bounds:
        limit, seen = number(key), record.metrics.get(field)
        if limit is None or seen is None or not np.isfinite(seen).any():
            continue
        t = int(np.nanargmax(seen))
        if above(float(seen[t]), limit):
            raise ValueError(f"{_name(record)}: constants.{key} = {limit!r} is below the {field} {float(seen[t])!r} "
                             f"recorded in round {t}; it bounds that quantity at every iterate")
