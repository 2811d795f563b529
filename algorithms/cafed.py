"""CA-Fed (Rodio, Faticanti, Marfoq, Neglia, Leonardi, "Federated Learning under Heterogeneous
and Correlated Client Availability", IEEE/ACM ToN 2023) and its "Unbiased" baseline, in the
paper's notation (α, q, π, λ, E = ``local_steps``).

Round t (Algorithm 1) of every run of a batch at once, A_t = the run's active clients
(``r.mask``):

1. Availability counts (Algorithm 1, line 4): c_k += 1{k ∈ A_t}; the transition N_ij of
   every client from its state in round t−1 to round t (from the second round on). With a
   Beta pseudo-count a = ``prior`` > 0 (the Beta-prior estimators of π̂_k and P̂_k, §IV-B)::

       π̂_k = (c_k + a)/(T + 2a)                (T rounds seen; n_k = m_k = a)
       p̂_ii = (N_ii + a)/(N_i0 + N_i1 + 2a),   λ̂_k = p̂_00 + p̂_11 − 1   (eq. (238))

   λ̂ equals ``participation.markov.estimate(trace so far, prior=a).lam``; for a → 0, π̂
   tends to its ``pi``. ``oracle=(pi, lam)`` replaces (π̂, λ̂) by the true chain parameters,
   as in the experiments (§V-A, "Benchmarks"); the counts are still kept.
2. Loss-gap reports (Algorithm 1, line 3; §IV-A, and the filter (17) of §IV-B). The problem
   interface exposes no per-client loss, so every active client reports the scalar
   s_k = ½‖g_k(w_{t,0}; B^k_{t,0})‖², its first local stochastic gradient (the batch the
   paper uses for the loss, §IV-A). The server
   filters them by (17): F̂ ← (1 − β1_{A_t})⊙F̂ + β1_{A_t}⊙s (clients never heard from start
   at the mean of the first reports, as the authors' code does) and uses F̂ as the gap
   F̂ − F̂* of (18)–(20). Under μ-strong convexity and L-smoothness
   ½‖∇F_k‖²/L ≤ F_k − F_k* ≤ ½‖∇F_k‖²/μ, and the proxy (20) is homogeneous in the gap,
   so with τ = 0 the greedy choice is that of the gap ½‖∇F_k‖²/μ for any μ.
3. Weights (Algorithm 1, lines 5–7): q = α/π̂, then ``bounds.cafed.greedy_weights``
   (Guideline B by |λ̂| descending, then Guideline A by π̂ ascending, accept-or-revert with
   threshold τ, proxy (20) with κ̄²). λ̂ is raised to the admissible bound of (236) at π̂
   where the two small-sample estimates disagree (it only orders the clients).
4. The active clients with q_k > 0 run E local SGD steps (2) from w_{t,0} and
   send Δ_k = w^k_{t,E} − w_{t,0}; the server steps (Algorithm 1, line 12; eq. (3))::

       w_{t+1,0} = w_{t,0} + η̄ Σ_{k∈A_t, q_k>0} q_k Δ_k           (``normalise=False``, default)
       w_{t+1,0} = w_{t,0} + η̄ Σ q_k Δ_k / Σ_{k∈A_t, q_k>0} q_k    (``normalise=True``, AdaFed's rule)

   q is not normalised (as in the Unbiased baseline, §V-A; E[Σ_{A_t} α_k/π_k] = Σ α_k = 1).
   W = R^d, so no projection; η_t = ``eta_l`` and η̄ = ``eta_g`` (per run, the round's
   ``r.eta_l``, ``r.eta_g``) are constant, as in the experiments.

Everything is vectorised over the runs and clients of a batch except the greedy search of
step 3, which ``CAFed._weights`` solves run by run.

Unbiased (§V-A, "Benchmarks"): every active client with q_k = α_k/π_k (π̂ or the oracle's π),
same server step; no reports. Communication: w down to every active client; Δ_k up from the
aggregated ones. CA-Fed's uplink is counted as d + 1 floats per active client (an upper
bound: an excluded client sends only its scalar report, App. H1).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from bounds.cafed import greedy_weights
from participation import markov

from .base import Algorithm, Round, local_sgd

__all__ = ["CAFed", "CAFedUnbiased", "CAFedState", "ALGORITHMS"]

#: Target importance weights must sum to 1 within this tolerance.
SIMPLEX_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class CAFedState:
    """After round t, per run (batch axis first): ``x`` = w_{t+1,0} (B, d); availability counts
    ``available`` c (B, N) and ``transitions`` N_ij (B, N, 2, 2) (long); ``previous`` (B, N)
    bool, A_t as a mask; ``rounds`` T seen (an int, shared by the runs of a batch); ``report``
    F̂ (B, N) (nan before the first report); ``weights`` q^(t) (B, N) and ``kept`` (B, N) bool,
    the mask of {k ∈ A_t : q_k > 0}, the clients aggregated in round t."""

    x: torch.Tensor
    available: torch.Tensor
    transitions: torch.Tensor
    previous: torch.Tensor
    rounds: int
    report: torch.Tensor
    weights: torch.Tensor
    kept: torch.Tensor


def _real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def _vector(value, name: str) -> tuple[float, ...]:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of numbers, got {value!r}") from None
    if a.ndim != 1 or a.size == 0 or not np.isfinite(a).all():
        raise ValueError(f"{name} must be a non-empty finite 1-D array, got {value!r}")
    return tuple(float(v) for v in a)


def _alpha(alpha) -> tuple[float, ...] | None:
    if alpha is None:
        return None
    a = _vector(alpha, "alpha")
    if min(a) < 0 or abs(math.fsum(a) - 1) > SIMPLEX_TOL:
        raise ValueError(f"alpha must lie on the probability simplex (>= 0, sum 1), got {alpha!r}")
    return a


def _oracle(oracle):
    if oracle is None:
        return None
    try:
        pi, lam = oracle
    except (TypeError, ValueError):
        raise ValueError(f"oracle must be a pair (pi, lam) of per-client arrays, got {oracle!r}") from None
    pi, lam = np.array(_vector(pi, "oracle pi")), np.array(_vector(lam, "oracle lam"))
    if pi.size != lam.size:
        raise ValueError(f"oracle pi has {pi.size} entries but lam has {lam.size}")
    if not ((pi > 0) & (pi <= 1)).all():
        raise ValueError(f"oracle pi must lie in (0, 1], got {pi.tolist()}")
    lower = np.where(pi < 1, markov.lambda_lower_bound(np.where(pi < 1, pi, 0.5)), -1.0)
    if not ((lam > -1) & (lam < 1) & (lam >= lower - 1e-12)).all():
        raise ValueError(f"oracle lam must lie in [max(-1, 1 - 1/pi, 1 - 1/(1 - pi)), 1) (eq. (236)), got {lam.tolist()}")
    return tuple(pi.tolist()), tuple(lam.tolist())


@dataclass(frozen=True, repr=False)
class CAFedUnbiased(Algorithm):
    """Unbiased (CA-Fed §V-A, "Benchmarks"): active clients aggregated with q_k = α_k/π_k.

    Hyper-parameters: ``eta_l`` η, ``eta_g`` η̄, ``local_steps`` E; ``alpha`` target
    importance (None: uniform 1/N); ``oracle`` (pi, lam) true chain parameters (None: online
    estimates); ``prior`` a > 0 Beta pseudo-count of the estimates; ``normalise`` divides the
    server step by Σ q_k over the aggregated clients.
    """

    alpha: tuple | None = None
    oracle: tuple | None = None
    prior: float = 1.0
    normalise: bool = False

    name = "cafed-unbiased"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "alpha", _alpha(self.alpha))
        object.__setattr__(self, "oracle", _oracle(self.oracle))
        prior = _real(self.prior, "prior")
        if prior <= 0:
            raise ValueError(f"prior must be > 0 (the estimates need π̂ > 0), got {self.prior!r}")
        object.__setattr__(self, "prior", prior)
        if not isinstance(self.normalise, bool):
            raise ValueError(f"normalise must be True or False, got {self.normalise!r}")

    # -- state ---------------------------------------------------------------------------
    def init(self, problem, x0: torch.Tensor) -> CAFedState:
        n = problem.n_clients
        for name, v in (("alpha", self.alpha), ("oracle pi", self.oracle and self.oracle[0])):
            if v is not None and len(v) != n:
                raise ValueError(f"{name} has {len(v)} entries but the problem has {n} clients")
        b, dev = x0.shape[0], x0.device
        long = dict(dtype=torch.long, device=dev)
        return CAFedState(x=x0, available=torch.zeros((b, n), **long), transitions=torch.zeros((b, n, 2, 2), **long),
                          previous=torch.zeros((b, n), dtype=torch.bool, device=dev), rounds=0,
                          report=x0.new_full((b, n), math.nan), weights=x0.new_zeros((b, n)),
                          kept=torch.zeros((b, n), dtype=torch.bool, device=dev))

    def target(self, n: int) -> np.ndarray:
        """α (float64, (n,))."""
        return np.full(n, 1.0 / n) if self.alpha is None else np.array(self.alpha)

    def estimates(self, state: CAFedState) -> tuple[np.ndarray, np.ndarray]:
        """Online (π̂, λ̂) (float64, the shape of ``state.available``: (B, N), or (N,) for one
        run's state) from the counts in ``state`` (see the module docstring)."""
        a = self.prior
        c = state.available.cpu().numpy()
        N = state.transitions.cpu().numpy()
        pi = (c + a) / (state.rounds + 2.0 * a)
        n0, n1 = N[..., 0, 0] + N[..., 0, 1], N[..., 1, 0] + N[..., 1, 1]
        p00 = (N[..., 0, 0] + a) / (n0 + 2.0 * a)
        p11 = (N[..., 1, 1] + a) / (n1 + 2.0 * a)
        return pi, p00 + p11 - 1.0

    def availability(self, state: CAFedState) -> tuple[np.ndarray, np.ndarray]:
        """The (π, λ) the weights use, shaped as ``state.available``: the oracle's, else the
        estimates with λ̂ raised to the admissible bound of (236) at π̂ (0 < π̂ < 1 and
        −1 < λ̂ < 1 since a > 0)."""
        if self.oracle is not None:
            shape = tuple(state.available.shape)
            return np.broadcast_to(np.array(self.oracle[0]), shape), np.broadcast_to(np.array(self.oracle[1]), shape)
        pi, lam = self.estimates(state)
        return pi, np.maximum(lam, markov.lambda_lower_bound(pi))

    def _observe(self, state: CAFedState, r: Round) -> dict:
        """Counts after observing A_t (Algorithm 1, line 4): c += 1_{A_t}; N[prev, now] += 1 from round 1."""
        now = r.mask
        transitions = state.transitions
        if state.rounds:
            cell = torch.nn.functional.one_hot(state.previous.long() * 2 + now.long(), 4)
            transitions = transitions + cell.view(*now.shape, 2, 2)
        return dict(available=state.available + now.long(), transitions=transitions, previous=now,
                    rounds=state.rounds + 1)

    # -- round -------------------------------------------------------------------------
    def _weights(self, seen: CAFedState, active: np.ndarray) -> np.ndarray:
        """q^(t) (B, N) float64 from the counts and reports of round t: α/π. ``active`` (B,)
        bool: the runs with a client in round t (the rows of the others are not used)."""
        pi, _ = self.availability(seen)
        return self.target(pi.shape[-1]) / pi

    def _report(self, state: CAFedState, problem, r: Round) -> torch.Tensor:
        """Unbiased asks for no reports."""
        return state.report

    def round(self, state: CAFedState, problem, r: Round) -> CAFedState:
        counts = self._observe(state, r)
        if not r.m:
            return CAFedState(x=state.x, report=state.report, weights=state.weights, kept=r.mask, **counts)
        report = self._report(state, problem, r)
        seen = CAFedState(x=state.x, report=report, weights=state.weights, kept=r.mask, **counts)
        fresh = torch.as_tensor(self._weights(seen, r.active.cpu().numpy()), dtype=state.x.dtype, device=state.x.device)
        q = r.where_active(fresh, state.weights)
        sub = _rows_kept(r, r.take(q) > 0)
        x = state.x
        if sub.m:
            start = sub.rows(x)
            X, _ = local_sgd(start, problem, sub, sub.rows(r.eta_l), self.local_steps)
            qk = sub.take(q)
            step = sub.sum(qk[:, None] * (X - start))      # Σ q_k Δ_k
            if self.normalise:
                step = step / sub.sum(qk)[:, None]
            x = sub.where_active(x + r.eta_g * step, x)   # no step for a run that kept no client
        return CAFedState(x=x, report=report, weights=q, kept=sub.mask, **counts)

    def observe(self, before, after: CAFedState, problem, r: Round) -> dict:
        """``weights``: the aggregation weights q^(t) (B, N) of round t, scaled by η̄ (the analysis
        has server rate 1 and absorbs η̄ into q, CA-Fed App. B); NaN in a run's round without an
        available client (no weights are used)."""
        nan = torch.full_like(after.weights, math.nan)
        return {"weights": torch.where(r.active[:, None], r.eta_g * after.weights, nan)}


def _rows_kept(r: Round, keep: torch.Tensor) -> Round:
    """The round restricted to its active rows where ``keep`` (M,) holds (the aggregated
    clients); ``r`` itself when every row is kept."""
    if bool(keep.all()):
        return r
    return dataclasses.replace(r, run=r.run[keep], client=r.client[keep], count=r.sum(keep.to(r.count.dtype)))


@dataclass(frozen=True, repr=False)
class CAFed(CAFedUnbiased):
    """CA-Fed, Algorithm 1: weights by ``bounds.cafed.greedy_weights``.

    Extra hyper-parameters: ``kappa2_bar`` κ̄² ≥ 0 (bias weight of the proxy (16)/(20), 1 in
    Fig. 1); ``tau`` τ ≥ 0 (acceptance threshold; 0 in the experiments, §V-A; a τ above
    every possible decrease of the proxy never excludes, giving the Unbiased weights);
    ``beta`` β ∈ (0, 1] of the report filter (17) (1: the latest report, which the
    experiments' "β = 0" (§V-A) means: the authors' code filters with s = 1 − β).
    """

    kappa2_bar: float = 1.0
    tau: float = 0.0
    beta: float = 1.0

    name = "cafed"

    def __post_init__(self):
        super().__post_init__()
        for field_name in ("kappa2_bar", "tau"):
            value = _real(getattr(self, field_name), field_name)
            if value < 0:
                raise ValueError(f"{field_name} must be >= 0, got {value!r}")
            object.__setattr__(self, field_name, value)
        beta = _real(self.beta, "beta")
        if not 0 < beta <= 1:
            raise ValueError(f"beta must lie in (0, 1], got {self.beta!r}")
        object.__setattr__(self, "beta", beta)

    def communication(self, dim: int, n_active: int) -> tuple[int, int]:
        return dim * n_active, (dim + 1) * n_active

    def _report(self, state: CAFedState, problem, r: Round) -> torch.Tensor:
        """F̂ (B, N) after (17) with s_k = ½‖g_k(w_{t,0}; B^k_{t,0})‖² from every active client
        (the noise of local step 0, ``r.draws(0)``)."""
        G = problem.stochastic_grads(r.rows(state.x), r.client, r.draws(0))
        s = 0.5 * G.square().sum(dim=1)
        report = state.report
        first = torch.isnan(report).all(dim=1) & r.active     # first reports: unseen clients start at their mean
        report = torch.where(first[:, None], r.mean(s)[:, None], report)
        return r.put(report, (1 - self.beta) * r.take(report) + self.beta * s)

    def _weights(self, seen: CAFedState, active: np.ndarray) -> np.ndarray:
        """q^(t) = greedy_weights(α, π, λ, gap = F̂) (Algorithm 1, lines 5–7; Γ̂' = max_k F̂_k, (19))
        for each run in ``active`` (NaN rows for the others). The greedy accept-or-revert search
        is sequential numpy code, so it is solved run by run: the one loop over runs of a round."""
        pi, lam = self.availability(seen)
        gap = seen.report.cpu().numpy().astype(np.float64)
        alpha = self.target(pi.shape[-1])
        q = np.full(pi.shape, math.nan)
        for b in np.flatnonzero(active):
            if not (np.isfinite(gap[b]).all() and np.isfinite(pi[b]).all() and np.isfinite(lam[b]).all()):
                continue          # a diverged run: NaN weights stop it alone, the batch's other runs go on
            q[b] = greedy_weights(alpha, pi[b], lam[b], gap[b], kappa2_bar=self.kappa2_bar, tau=self.tau)
        return q


ALGORITHMS = (CAFed, CAFedUnbiased)
